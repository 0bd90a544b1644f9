"""Validation and derivation shared by both backends, so they cannot drift apart.

A backend only decides *how* to read and write; *what* is valid and what a row holds
is decided here once: the checks on an append, the fields of a new message, the
fields a summary derives from its children, and the expansion cursor format.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, cast, get_args

from palimpsest.graph_schema.errors import Conflict, InvalidInput, NotFound
from palimpsest.graph_schema.identity import (
    estimate_tokens,
    fact_id,
    message_id,
    message_sha256,
    summary_digest,
    summary_id,
)
from palimpsest.graph_schema.models import (
    MAX_BATCH,
    MAX_EMBED_CHARS,
    MAX_MESSAGE_BYTES,
    MAX_NAME_CHARS,
    ArchivedRange,
    Fact,
    FrontierItem,
    Message,
    NewFact,
    NewMessage,
    NewSummary,
    SearchKind,
    Summary,
    Thread,
    utcnow,
)
from palimpsest.graph_schema.redact import redact, redact_json, redaction_on


@dataclass(frozen=True)
class PreparedMessage:
    """A message ready to insert, everything but ``seq`` known (seq is taken under lock)."""

    id: str
    source_id: str
    role: str
    content: str
    sha256: str
    tokens: int
    created_at: Any
    tool_call_id: str | None
    metadata: dict[str, Any]
    #: Credentials replaced in ``content`` and ``metadata`` before they were stored (see ``redact``).
    secrets: int = 0


def check_name(kind: str, value: str) -> str:
    """Reject an empty or over-long thread id, partition or project before any write."""
    if not value or not value.strip():
        raise InvalidInput(f"{kind} must not be empty")
    if len(value) > MAX_NAME_CHARS:
        raise InvalidInput(f"{kind} is longer than {MAX_NAME_CHARS} characters")
    check_utf8(kind, value)
    return value


def check_utf8(kind: str, value: str) -> None:
    """Lone surrogates (invalid UTF-8 smuggled through JSON) can never be stored faithfully."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"{kind} is not valid UTF-8 (position {exc.start})") from None


def check_search_texts(items: Sequence[tuple[str, str]]) -> None:
    """The checks on `MemoryStore.set_search_texts`: a bounded batch of bounded, valid texts."""
    if len(items) > MAX_BATCH:
        raise InvalidInput(f"at most {MAX_BATCH} search texts at once, got {len(items)}")
    for message_id_, text in items:
        if len(text) > MAX_EMBED_CHARS:
            raise InvalidInput(f"search text of {message_id_} exceeds {MAX_EMBED_CHARS} characters")
        check_utf8(f"search text of {message_id_}", text)


def check_page(limit: int) -> int:
    """A page size of at least 1 and at most ``MAX_BATCH`` (``missing_search_texts``)."""
    if not 1 <= limit <= MAX_BATCH:
        raise InvalidInput(f"limit must be between 1 and {MAX_BATCH}, got {limit}")
    return limit


def prepare_append(
    partition: str, thread_id: str, messages: Sequence[NewMessage], project: str | None
) -> list[PreparedMessage]:
    """Validate a whole batch and compute ids and hashes; raises before anything is written.

    Repeats of one ``message_id`` inside the batch are kept here; the backend drops
    every occurrence after the first, as it drops those already stored. Every write of
    a message passes here, so this is where credentials and private spans leave the
    content and every string of the metadata (``redact``), before the content is
    hashed: the stored bytes are the verbatim ones but for those, and doctor's hashes
    hold over them. A project is a key reads filter by, so one that holds a credential
    or a private span is refused rather than stored changed; ids are the caller's keys
    and are stored as given.
    """
    check_name("partition", partition)
    check_name("thread_id", thread_id)
    secrets_on = redaction_on()
    if project is not None:
        check_name("project", project)
        if redact(project, secrets=secrets_on).text != project:
            raise InvalidInput("project must not hold a credential or a <private> span")
    if len(messages) > MAX_BATCH:
        raise InvalidInput(f"at most {MAX_BATCH} messages per append, got {len(messages)}")
    now = utcnow()
    prepared: list[PreparedMessage] = []
    for index, message in enumerate(messages):
        check_utf8(f"message {index} content", message.content)
        size = len(message.content.encode("utf-8"))
        if size > MAX_MESSAGE_BYTES:
            raise InvalidInput(f"message {index} is {size} bytes, over the limit of {MAX_MESSAGE_BYTES} bytes")
        source_id = message.message_id or "gen-" + uuid.uuid4().hex
        check_name(f"message {index} message_id", source_id)
        if message.tool_call_id is not None:
            check_name(f"message {index} tool_call_id", message.tool_call_id)
        stored = redact(message.content, secrets=secrets_on)
        try:
            metadata, metadata_secrets = redact_json(message.metadata, secrets=secrets_on)
        except RecursionError:
            raise InvalidInput(f"message {index} metadata is nested too deeply") from None
        prepared.append(
            PreparedMessage(
                id=message_id(partition, thread_id, source_id),
                source_id=source_id,
                role=message.role.value,
                content=stored.text,
                sha256=message_sha256(
                    partition, thread_id, source_id, message.role.value, stored.text, message.tool_call_id
                ),
                tokens=estimate_tokens(stored.text),
                created_at=message.created_at or now,
                tool_call_id=message.tool_call_id,
                metadata=metadata,
                secrets=stored.secrets + metadata_secrets,
            )
        )
    return prepared


