"""A thread's summary DAG laid out as SVG on the server: one row per level, x by the seqs covered.

Why on the server: the page must work with no network and no drawing library, and a
summary's place is fully known from its seq range, so the layout is arithmetic. Each
summary is a box spanning the messages it covers (so a parent spans its children),
the top level on top, with a line from each parent to each child; the runs of
messages no summary covers yet sit on the bottom row, level 0. The boxes carry their
ids in ``data-summary`` for the page's script and a ``<title>`` for a tooltip.
"""

from __future__ import annotations

from pydantic import BaseModel

from palimpsest.server.ui.views import ThreadDag

WIDTH = 1000
ROW = 64
BOX = 34
MARGIN = 40
MIN_BOX = 8


class Box(BaseModel):
    """One drawn node: a summary, or a run of uncovered messages (``summary_id`` None)."""

    summary_id: str | None
    level: int
    x: float
    y: float
    width: float
    label: str
    title: str
    verified: bool = True


class Line(BaseModel):
    """A parent-to-child edge."""

    x1: float
    y1: float
    x2: float
    y2: float


class DagDrawing(BaseModel):
    """What the template draws."""

    width: int
    height: int
    boxes: list[Box]
    lines: list[Line]
    rows: list[tuple[int, float]]


def layout(dag: ThreadDag) -> DagDrawing:
    """Place every summary and uncovered run of a thread's DAG."""
    top = max(dag.levels, default=0)
    span = max(dag.message_count, 1)
    scale = (WIDTH - MARGIN) / span

    def row_y(level: int) -> float:
        return 10 + (top - level) * ROW

    def place(first: int, last: int) -> tuple[float, float]:
        x = MARGIN + first * scale
        return x, max((last - first + 1) * scale - 2, MIN_BOX)

    boxes: dict[str, Box] = {}
    for level, nodes in dag.levels.items():
        for node in nodes:
            summary = node.summary
            x, width = place(summary.first_seq, summary.last_seq)
            boxes[summary.id] = Box(
                summary_id=summary.id,
                level=level,
                x=round(x, 1),
                y=row_y(level),
                width=round(width, 1),
                label=f"L{level} · {summary.message_count}" if width > 60 else f"L{level}",
                title=f"{summary.id}: level {level}, seq {summary.first_seq}..{summary.last_seq}, "
                f"{summary.tokens} tokens",
                verified=node.verified,
            )
    lines = []
    for nodes in dag.levels.values():
        for node in nodes:
            parent = boxes[node.summary.id]
            for child_id in node.summary.child_ids:
                child = boxes.get(child_id)
                if child is not None:
                    lines.append(
                        Line(
                            x1=parent.x + parent.width / 2,
                            y1=parent.y + BOX,
                            x2=child.x + child.width / 2,
                            y2=child.y,
                        )
                    )
    drawn = list(boxes.values())
    for first, last in dag.uncovered:
        x, width = place(first, last)
        count = last - first + 1
        drawn.append(
            Box(
                summary_id=None,
                level=0,
                x=round(x, 1),
                y=row_y(0),
                width=round(width, 1),
                label=f"{count} msg" if width > 40 else "",
                title=f"{count} messages not yet summarized, seq {first}..{last}",
            )
        )
    return DagDrawing(
        width=WIDTH,
        height=int(row_y(0) + BOX + 10),
        boxes=drawn,
        lines=lines,
        rows=[(level, row_y(level) + BOX / 2) for level in range(top, -1, -1)],
    )
