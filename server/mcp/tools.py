"""The MCP tools and resources: thin wrappers from the protocol to one domain function each.

Each tool resolves the partition it works in (the one it names, else the server's, and
only one its bearer token may touch), calls the store, ``grep`` or the compaction
engine, and maps a domain error to a ``ToolError`` of one clear sentence. Anything else
is masked by the server (``mask_error_details``), so a client never sees a stack trace.
Results are pydantic models, which gives every tool an output schema; the schema also
carries the bounds (``limit``, ``depth``), so a client learns them before calling.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Annotated

import mcp_types
from fastmcp import Context, FastMCP
from fastmcp.exceptions import ResourceError, ToolError, ValidationError
from fastmcp.server.dependencies import get_access_token
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from fastmcp.tools.base import ToolResult
from pydantic import BaseModel, Field
from pydantic import ValidationError as PydanticValidationError

from palimpsest.graph_schema.errors import InternalError, PalimpsestError, StoreUnavailable
from palimpsest.graph_schema.models import (
    MAX_BATCH,
    AppendResult,
    ExpandPage,
    MaintenanceCycle,
    Name,
    NewMessage,
    SearchKind,
    StoreStats,
    SummaryDag,
    ThreadBacklog,
    UtcDatetime,
)
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler import compaction
from palimpsest.scheduler.compaction import CompactionResult
from palimpsest.scheduler.embedders import Embedder
from palimpsest.scheduler.embedding import EmbeddingQueue
from palimpsest.scheduler.facts import KgAction, KgResult, kg_command
from palimpsest.scheduler.maintenance import backlog_floor
from palimpsest.scheduler.summarizer import Summarizer
from palimpsest.server import retrieval
from palimpsest.server.mcp.metrics import ToolMetric, ToolMetrics
from palimpsest.server.mcp.partitions import (
    PartitionDenied,
    partition_for_client,
    resolve_partition,
    shared_cycle,
    token_partitions,
)
from palimpsest.server.mcp.starting import RUNTIME_KEY, RuntimeHolder
from palimpsest.server.retrieval.context import DEFAULT_BUDGET, MAX_BUDGET, MIN_BUDGET, AssembledContext
from palimpsest.server.retrieval.grep import MAX_QUERY_CHARS, GrepMode, GrepResult
from palimpsest.server.retrieval.recall import MAX_RECALL, RecallResult
from palimpsest.server.settings import Settings

#: Characters of a summary's text shown by ``describe_summary``.
PREVIEW_CHARS = 600
#: Maintenance cycles and pending threads ``memory_stats`` lists.
LAST_CYCLES = 5
PENDING_THREADS = 20

_READ_ONLY = {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False}
_APPEND = {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False}
# Compaction may call a configured LLM endpoint, so it makes no closed-world claim.
_COMPACT = {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False}

PartitionArg = Annotated[
    Name | None,
    Field(description="Partition (IDE) to work in; defaults to this server's own."),
]
ThreadIdArg = Annotated[Name, Field(description="The caller's thread id (e.g. a Claude Code session id).")]
SummaryIdArg = Annotated[Name, Field(description="A summary id (sum_...), or a message id (msg_...) to read it whole.")]


@dataclass(frozen=True)
class Runtime:
    """What every tool call needs, opened by the server's lifespan (in the background: see `RuntimeHolder`)."""

    store: MemoryStore
    settings: Settings
    summarizer: Summarizer
    tokens_required: bool
    #: Semantic search: the embedder of ``PALIMPSEST_EMBEDDER`` (None: off) and the
    #: queue that embeds appended messages in the background.
    embedder: Embedder | None = None
    embedding: EmbeddingQueue | None = None
    #: Per-tool call counts and latencies of this process, filled by ``CallMetrics``.
    metrics: ToolMetrics = field(default_factory=ToolMetrics)


class SummaryDescription(BaseModel):
    """A summary's place in the DAG and its provenance, without expanding it."""

    id: str
    thread_id: str
    partition: str
    level: int
    child_ids: list[str]
    parent_id: str | None
    message_count: int
    first_seq: int
    last_seq: int
    earliest_at: UtcDatetime
    latest_at: UtcDatetime
    created_at: UtcDatetime
    tokens: int
    source_tokens: int
    summarizer: str
    digest: str
    preview: str = Field(description=f"The summary's text, cut at {PREVIEW_CHARS} characters.")


@contextmanager
def domain_errors(error: type[Exception] = ToolError) -> Iterator[None]:
    """Turn a domain error into the MCP error a client sees: one clear sentence, no trace."""
    try:
        yield
    except StoreUnavailable as exc:
        raise error(f"store unavailable: {exc}") from None
    except InternalError:
        raise error("internal error: Palimpsest failed on its own query; the server log has the detail") from None
    except PalimpsestError as exc:
        raise error(str(exc)) from None