def derive_summary(new: NewSummary, children: Sequence[Message | Summary], created_at: Any = None) -> Summary:
    """The full summary a store writes, derived from its children in the order given.

    ``children`` must be the stored nodes for ``new.child_ids``, in that order (the
    backend looks them up and raises ``NotFound`` for a missing one). Checks level,
    repetition, contiguity and shortness (invariants 2 and 6).
    """
    if len(set(new.child_ids)) != len(new.child_ids):
        raise InvalidInput("a summary cannot cover the same child twice")
    expected_level = new.level - 1
    ranges: list[tuple[int, int]] = []
    digests: list[str] = []
    for child in children:
        if child.thread_id != new.thread_id or child.partition != new.partition:
            raise InvalidInput(f"child {child.id} belongs to another thread or partition")
        if isinstance(child, Message):
            if expected_level != 0:
                raise InvalidInput(f"a level-{new.level} summary cannot cover message {child.id}")
            ranges.append((child.seq, child.seq))
            digests.append(child.sha256)
        else:
            if child.level != expected_level:
                raise InvalidInput(f"a level-{new.level} summary cannot cover level-{child.level} summary {child.id}")
            ranges.append((child.first_seq, child.last_seq))
            digests.append(child.digest)
    for (_, previous_last), (next_first, _) in zip(ranges, ranges[1:], strict=False):
        if next_first != previous_last + 1:
            raise InvalidInput("the children of a summary must be a contiguous run in thread order")
    source_tokens = sum(child.tokens for child in children)
    if new.tokens >= source_tokens:
        raise InvalidInput(f"a summary must be shorter than its sources ({new.tokens} >= {source_tokens} tokens)")
    check_utf8("summary text", new.text)
    return Summary(
        id=summary_id(new.partition, new.thread_id, new.level, new.child_ids),
        thread_id=new.thread_id,
        partition=new.partition,
        level=new.level,
        text=new.text,
        tokens=new.tokens,
        source_tokens=source_tokens,
        first_seq=ranges[0][0],
        last_seq=ranges[-1][1],
        earliest_at=min(_earliest(child) for child in children),
        latest_at=max(_latest(child) for child in children),
        message_count=sum(1 if isinstance(child, Message) else child.message_count for child in children),
        digest=summary_digest(new.level, digests),
        summarizer=new.summarizer,
        created_at=created_at or utcnow(),
        child_ids=list(new.child_ids),
        parent_id=None,
    )


def check_summary_batch(summaries: Sequence[NewSummary]) -> None:
    """Refuse a batch `persist_summaries` cannot write as one step: empty, mixed, or covering a child twice.

    Why one level of one thread: every child must already be stored (a summary of the
    batch cannot cover another of it), and the backends lock one thread per batch.
    """
    if not summaries:
        raise InvalidInput("persist_summaries needs at least one summary")
    first = summaries[0]
    for summary in summaries:
        if (summary.level, summary.thread_id, summary.partition) != (first.level, first.thread_id, first.partition):
            raise InvalidInput("a batch of summaries must be of one level of one thread")
    children = [child_id for summary in summaries for child_id in summary.child_ids]
    if len(set(children)) != len(children):
        raise InvalidInput("two summaries of a batch cannot cover the same child")


def _earliest(node: Message | Summary) -> Any:
    return node.created_at if isinstance(node, Message) else node.earliest_at


def _latest(node: Message | Summary) -> Any:
    return node.created_at if isinstance(node, Message) else node.latest_at


def check_limit(limit: int) -> int:
    """A caller's page size, refused below 1 (SQLite reads a negative LIMIT as "no limit").

    :raises InvalidInput: if ``limit`` is below 1.
    """
    if limit < 1:
        raise InvalidInput(f"limit must be at least 1, got {limit}")
    return limit


