"""Covered floors: per thread, the seq below which every message is under a level-1 summary.

Why: the frontier of a thread is its top summaries plus the messages no summary covers.
Finding those messages by checking every message for a SUMMARIZES edge costs the whole
thread on every turn, so a 100,000-message thread paid a hundred times what a short one
did. Both stores keep a floor per thread instead (SQLite: the ``covered_floors`` table;
Neo4j: ``t.covered_floor``) and read messages from it up: below the floor every message
is covered, so the frontier there is summaries alone. A floor is only raised, when
level-1 summaries are written: summaries are never deleted and an archived run was
compacted first, so what was covered stays covered. A missing floor is 0, which is
always true (merely slower); the next level-1 write raises it over every run written
before.
"""

from __future__ import annotations

from collections.abc import Iterable


def raised_floor(floor: int, spans: Iterable[tuple[int, int]]) -> int:
    """The floor after level-1 runs ``(first_seq, last_seq)``: raised while a run starts at or under it.

    ``spans`` may come in any order and may include runs wholly below the floor; runs
    never overlap (invariant 2), so the floor stops at the first seq no run covers.
    """
    for first, last in sorted(spans):
        if first > floor:
            break
        floor = max(floor, last + 1)
    return floor