class ArgumentErrors(Middleware):
    """Reports arguments that fail the schema in one line, not pydantic's multi-line dump."""

    async def on_call_tool(
        self,
        context: MiddlewareContext[mcp_types.CallToolRequestParams],
        call_next: CallNext[mcp_types.CallToolRequestParams, ToolResult],
    ) -> ToolResult:
        """Run the call; turn an argument validation failure into a one-line ToolError."""
        try:
            return await call_next(context)
        except ValidationError as exc:
            cause = exc.__cause__
            if not isinstance(cause, PydanticValidationError):
                raise
            raise ToolError(describe_invalid_arguments(cause)) from None


def describe_invalid_arguments(error: PydanticValidationError) -> str:
    """``invalid arguments: messages.0.created_at: Input should be ...``, at most three problems."""
    problems = [
        f"{'.'.join(str(part) for part in detail['loc']) or 'arguments'}: {detail['msg']}"
        for detail in error.errors(include_url=False, include_context=False, include_input=False)[:3]
    ]
    more = error.error_count() - len(problems)
    return "invalid arguments: " + "; ".join(problems) + (f" (and {more} more)" if more > 0 else "")


async def _runtime(ctx: Context) -> Runtime:
    """The `Runtime` once the store is open; raises StoreUnavailable if it could not open."""
    holder: RuntimeHolder[Runtime] = ctx.lifespan_context[RUNTIME_KEY]
    return await holder.runtime()


def _client_name(ctx: Context) -> str | None:
    try:
        params = ctx.session.client_params
    except RuntimeError:
        return None
    return params.client_info.name if params is not None else None


def _partition(ctx: Context, runtime: Runtime, requested: str | None) -> str:
    """The partition of this call; raises PartitionDenied outside the token's partitions."""
    default = runtime.settings.partition or partition_for_client(_client_name(ctx))
    allowed = token_partitions(get_access_token())
    if allowed is None and runtime.tokens_required and ctx.transport in ("streamable-http", "sse"):
        raise PartitionDenied("this server requires a bearer token")
    return resolve_partition(requested, default=default, allowed=allowed)


async def append_messages(
    thread_id: ThreadIdArg,
    messages: Annotated[
        list[NewMessage],
        Field(min_length=1, max_length=MAX_BATCH, description="Messages in thread order."),
    ],
    ctx: Context,
    project: Annotated[Name | None, Field(description="Project the thread belongs to.")] = None,
    partition: PartitionArg = None,
) -> AppendResult:
    """Store messages at the end of a thread, verbatim and forever.

    Idempotent on each message's message_id: sending the same one again adds nothing.
    All messages of a call are written together or not at all.
    """
    with domain_errors():
        runtime = await _runtime(ctx)
        where = _partition(ctx, runtime, partition)
        result = await runtime.store.append_messages(where, thread_id, messages, project=project)
    if runtime.embedding is not None:
        runtime.embedding.submit(result.message_ids)
    return result


async def grep_memories(
    query: Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS, description="Words, or a regex.")],
    ctx: Context,
    mode: Annotated[
        GrepMode | None,
        Field(
            description="Omit for the best available: hybrid once vectors exist, else text (the result's mode "
            "says which ran). text: full-text words; regex: a regular expression; semantic: nearest in meaning; "
            "hybrid: words and meaning fused and re-ranked, the best for a question."
        ),
    ] = None,
    thread_id: Annotated[Name | None, Field(description="Only this thread.")] = None,
    kinds: Annotated[
        list[SearchKind] | None,
        Field(min_length=1, description="Node kinds to search; default messages and summaries."),
    ] = None,
    since: Annotated[UtcDatetime | None, Field(description="Only nodes created at or after (ISO 8601).")] = None,
    until: Annotated[UtcDatetime | None, Field(description="Only nodes created at or before (ISO 8601).")] = None,
    limit: Annotated[int, Field(ge=1, le=200, description="Most hits returned.")] = 20,
    partition: PartitionArg = None,
) -> GrepResult:
    """Search stored messages and summaries by words, by regular expression or by meaning.

    Without a mode it is hybrid when the messages have vectors (the default embedder makes them in the
    background) and text until then; semantic and hybrid modes refuse when PALIMPSEST_EMBEDDER is none.
    Each hit carries covered_by: the summaries that fold it, lowest level first, so
    expand_summary on one of them shows the hit in its original context. A tool call and its
    result are one hit: paired_id, paired_source_id and paired_snippet give the other half.
    """
    with domain_errors():
        runtime = await _runtime(ctx)
        where = _partition(ctx, runtime, partition)
        return await retrieval.grep.grep_memories(
            runtime.store,
            query,
            partition=where,
            mode=mode,
            thread_id=thread_id,
            kinds=tuple(kinds) if kinds else ("message", "summary"),
            since=since,
            until=until,
            limit=limit,
            embedder=runtime.embedder,
        )