def encode_cursor(offset: int) -> str:
    """An expansion cursor: the offset of the next item, opaque to callers."""
    return f"o{offset}"


def decode_cursor(cursor: str | None) -> int:
    """The offset a cursor stands for; ``None`` is the start.

    :raises InvalidInput: if the cursor was not made by ``encode_cursor``.
    """
    if cursor is None:
        return 0
    if not cursor.startswith("o") or not cursor[1:].isdigit():
        raise InvalidInput(f"invalid cursor {cursor!r}: pass the next_cursor of the previous page")
    return int(cursor[1:])


# -- the fact layer: checking proposed facts and deriving what a fact row holds --------


def fact_source_ids(facts: Sequence[NewFact]) -> list[str]:
    """Every source message id of a batch of facts, once each, for one lookup.

    :raises InvalidInput: if the batch is over ``MAX_BATCH`` facts.
    """
    if len(facts) > MAX_BATCH:
        raise InvalidInput(f"at most {MAX_BATCH} facts per call, got {len(facts)}")
    return list(dict.fromkeys(source for fact in facts for source in fact.source_message_ids))


def derive_facts(facts: Sequence[NewFact], sources: dict[str, Message]) -> list[Fact]:
    """The facts a store writes, derived from their stored source messages.

    ``sources`` maps the ids of ``fact_source_ids(facts)`` to the stored messages (any
    partition: a message of another partition is reported unknown here). A fact's
    thread and project are its sources', its time the latest source's, its id
    ``fact_id(partition, text, first source id)``; a fact repeated in the batch is
    kept once. Raises before anything is written.

    :raises NotFound: if a source message does not exist in the fact's partition.
    :raises InvalidInput: if a fact's text is blank or not valid UTF-8, repeats a
        source, or its sources span several threads.
    """
    derived: dict[str, Fact] = {}
    for index, new in enumerate(facts):
        if not new.text.strip():
            raise InvalidInput(f"fact {index} text must not be blank")
        check_utf8(f"fact {index} text", new.text)
        check_name(f"fact {index} kind", new.kind)
        check_name(f"fact {index} subject", new.subject)
        if len(set(new.source_message_ids)) != len(new.source_message_ids):
            raise InvalidInput(f"fact {index} names the same source message twice")
        found: list[Message] = []
        for source_id in new.source_message_ids:
            message = sources.get(source_id)
            if message is None or message.partition != new.partition:
                raise NotFound("message", source_id)
            found.append(message)
        if len({message.thread_id for message in found}) != 1:
            raise InvalidInput(f"fact {index} is extracted from messages of several threads")
        ordered = sorted(found, key=lambda message: message.seq)
        fact = Fact(
            id=fact_id(new.partition, new.text, new.source_message_ids[0]),
            partition=new.partition,
            project=next((m.project for m in ordered if m.project is not None), None),
            text=new.text,
            kind=new.kind,
            subject=new.subject,
            created_at=max(message.created_at for message in ordered),
            valid_until=None,
            source_message_ids=[message.id for message in ordered],
            thread_id=ordered[0].thread_id,
        )
        derived.setdefault(fact.id, fact)
    return list(derived.values())


def check_supersession(old: Fact, new: Fact, at: datetime) -> bool:
    """Whether ``new`` may supersede ``old`` from ``at`` on; True when it already does.

    :raises InvalidInput: if the two are one fact, or ``at`` is before ``old`` began.
    :raises Conflict: if another fact superseded ``old`` already, or ``old``
        superseded ``new`` (a cycle).
    """
    if old.id == new.id:
        raise InvalidInput(f"fact {old.id} cannot supersede itself")
    if old.superseded_by == new.id:
        return True
    if old.superseded_by is not None:
        raise Conflict(f"fact {old.id} is already superseded by {old.superseded_by}")
    if new.superseded_by == old.id:
        raise Conflict(f"fact {new.id} is superseded by {old.id}, so it cannot supersede it")
    moment = at.replace(tzinfo=UTC) if at.tzinfo is None else at
    if moment < old.created_at:
        raise InvalidInput(f"a fact cannot be superseded before it was made ({moment.isoformat()})")
    return False


# -- maintenance: leases ----------------------------------------------------------------

#: Longest lease a process may take: a day. A longer one is a unit mistake, not a plan.
MAX_LEASE_SECONDS = 86400.0


