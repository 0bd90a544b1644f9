"""How CLI results look: rich tables for people, JSON for scripts, from the same models.

Kept apart from the commands (``main.py`` and its sibling modules) so they stay
a list of thin verbs: each one calls a domain function and hands its pydantic result
to one renderer here. Every
renderer builds ``rich.text.Text`` from stored strings, never markup, so a message that
contains ``[bold]`` prints as written.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel
from rich.console import Console, Group
from rich.panel import Panel
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from palimpsest.graph_schema.models import ExpandPage, FactStats, MaintenanceCycle, Message, StoreStats, Summary

if TYPE_CHECKING:  # only annotations: importing retrieval here would load it for every command
    from palimpsest.scheduler.facts import KgResult
    from palimpsest.server.feeds.ingest import IngestReport
    from palimpsest.server.feeds.transcripts import IngestProgress, ProgressCallback
    from palimpsest.server.retrieval.context import AssembledContext
    from palimpsest.server.retrieval.grep import GrepHit
    from palimpsest.server.retrieval.recall import RecallResult


def stdout_console() -> Console:
    """A console on the current stdout (made per call, so test runners can capture it)."""
    return Console(file=sys.stdout, highlight=False)


def stderr_console() -> Console:
    """A console on the current stderr, for progress and diagnostics."""
    return Console(file=sys.stderr, highlight=False)


def print_json(value: BaseModel | dict[str, Any] | list[Any]) -> None:
    """Write a result as JSON on stdout, nothing else, so scripts can parse it."""
    if isinstance(value, BaseModel):
        text = value.model_dump_json(indent=2)
    else:
        text = json.dumps(value, indent=2, ensure_ascii=False)
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def ingest_table(report: IngestReport) -> Table:
    """One row per file, the partitions it wrote below its path, then the totals when there are several files.

    ``skipped`` counts the lines that hold no conversation (a transcript's bookkeeping),
    so a file whose lines do not all become messages says why.
    """
    table = Table(title="ingested")
    table.add_column("file", overflow="fold")
    for name in ("format", "messages", "appended", "duplicates", "skipped", "threads"):
        table.add_column(name, justify="left" if name == "format" else "right", min_width=len(name))
    for item in report.files:
        table.add_row(
            _with_partitions(Text(item.path), item.partitions),
            item.format,
            str(item.messages),
            str(item.appended),
            str(item.duplicates),
            str(item.skipped),
            str(item.threads),
        )
    if len(report.files) > 1:
        table.add_section()
        every = sorted({name for item in report.files for name in item.partitions})
        table.add_row(
            _with_partitions(Text("total"), every),
            "",
            str(report.messages),
            str(report.appended),
            str(report.duplicates),
            str(report.skipped),
            str(report.threads),
        )
    return table


def _with_partitions(label: Text, partitions: Sequence[str]) -> Text:
    """``label`` with the partitions written to on a dim line below it: ``in claude, default``."""
    if partitions:
        label.append(f"\nin {', '.join(partitions)}", style="dim")
    return label


def stats_table(stats: StoreStats) -> Table:
    """Counts of a store (one partition or all) as a two-column table."""
    scope = stats.partition if stats.partition is not None else "all partitions"
    table = Table(title=Text(f"{stats.store} store, {scope}"))
    table.add_column("what")
    table.add_column("count", justify="right")
    table.add_row("threads", str(stats.threads))
    table.add_row("messages", str(stats.messages))
    for level in sorted(stats.summaries_by_level):
        table.add_row(f"summaries L{level}", str(stats.summaries_by_level[level]))
    if not stats.summaries_by_level:
        table.add_row("summaries", "0")
    table.add_row("facts", str(stats.facts))
    table.add_row("tokens", str(stats.tokens))
    table.add_row("archived", str(stats.archived_messages))
    table.add_row("archive files", str(stats.archived_runs))
    if stats.bytes_on_disk is not None:
        table.add_row("size on disk", f"{stats.bytes_on_disk / 1_000_000:,.1f} MB")
    if stats.bytes_reclaimable:
        table.add_row("reclaimable", f"{stats.bytes_reclaimable / 1_000_000:,.1f} MB")
    if stats.archive_bytes:
        table.add_row("archives (apart)", f"{stats.archive_bytes / 1_000_000:,.1f} MB")
    return table


def partitions_line(partitions: dict[str, int]) -> Text:
    """Which partitions the store holds, under counts of one of them: the others are not empty."""
    if not partitions:
        return Text("No partition holds a thread yet.")
    listed = ", ".join(f"{name} ({count} thread{'s' if count != 1 else ''})" for name, count in partitions.items())
    return Text(f"Partitions: {listed}. Show one with --partition NAME, all with --all-partitions.")


def hits_table(hits: Sequence[GrepHit]) -> Table:
    """Search hits, best first: where each one sits, its id, its snippet below the id, and a tool call's
    result (or a result's call) below that."""
    table = Table(title=f"{len(hits)} hit{'s' if len(hits) != 1 else ''}", show_lines=True)
    table.add_column("score", justify="right", no_wrap=True)
    table.add_column("where", overflow="fold")
    table.add_column("id and snippet", ratio=1)
    for hit in hits:
        kind = hit.kind if hit.level is None else f"{hit.kind} L{hit.level}"
        if hit.role is not None:
            kind = f"{kind} ({hit.role.value})"
        where = Text(kind)
        where.append(f"\n{hit.thread_id or ''}", style="dim")
        body = Text(hit.id, style="bold")
        body.append("\n" + " ".join(hit.snippet.split()))
        if hit.paired_id is not None:
            body.append(f"\nwith {hit.paired_id}: " + " ".join((hit.paired_snippet or "").split()), style="dim")
        if hit.covered_by:
            body.append(f"\nin {hit.covered_by[0]}", style="dim")
        table.add_row(f"{hit.score:.3g}", where, body)
    return table


def summary_panel(summary: Summary) -> Panel:
    """Everything ``describe`` knows about a summary, its text below the fields."""
    fields = Table.grid(padding=(0, 2))
    fields.add_column(style="bold")
    fields.add_column()
    rows = [
        ("thread", summary.thread_id),
        ("partition", summary.partition),
        ("level", str(summary.level)),
        ("seq", f"{summary.first_seq}..{summary.last_seq} ({summary.message_count} messages)"),
        ("time", f"{summary.earliest_at.isoformat()} .. {summary.latest_at.isoformat()}"),
        ("tokens", f"{summary.tokens} (sources {summary.source_tokens})"),
        ("summarizer", summary.summarizer),
        ("children", ", ".join(summary.child_ids)),
        ("parent", summary.parent_id or "none (on the frontier)"),
        ("digest", summary.digest),
        ("created", summary.created_at.isoformat()),
    ]
    for name, value in rows:
        fields.add_row(name, Text(value))
    return Panel(Group(fields, Text(""), Text(summary.text)), title=Text(summary.id), title_align="left")


def print_expansion(console: Console, page: ExpandPage) -> None:
    """Each item of an expansion page, header then verbatim content, then where the page ends."""
    for item in page.items:
        if isinstance(item, Message):
            header = Text(f"#{item.seq} {item.role.value}", style="bold")
            header.append(f"  {item.id}  {item.created_at.isoformat()}", style="dim")
            if item.tool_call_id:
                header.append(f"  tool_call {item.tool_call_id}", style="dim")
            body = item.content
        else:
            header = Text(f"L{item.level} summary seq {item.first_seq}..{item.last_seq}", style="bold")
            header.append(f"  {item.id}", style="dim")
            body = item.text
        console.print(header)
        console.print(Text(body), soft_wrap=True)
        console.print()
    footer = f"{len(page.items)} of {page.total} items"
    if page.next_cursor:
        footer += f"; next page: --cursor {page.next_cursor}"
    console.print(Text(footer, style="dim"))


def breaches_table(breaches: Sequence[BaseModel]) -> Table:
    """The invariant breaches ``doctor`` found, one row each."""
    table = Table(title=f"{len(breaches)} breach{'es' if len(breaches) != 1 else ''}")
    table.add_column("invariant", justify="right")
    table.add_column("thread")
    table.add_column("node")
    table.add_column("what", ratio=1)
    for breach in breaches:
        data = breach.model_dump()
        table.add_row(
            str(data["invariant"]), Text(data["thread_id"]), Text(data["node_id"] or ""), Text(data["message"])
        )
    return table


class IngestBar:
    """A rich progress bar on stderr fed by ``ingest_files``'s progress callback."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress
        self._tasks: dict[tuple[str, str], TaskID] = {}

    def __call__(self, event: IngestProgress) -> None:
        """Advance the bar of the file and phase the event is about."""
        key = (str(event.path), event.phase)
        task = self._tasks.get(key)
        if task is None:
            verb = "reading" if event.phase == "read" else "writing"
            task = self._progress.add_task(f"{verb} {event.path.name}", total=event.total, unit=event.phase)
            self._tasks[key] = task
        self._progress.update(task, completed=event.done, total=event.total)


@contextmanager
def ingest_progress(enabled: bool) -> Iterator[ProgressCallback | None]:
    """A progress callback drawing bars on stderr, or ``None`` when not ``enabled``."""
    if not enabled:
        yield None
        return
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed:>10,.0f} / {task.total:,.0f}"),
        TimeRemainingColumn(),
        console=stderr_console(),
        transient=True,
    )
    with progress:
        yield IngestBar(progress)


# -- the fact layer and recall ----------------------------------------------------------


#: Threads ``kg status`` names before "and N more" (every thread's layer is on by default).
KG_THREADS_NAMED = 10


def kg_view(result: KgResult) -> Group:
    """What a ``kg`` action did, the layer's state, then the facts grouped by topic."""
    lines: list[Text] = []
    if result.layer is not None:
        state = "on" if result.layer.enabled else "off"
        read = result.layer.extracted_seq
        where = "nothing read yet" if read < 0 else f"read up to message seq {read}"
        lines.append(Text(f"fact layer of thread {result.layer.thread_id}: {state} ({where})"))
    elif result.action == "status":
        count = len(result.threads_on)
        named = [state.thread_id for state in result.threads_on[:KG_THREADS_NAMED]]
        more = f" and {count - len(named)} more" if count > len(named) else ""
        on = (", ".join(named) or "none") + more
        noun = "thread" if count == 1 else "threads"
        lines.append(Text(f"partition {result.partition}: fact layer on in {count} {noun} ({on})"))
    if result.action == "on":
        lines.append(Text(f"extracted {result.extracted} facts"))
    if result.action == "clear":
        scope = f"thread {result.thread_id}" if result.thread_id else f"partition {result.partition}"
        lines.append(Text(f"cleared {result.cleared} facts of {scope}"))
    parts: list[Text | Table] = list(lines)
    if result.stats is not None:
        parts.append(fact_topics_table(result.stats))
    return Group(*parts)


def fact_topics_table(stats: FactStats) -> Table:
    """Facts by topic: current and superseded counts and the kinds they are of."""
    noun = "fact" if stats.facts == 1 else "facts"
    table = Table(title=f"{stats.facts} {noun} ({stats.current} current, {stats.superseded} superseded)")
    table.add_column("topic")
    table.add_column("current", justify="right")
    table.add_column("superseded", justify="right")
    table.add_column("kinds")
    for topic in stats.topics:
        kinds = ", ".join(f"{kind} {count}" for kind, count in sorted(topic.kinds.items()))
        table.add_row(Text(topic.subject), str(topic.current), str(topic.superseded), Text(kinds))
    return table


def recall_table(result: RecallResult) -> Table:
    """Everything recalled in overall rank order: kind, where it is, its id and text."""
    rows: list[tuple[int, str, str, str, str]] = []
    for fact in result.facts:
        kind = f"fact: {fact.kind}" + (" (superseded)" if fact.valid_until is not None else "")
        rows.append((fact.rank, kind, f"{fact.subject or ''}\n{fact.thread_id or ''}", fact.id, fact.text))
    for summary in result.summaries:
        rows.append((summary.rank, f"summary L{summary.level}", summary.thread_id or "", summary.id, summary.snippet))
    for message in result.messages:
        role = message.role.value if message.role is not None else ""
        rows.append((message.rank, f"message ({role})", message.thread_id or "", message.id, message.snippet))
    table = Table(title=f"{len(rows)} recalled for {result.query!r}", show_lines=True)
    table.add_column("rank", justify="right", no_wrap=True)
    table.add_column("kind")
    table.add_column("where", overflow="fold")
    table.add_column("id and text", ratio=1)
    for rank, kind, where, node_id, text in sorted(rows):
        body = Text(node_id, style="bold")
        body.append("\n" + " ".join(text.split()))
        table.add_row(str(rank), Text(kind), Text(where), body)
    return table


# -- context assembly and maintenance --------------------------------------------------


def context_table(result: AssembledContext) -> Table:
    """One row per section (what it shows and its tokens), one per section that left something out."""
    table = Table(title=f"context of {result.thread_id}")
    for name in ("section", "items", "tokens", "left out"):
        table.add_column(name, justify="left" if name == "section" else "right")
    left_out = {pruned.name: pruned.count for pruned in result.pruned}
    for section in result.sections:
        table.add_row(section.name, str(len(section.ids)), str(section.tokens), str(left_out.pop(section.name, 0)))
    for name, count in left_out.items():
        table.add_row(name, "0", "0", str(count))
    table.add_section()
    spent = f"{result.total_tokens} / {result.budget_tokens}"
    table.add_row("total", "", spent, str(sum(pruned.count for pruned in result.pruned)))
    return table


def cycles_table(cycles: dict[str, MaintenanceCycle | None]) -> Table:
    """One row per job: what its tick did, or that other processes hold every thread or step it had to do."""
    table = Table(title="maintenance")
    for name in ("job", "ran", "threads", "summaries", "facts", "errors"):
        table.add_column(name, justify="left" if name in ("job", "ran") else "right")
    for job, cycle in cycles.items():
        if cycle is None:
            table.add_row(job, "skipped: other processes hold all its work", "", "", "", "")
            continue
        seconds = (cycle.finished_at - cycle.started_at).total_seconds()
        table.add_row(
            job,
            f"{seconds:.1f}s",
            str(cycle.threads),
            str(cycle.summaries),
            str(cycle.facts),
            str(len(cycle.errors)),
        )
    return table


def job_bars(bars: Progress) -> Callable[[str, int, int], None]:
    """The ticks' progress callback: one bar per job (threads for compaction, steps for evolution)."""
    tasks: dict[str, TaskID] = {}

    def advance(job: str, done: int, total: int) -> None:
        if job not in tasks:
            tasks[job] = bars.add_task(job, total=total)
        bars.update(tasks[job], completed=done, total=total)

    return advance


def maintenance_progress() -> Progress:
    """The progress display ``maintain --once`` draws on stderr, fed by ``job_bars``; gone when done."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed:>4,.0f} / {task.total:,.0f}"),
        console=stderr_console(),
        transient=True,
    )