async def describe_summary(
    summary_id: SummaryIdArg,
    ctx: Context,
    partition: PartitionArg = None,
) -> SummaryDescription:
    """Describe one summary: what it covers (seq and time range), its children and parent, its digest."""
    with domain_errors():
        runtime = await _runtime(ctx)
        summary = await runtime.store.get_summary(_partition(ctx, runtime, partition), summary_id)
    text = summary.text
    preview = text if len(text) <= PREVIEW_CHARS else text[:PREVIEW_CHARS] + "…"
    return SummaryDescription(**summary.model_dump(exclude={"text"}), preview=preview)


async def expand_summary(
    summary_id: SummaryIdArg,
    ctx: Context,
    depth: Annotated[
        int | None,
        Field(ge=1, le=64, description="1 = direct children; none = down to the original messages."),
    ] = None,
    limit: Annotated[int, Field(ge=1, le=1000, description="Most items in this page.")] = 200,
    cursor: Annotated[str | None, Field(max_length=64, description="next_cursor of the previous page.")] = None,
    partition: PartitionArg = None,
) -> ExpandPage:
    """Expand a summary back into what it covers: the original messages verbatim, in order, a page at a time.

    A message id (msg_..., as assemble_context shortens old tool outputs) gives that message whole.
    """
    with domain_errors():
        runtime = await _runtime(ctx)
        return await retrieval.context.expand_node(
            runtime.store, _partition(ctx, runtime, partition), summary_id, depth=depth, limit=limit, cursor=cursor
        )


async def get_summary_dag(
    thread_id: ThreadIdArg,
    ctx: Context,
    partition: PartitionArg = None,
) -> SummaryDag:
    """Every summary of a thread, how they nest, and the frontier that partitions the thread."""
    with domain_errors():
        runtime = await _runtime(ctx)
        return await runtime.store.summary_dag(_partition(ctx, runtime, partition), thread_id)


async def compact_thread(
    thread_id: ThreadIdArg,
    ctx: Context,
    force: Annotated[
        bool, Field(description="Fold every message outside the fresh tail, even under the threshold.")
    ] = False,
    partition: PartitionArg = None,
) -> CompactionResult:
    """Fold a thread's old messages into summaries now; nothing is lost, every summary expands back."""
    with domain_errors():
        runtime = await _runtime(ctx)
        result = await compaction.compact_thread(
            runtime.store,
            _partition(ctx, runtime, partition),
            thread_id,
            runtime.settings.compaction,
            runtime.summarizer,
            force=force,
        )
    if runtime.embedding is not None:
        runtime.embedding.submit(result.summary_ids)
    return result


class MemoryStats(StoreStats):
    """A partition's counts, with what background maintenance did lately and what waits for it."""

    last_cycles: list[MaintenanceCycle] = Field(
        description=f"The last {LAST_CYCLES} maintenance cycles of any server process sharing the store, latest "
        "first: what ran, with the process as an opaque label and errors as a count (they may name other "
        "partitions' threads)."
    )
    pending: list[ThreadBacklog] = Field(
        description=f"Threads of the partition due for compaction, largest backlog first (at most {PENDING_THREADS})."
    )
    tools: list[ToolMetric] = Field(
        default_factory=list,
        description="This server process's tool calls since it started: count, errors, p50 and p95 latency.",
    )


async def memory_stats(ctx: Context, partition: PartitionArg = None) -> MemoryStats:
    """Counts of threads, messages, summaries by level and facts in the partition, and the store kind.

    Also the last maintenance cycles (compaction and evolution runs), the threads
    waiting for compaction, and this server's tool call counts, errors and latencies.
    """
    with domain_errors():
        runtime = await _runtime(ctx)
        where = _partition(ctx, runtime, partition)
        counts = await runtime.store.stats(where)
        cycles = [shared_cycle(cycle) for cycle in await runtime.store.recent_cycles(LAST_CYCLES)]
        pending = await runtime.store.compaction_candidates(
            where, min_uncovered=backlog_floor(runtime.settings.compaction), limit=PENDING_THREADS
        )
    return MemoryStats(**counts.model_dump(), last_cycles=cycles, pending=pending, tools=runtime.metrics.snapshot())


async def summary_resource(summary_id: str, ctx: Context) -> str:
    """One summary with its full text, children and parent, as JSON."""
    with domain_errors(ResourceError):
        runtime = await _runtime(ctx)
        summary = await runtime.store.get_summary(_partition(ctx, runtime, None), summary_id)
    return summary.model_dump_json()