def lease_times(name: str, holder: str, ttl_seconds: float, now: datetime | None) -> tuple[datetime, datetime]:
    """Check a lease request and give ``(now, expires_at)``, both aware UTC.

    :raises InvalidInput: if the name or holder is empty or too long, or the TTL is not
        a positive number of seconds up to a day.
    """
    check_name("lease name", name)
    check_name("lease holder", holder)
    if not 0 < ttl_seconds <= MAX_LEASE_SECONDS:
        raise InvalidInput(f"lease ttl must be between 0 and {MAX_LEASE_SECONDS:g} seconds, got {ttl_seconds}")
    moment = utcnow() if now is None else now
    moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return moment, moment + timedelta(seconds=ttl_seconds)


# -- hybrid search -----------------------------------------------------------------------


def unique_ids(kind: str, ids: Sequence[str]) -> list[str]:
    """The ids asked, each once, in order, for a batch read by id.

    :raises InvalidInput: if more than ``MAX_BATCH`` ids are asked at once.
    """
    if len(ids) > MAX_BATCH:
        raise InvalidInput(f"at most {MAX_BATCH} {kind} ids per call, got {len(ids)}")
    return list(dict.fromkeys(ids))


def check_kinds(kinds: Sequence[str]) -> list[SearchKind]:
    """The search kinds asked, each once, in order: one rule for every search of both stores.

    Raises:
        InvalidInput: for a kind that is not message, summary or fact.
    """
    unknown = sorted(set(kinds) - set(get_args(SearchKind)))
    if unknown:
        raise InvalidInput(f"unknown search kinds {unknown}: use message, summary or fact")
    return [cast(SearchKind, kind) for kind in dict.fromkeys(kinds)]


def restored_messages(thread: Thread, messages: Sequence[Message], stored: int, existing: set[str]) -> list[Message]:
    """The messages of a restore still to write, checked to continue the thread with no gap.

    Shared by both backends' ``restore_thread``: ``stored`` is the thread's message
    count and ``existing`` the batch's ids the store already holds.

    :raises InvalidInput: if a message is of another thread or partition, or the new
        ones do not run on from seq ``stored`` one by one.
    """
    fresh: list[Message] = []
    for message in messages:
        if (message.thread_id, message.partition) != (thread.id, thread.partition):
            raise InvalidInput(
                f"message {message.id} belongs to thread {message.thread_id!r} of partition "
                f"{message.partition!r}, not to thread {thread.id!r} of partition {thread.partition!r}"
            )
        if message.id in existing:
            continue
        expected = stored + len(fresh)
        if message.seq != expected:
            raise InvalidInput(
                f"message {message.id} has seq {message.seq} but thread {thread.id!r} needs seq {expected} next"
            )
        fresh.append(message)
    return fresh


def check_archived_run(archived: ArchivedRange, messages: Sequence[Message]) -> None:
    """Raises InvalidInput unless ``messages`` are exactly the archived run: its thread, every seq, in order."""
    expected = list(range(archived.first_seq, archived.last_seq + 1))
    if [message.seq for message in messages] != expected or any(
        (m.thread_id, m.partition) != (archived.thread_id, archived.partition) for m in messages
    ):
        raise InvalidInput(
            f"the messages given are not seq {archived.first_seq}-{archived.last_seq} "
            f"of thread {archived.thread_id!r}, in order"
        )


def page_end(messages: Sequence[FrontierItem], start: int, budget_tokens: int, limit: int) -> int:
    """Where a page of uncovered messages read from ``messages[start]`` back in time ends (exclusive).

    ``messages`` are a thread's uncovered messages, newest first. The page holds at most
    ``limit``, stops at the first gap in seq (a summary between two uncovered messages,
    so a range read never carries covered messages along), and stops just past the
    message that takes its tokens over ``budget_tokens`` (a tail of huge tool outputs is
    not read only to be left out, yet a walk that must read one message past what fits,
    to learn whether it shortens, finds it read); one message at least.
    """
    end = start + 1
    tokens = messages[start].tokens
    while (
        tokens <= budget_tokens
        and end < min(len(messages), start + limit)
        and messages[end].first_seq == messages[end - 1].first_seq - 1
    ):
        tokens += messages[end].tokens
        end += 1
    return end


def newest_page(frontier: Sequence[FrontierItem], budget_tokens: int, limit: int) -> list[FrontierItem]:
    """The newest page of a thread's uncovered messages (`page_end`), newest first: what context assembly reads first.

    Empty when the newest message alone is over the budget: it is left out unread. Both
    stores' ``context_frontier`` read this page (Neo4j computes the same rule in Cypher,
    ``CONTEXT_FRONTIER``), and the contract tests hold them to it.
    """
    messages = sorted((item for item in frontier if item.kind == "message"), key=lambda item: -item.first_seq)
    if not messages or messages[0].tokens > budget_tokens:
        return []
    return messages[: page_end(messages, 0, budget_tokens, limit)]