async def dag_resource(thread_id: str, ctx: Context) -> str:
    """A thread's summary DAG and frontier, as JSON."""
    with domain_errors(ResourceError):
        runtime = await _runtime(ctx)
        dag = await runtime.store.summary_dag(_partition(ctx, runtime, None), thread_id)
    return dag.model_dump_json()


# -- the fact layer and recall -------------------------------------------------------

# kg switches a thread's layer and may clear facts, and on extracts from the history.
_KG = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False, "openWorldHint": False}


async def kg(
    action: Annotated[
        KgAction,
        Field(
            description="status: layer state and counts; on/off: switch a thread's fact layer (on also "
            "extracts its history now); stats: facts grouped by topic; clear: delete facts."
        ),
    ],
    ctx: Context,
    thread_id: Annotated[
        Name | None, Field(description="The thread; on and off need one, the others default to the partition.")
    ] = None,
    partition: PartitionArg = None,
) -> KgResult:
    """Manage the fact layer: technical facts extracted from assistant messages, off by default per thread.

    A newer fact about the same topic supersedes an older one, which recall then leaves out.
    """
    with domain_errors():
        runtime = await _runtime(ctx)
        return await kg_command(runtime.store, _partition(ctx, runtime, partition), action, thread_id)


async def recall(
    query: Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS, description="What to recall, in words.")],
    ctx: Context,
    project: Annotated[Name | None, Field(description="Only this project's facts and threads.")] = None,
    limit: Annotated[
        int, Field(ge=1, le=MAX_RECALL, description="Most items returned, facts, summaries and messages together.")
    ] = 10,
    include_superseded: Annotated[
        bool, Field(description="Also return superseded facts, ranked after every current one.")
    ] = False,
    partition: PartitionArg = None,
) -> RecallResult:
    """Recall what memory holds about a query across every thread: facts, summaries and messages, ranked together.

    Each item has its ids and an overall rank; a message carries its source_id and the
    summaries folding it (covered_by), a summary its level; a tool call or result carries
    the other half of the pair (paired_id, paired_source_id, paired_snippet).
    """
    with domain_errors():
        runtime = await _runtime(ctx)
        where = _partition(ctx, runtime, partition)
        return await retrieval.recall.recall(
            runtime.store,
            query,
            partition=where,
            project=project,
            limit=limit,
            include_superseded=include_superseded,
            embedder=runtime.embedder,
        )


# -- context assembly ------------------------------------------------------------------


async def assemble_context(
    thread_id: ThreadIdArg,
    ctx: Context,
    budget_tokens: Annotated[
        int,
        Field(
            ge=MIN_BUDGET,
            le=MAX_BUDGET,
            description="Most estimated tokens the text may take, headings included (about 4 characters a token).",
        ),
    ] = DEFAULT_BUDGET,
    query: Annotated[
        str | None,
        Field(
            min_length=1,
            max_length=MAX_QUERY_CHARS,
            description="What you are working on: adds a recall section about it from the whole partition.",
        ),
    ] = None,
    partition: PartitionArg = None,
) -> AssembledContext:
    """Rebuild a thread's working context within a token budget: one text, oldest first, ready to read.

    Sections: summaries (the compacted past; expand_summary recovers the originals), facts
    (current ones), recall (with a query), recent (the newest messages verbatim, filled first).
    Nothing is cut: what does not fit is left out whole and listed in pruned.
    """
    with domain_errors():
        runtime = await _runtime(ctx)
        return await retrieval.context.assemble_context(
            runtime.store,
            thread_id,
            partition=_partition(ctx, runtime, partition),
            budget_tokens=budget_tokens,
            query=query,
            embedder=runtime.embedder,
        )


def register_tools(server: FastMCP) -> None:
    """Add every tool and resource to a server (whose lifespan provides the `Runtime`)."""
    server.tool(append_messages, annotations=_APPEND)
    server.tool(grep_memories, annotations=_READ_ONLY)
    server.tool(describe_summary, annotations=_READ_ONLY)
    server.tool(expand_summary, annotations=_READ_ONLY)
    server.tool(get_summary_dag, annotations=_READ_ONLY)
    server.tool(compact_thread, annotations=_COMPACT)
    server.tool(memory_stats, annotations=_READ_ONLY)
    server.tool(recall, annotations=_READ_ONLY)
    server.tool(kg, annotations=_KG)
    server.tool(assemble_context, annotations=_READ_ONLY)
    server.resource("palimpsest://summaries/{summary_id}", name="summary", mime_type="application/json")(
        summary_resource
    )
    server.resource("palimpsest://threads/{thread_id}/dag", name="summary_dag", mime_type="application/json")(
        dag_resource
    )
