"""The fact layer: short technical facts read out of a session, kept current.

Why rules: facts must be extracted offline, deterministically, for every thread whose
layer is on (every thread, unless ``kg off`` turned it off or ``PALIMPSEST_FACTS=off``
leaves the evolution tick's fact step out), on every evolution tick, at no cost. Two
sources:

- the session's structure (`scheduler/structural_facts.py`): files written, commands
  and how they ended, commits, dependencies added, settings: stated by the tool calls
  and their results, so certain;
- the assistant's prose: one that writes "The API uses JWT bearer tokens" or
  "Decision: rotate refresh tokens" states a fact on one line, so a line-and-sentence
  filter with a vocabulary of technical indicators finds most of them; the rest of a
  message (code, headings, chat) is skipped.

The prose rules, in order:

1. Only the assistant's own words are read: never a tool call (its content is
   ``Name {json}``), a tool result, thinking, nor a turn that never reached the model
   or that an agent injected (metadata ``synthetic``, ``api_error``, ``injected``,
   ``meta``). The one call read is a plan put to the user (``ExitPlanMode``): the
   sections of its plan that say what was found and why ("Context", "Root cause").
2. Fenced code blocks (``` or ~~~), indented code (4 spaces or a tab, not a list item),
   headings (``#``, or a ``===``/``---`` underline), table rows, shell prompts and lines
   of JSON (a line opening with ``{`` or ``[``, a ``Name {...}`` call, one holding
   ``{"``) are skipped; list markers and emphasis are stripped from what remains.
3. Each line is split into sentences. A sentence is kept when it is at least
   ``MIN_FACT_CHARS`` (30) characters and at most ``MAX_SENTENCE_CHARS``, is not a
   question, does not end in a colon (an introduction to a list), is not generic chat
   ("Sure!", "Let me know...", "I'll ..."), and holds a technical indicator.
4. Its **kind** is the first indicator family that matches: ``decision`` ("decision:",
   decided, going with), ``change`` (migrated, changed, refactored, switched, replaced,
   upgraded...), ``recommendation`` (recommend, suggest, should use, prefer),
   ``configuration`` (configured, set to, enabled, disabled), ``technology`` (uses,
   implements, depends on, built with, relies on...); then, for a sentence that also
   names something exact (a code span, an identifier, a path, a number), ``lesson``
   (the root cause, "I see the issue", turned out, didn't work, because, instead of),
   ``limitation`` (doesn't support, there is no, only supports, requires), ``change``
   named by its verb (fixed, added, appended, created, extracted, updated...) and
   ``point`` (a labelled statement: "Race condition: a WaitGroup tracks the goroutines").
5. Its **subject** is its first code span, lowercased (what it is exactly about, so that
   a later fact on it supersedes this one and nothing broader does); failing that, the
   first topic of ``TOPICS`` (auth, database, cache, queue, search, testing, ci,
   deployment, logging, frontend, build, dependencies, api, config) whose vocabulary it
   names, checked in that order (specific before broad, so "The API uses JWT" is about
   auth); failing that, its first technical-looking name (``FastAPI``, ``JWT``,
   ``pkg.module``), lowercased; failing that, ``general``.

Supersession: a newer fact supersedes an older current fact of the same project and
subject when both are of the same kind, or when the newer one is a ``change`` (a change
to a topic makes what was said before about it stale). Facts from one message never
supersede each other. "Newer" is by ``created_at`` (the source message's time), so a
transcript ingested late lands behind what was already known.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from pydantic import BaseModel, Field

from palimpsest.graph_schema.errors import Conflict, InvalidInput
from palimpsest.graph_schema.models import Fact, FactLayerState, FactStats, Message, NewFact, Role
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.agent_marks import PLAN_TOOLS
from palimpsest.scheduler.reply_text import plan_context, readable, straight_quotes
from palimpsest.scheduler.session_facts import is_not_work, tool_call
from palimpsest.scheduler.structural_facts import FAILED, StructuralFact, structural_facts

logger = logging.getLogger("palimpsest.facts")

#: Sentences shorter than this are never facts ("Done.", "Tests pass now.").
MIN_FACT_CHARS = 30
#: Sentences longer than this are prose paragraphs, not short facts.
MAX_SENTENCE_CHARS = 400
#: Messages read from a thread per extraction step.
EXTRACTION_BATCH = 200
#: Facts written per store call.
WRITE_BATCH = 1000
#: Current facts of one subject compared with each new fact.
RIVALS_SCAN = 500

KgAction = Literal["status", "on", "off", "stats", "clear"]
#: Awaited before each batch, so background extraction yields to tool calls (or stops, by raising).
Pause = Callable[[], Awaitable[None]]

# -- what a line must look like -------------------------------------------------------

_FENCE = re.compile(r"^\s*(```|~~~)")
_LIST_ITEM = re.compile(r"^(?:[-*+]|\d{1,3}[.)])\s+")
_SETEXT = re.compile(r"^\s*(?:=+|-+)\s*$")
_QUOTE = re.compile(r"^(?:>\s?)+")
#: What leads a line without saying anything: a checked box, a check mark, an emoji.
_MARKS = re.compile(r"^(?:\[[xX]\]\s*|[^\w\s`\"'(\[{<~/.$-]+\s+)+")
_EMPHASIS = re.compile(r"\*\*|(?<![\w*])\*(?=\S)|(?<=\S)\*(?![\w*])")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"'(\[])")
_PROMPTS = ("$ ", "% ", ">>> ", "... ", "|")
#: A line of JSON, or a tool call written as ``Name {json}``: never prose.
_JSON_LINE = re.compile(r'^[\[{]|^[A-Za-z_][\w.:-]* \{|\{"')

_CHAT_START = re.compile(
    r"^(?:sure|ok(?:ay)?|certainly|of course|absolutely|great|perfect|awesome|got it|no problem|"
    r"you'?re welcome|thanks|thank you|happy to|glad|sorry|hope|let me|let's|i'll|i will|i can|"
    # What the agent thinks it has to do next is no fact ("I need to match the format ...", "I should just ...").
    r"i need to|i should|i must|i have to|i want to|"
    r"i'm going to|i am going to|here(?:'s| is| are)|feel free|good (?:question|catch|idea|point)|"
    r"alright|now,? let's|next,? i'll|(?:(?:now|next|then|first|so),? )?i'm (?:now |still |also |just )?[a-z]+ing)\b",
    re.IGNORECASE,
)
_CHAT_ANYWHERE = re.compile(
    r"let me know|hope (?:this|that|it) helps|feel free to|happy to help|if you(?:'d| would)? (?:like|want|need)|"
    r"any (?:other |more )?questions",
    re.IGNORECASE,
)

#: Indicator families, in the order a sentence's kind is decided.
KIND_RULES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(pattern, re.IGNORECASE))
    for kind, pattern in (
        (
            "decision",
            r"\bdecision\s*:|\bdecided\b|\bwe(?:'ll| will)? go with\b|\bgoing with\b|\bwe chose\b|"
            r"\bagreed (?:on|to)\b|\bsettled on\b",
        ),
        (
            "change",
            r"\bmigrat(?:ed|ing)\b|\bchanged\b|\brefactor(?:ed|ing)\b|\bswitched\b|\breplaced\b|"
            r"\bmoved\b|\bupgraded\b|\bdowngraded\b|\brenamed\b|\bdeprecated\b|\bported\b|\bremoved\b",
        ),
        (
            "recommendation",
            r"\brecommend(?:s|ed|ation)?\b|\bsuggest(?:s|ed)?\b|\bshould (?:use|be|switch|prefer|avoid|keep)\b|"
            r"\bprefer(?:s|red)?\b|\badvise\b|\bbest practice\b",
        ),
        (
            "configuration",
            r"\bconfigur(?:ed|es|ing)\b|\bset (?:\S+ ){0,3}to\b|\benabled\b|\bdisabled\b|\benvironment variable\b",
        ),
        (
            "technology",
            r"\buses\b|\bwe use\b|\b(?:is|are) using\b|\bimplement(?:s|ed)\b|\bbuilt (?:with|on)\b|"
            r"\bdepends on\b|\brel(?:y|ies) on\b|\bpowered by\b|\bintegrates? with\b|"
            r"\bruns on\b|\bbacked by\b|\bstored in\b|\bwritten in\b|\bhandled by\b",
        ),
        (
            "lesson",
            r"\b(?:the )?root cause\b|\bthe (?:real |actual |underlying )?(?:issue|problem|bug|cause) (?:is|was)\b|"
            r"\bI see the (?:issue|problem)\b|\bfound the (?:issue|problem|bug|cause)\b|\bkey insight\b|"
            r"\bturn(?:s|ed)? out\b|\b(?:didn't|did not|doesn't|does not) work\b|\bfailed because\b|"
            r"\bcaused by\b|\bbecause\b|\bthe fix (?:is|was)\b|\binstead of\b|\brather than\b|\bwhich means\b",
        ),
        (
            "limitation",
            r"\b(?:doesn't|does not|don't|do not|can't|cannot|isn't|is not|aren't|won't) "
            r"(?:support|expose|allow|have|exist|provide|accept)\b|\bonly supports?\b|\bthere(?:'s| is) no\b|"
            r"\bnot supported\b|\brequires?\b|\bmust be\b",
        ),
        (
            "change",
            r"\b(?:fixed|added|appended|created|extracted|introduced|updated|deleted|wrote|simplified)\b",
        ),
        ("point", r"^[A-Z][\w /()+-]{2,40}:\s+\S"),
    )
)
#: The first families: a sentence they find needs nothing more.
_CORE_FAMILIES = 5
#: Something exact a sentence found by the later families must name (code, an identifier,
#: a path, a number), or it says too little to keep ("I looked into it and fixed it").
_EXACT = re.compile(r"`[^`]+`|\b[A-Za-z_]\w*[A-Z]\w*\b|\b[a-z]\w*_\w+\b|\b[\w.-]+/[\w./-]+|\b\w+\.[a-z]{1,4}\b|\d")

#: Topics a fact can be about, checked in order: specific vocabularies before broad ones.
TOPICS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (topic, re.compile(r"(?<![\w-])(?:" + pattern + r")(?![\w-])", re.IGNORECASE))
    for topic, pattern in (
        (
            "auth",
            r"auth|authn|authz|authentic\w*|authori[sz]\w*|jwts?|oauth\d?|oidc|openid|saml|sso|"
            r"log(?:in|out)|sign[- ]?(?:in|on)|"
            r"session (?:cookies?|store|storage|management)|cookies?|(?:access|refresh|bearer|csrf) tokens?|"
            r"passwords?|credentials?|api keys?|rbac|permissions?",
        ),
        (
            "database",
            r"databases?|db|postgres(?:ql)?|mysql|mariadb|sqlite3?|mongo(?:db)?|dynamodb|cassandra|neo4j|"
            r"orm|sqlalchemy|prisma|alembic|migrations?|sql|indexes",
        ),
        ("cache", r"cach(?:e|es|ed|ing)|redis|memcached?|valkey"),
        ("queue", r"queues?|celery|kafka|rabbitmq|sqs|pub/?sub|background jobs?|task queues?|workers?"),
        (
            "search",
            r"elasticsearch|opensearch|full[- ]text|search index(?:es)?|vector (?:index|store|search)|embeddings?",
        ),
        (
            "testing",
            r"tests?|testing|pytest|jest|vitest|mocha|unittest|coverage|fixtures?|e2e|playwright|cypress|hypothesis",
        ),
        ("ci", r"ci|ci/cd|github actions|gitlab ci|jenkins|circleci|pipelines?"),
        (
            "deployment",
            r"deploy\w*|docker\w*|kubernetes|k8s|helm|terraform|containers?|aws|gcp|azure|heroku|vercel|"
            r"nginx|hosting|staging|production",
        ),
        ("logging", r"logging|logs?|loggers?|observability|metrics|tracing|sentry|prometheus|grafana|opentelemetry"),
        ("frontend", r"frontend|front-end|react|vue|svelte|angular|next\.?js|tailwind|css|html|ui"),
        ("build", r"builds?|bundlers?|webpack|vite|esbuild|rollup|babel|compil\w+|makefile|linters?|ruff|eslint"),
        (
            "dependencies",
            r"dependenc(?:y|ies)|packages?|pip|poetry|uv|npm|yarn|pnpm|requirements\.txt|"
            r"pyproject(?:\.toml)?|lockfiles?",
        ),
        ("api", r"apis?|endpoints?|restful|graphql|grpc|routes?|http|fastapi|flask|django|express|webhooks?"),
        ("config", r"config\w*|settings|env(?:ironment)? var(?:iable)?s?|\.env"),
    )
)

_CODE_SPAN = re.compile(r"`([^`\s][^`]{0,60})`")
#: A technical-looking name: CamelCase (FastAPI), capitals (JWT, S3), or dotted/slashed (os.path).
_NAME = re.compile(r"(?<![\w.])(?:[A-Z][a-z0-9]+[A-Z]\w*|[A-Z][A-Z0-9]+[a-z]*\d*|[a-z]\w*(?:[./][a-z]\w*)+)(?!\w)")
_NAME_STOP = frozenset({"i", "a", "ok", "todo", "note", "e.g", "i.e", "etc"})


@dataclass(frozen=True)
class ExtractedFact:
    """One fact the rules found in a text: the sentence, its kind and its subject."""

    text: str
    kind: str
    subject: str


def candidate_lines(content: str) -> Iterator[str]:
    """The prose lines of a markdown text: no code, headings, tables or prompts; markers stripped."""
    fence: str | None = None
    pending: str | None = None  # a paragraph line, held back until we know no underline follows
    for raw in content.splitlines():
        opening = _FENCE.match(raw)
        stripped = raw.strip()
        if pending is not None and opening is None and _SETEXT.match(stripped):
            pending = None  # the held line was a setext heading
            continue
        if pending is not None:
            yield pending
            pending = None
        if opening is not None:
            if fence is None:
                fence = opening.group(1)
            elif opening.group(1) == fence:
                fence = None
            continue
        if fence is not None or not stripped or _SETEXT.match(stripped):
            continue
        list_item = _LIST_ITEM.match(stripped) is not None
        if raw.startswith(("    ", "\t")) and not list_item:
            continue
        if stripped.startswith("#") or stripped.startswith(_PROMPTS) or _JSON_LINE.search(stripped):
            continue
        line = _LIST_ITEM.sub("", _QUOTE.sub("", stripped), count=1)
        if line.startswith("[ ]"):
            continue  # an unchecked box is a step still to do, not a fact
        line = _MARKS.sub("", _EMPHASIS.sub("", line)).strip()
        if not line:
            continue
        if list_item:
            yield line
        else:
            pending = line
    if pending is not None:
        yield pending


def classify(sentence: str) -> str | None:
    """The kind of a sentence: the first indicator family it matches, or None.

    A sentence found only by the families after the first five (what a session learned,
    a limit it met, a change named by its verb: "fixed", "added", ...) must also name
    something exact (`EXACT_KINDS`, `_EXACT`).
    """
    for position, (kind, pattern) in enumerate(KIND_RULES):
        if pattern.search(sentence):
            if position >= _CORE_FAMILIES and _EXACT.search(sentence) is None:
                return None
            return kind
    return None


def subject_of(sentence: str) -> str:
    """What a sentence is about (see the module docstring for the rule), lowercase."""
    span = _CODE_SPAN.search(sentence)
    if span is not None:
        return span.group(1).strip().lower()
    for topic, pattern in TOPICS:
        if pattern.search(sentence):
            return topic
    for name in _NAME.finditer(sentence):
        if name.group(0).lower() not in _NAME_STOP:
            return name.group(0).lower()
    return "general"


def is_chat(sentence: str) -> bool:
    """Generic conversation (greetings, offers, plans) rather than a statement about the code.

    "I’ll check" is read as "I'll check": Codex writes typographic apostrophes.
    """
    sentence = straight_quotes(sentence)
    return _CHAT_START.match(sentence) is not None or _CHAT_ANYWHERE.search(sentence) is not None


def extract_from_text(content: str) -> list[ExtractedFact]:
    """Every fact the rules find in one assistant text, in order, each sentence once."""
    found: dict[str, ExtractedFact] = {}
    for line in candidate_lines(readable(content)):
        for sentence in _SENTENCE_END.split(line):
            sentence = sentence.strip()
            if not MIN_FACT_CHARS <= len(sentence) <= MAX_SENTENCE_CHARS:
                continue
            if sentence.endswith(("?", ":")) or is_chat(sentence):
                continue
            kind = classify(sentence)
            if kind is not None and sentence not in found:
                found[sentence] = ExtractedFact(text=sentence, kind=kind, subject=subject_of(sentence))
    return list(found.values())


def is_prose(message: Message) -> bool:
    """Whether a message is the assistant's own words: not a tool call, thinking, or a turn that is not work."""
    if message.role is not Role.assistant or message.metadata.get("kind") not in (None, "text"):
        return False
    return tool_call(message) is None and not is_not_work(message)


def _plan_put(message: Message) -> str | None:
    """The plan an ``ExitPlanMode`` call puts to the user; any other call is passed over undecoded.

    Fact extraction reads every message: only a plan tool's call is worth decoding its JSON.
    """
    name = message.metadata.get("tool_name")
    if message.role is not Role.assistant or not (
        name in PLAN_TOOLS if isinstance(name, str) else message.content.startswith(tuple(PLAN_TOOLS))
    ):
        return None
    call = tool_call(message)
    plan = call.args.get("plan") if call is not None and call.name in PLAN_TOOLS else None
    return plan if isinstance(plan, str) else None


def facts_in_message(message: Message) -> list[NewFact]:
    """The prose facts of one stored message (see `is_prose`), each fact citing the message.

    A plan put to the user (``ExitPlanMode``) is prose too, for its findings and reasons
    (`reply_text.plan_context`): approved or not, what it found stays true.
    """
    plan = _plan_put(message)
    if plan is not None:
        content = plan_context(plan)
    elif is_prose(message):
        content = message.content
    else:
        return []
    return [
        NewFact(
            partition=message.partition,
            text=fact.text,
            kind=fact.kind,
            subject=fact.subject,
            source_message_ids=[message.id],
        )
        for fact in extract_from_text(content)
    ]


# -- supersession -------------------------------------------------------------------


def replaces(newer: Fact, older: Fact) -> bool:
    """Whether ``newer`` makes ``older`` stale, by the rule of the module docstring (times aside)."""
    if newer.subject != older.subject or newer.project != older.project:
        return False
    if set(newer.source_message_ids) & set(older.source_message_ids):
        return False
    return newer.kind == older.kind or newer.kind == "change"


async def supersede_older(store: MemoryStore, partition: str, facts: Sequence[Fact]) -> int:
    """Apply supersession for freshly stored facts, in the order given; how many were superseded.

    Each current fact of the same subject is compared with each new fact: the older of
    the two is superseded when the newer replaces it. Between facts of one time, the one
    from the later message is the newer: ``facts`` come in message order, and facts
    stored before this call were extracted from earlier messages. A supersession
    another process made first (`Conflict`) is left as it is.
    """
    position = {fact.id: index for index, fact in enumerate(facts)}

    def older(a: Fact, b: Fact) -> bool:
        if a.created_at != b.created_at:
            return a.created_at < b.created_at
        return position.get(a.id, -1) < position.get(b.id, -1)

    superseded = 0
    done: set[str] = set()
    for fact in facts:
        if fact.valid_until is not None or fact.id in done or fact.subject is None:
            continue
        rivals = await store.list_facts(partition, subject=fact.subject, current_only=True, limit=RIVALS_SCAN)
        for rival in sorted(rivals, key=lambda r: (r.created_at, position.get(r.id, -1), r.id)):
            if rival.id == fact.id or rival.id in done:
                continue
            old, new = (rival, fact) if older(rival, fact) else (fact, rival)
            if not replaces(new, old):
                continue
            try:
                await store.supersede_fact(partition, old.id, new.id, at=new.created_at)
            except Conflict as exc:
                logger.info("supersession skipped: %s", exc)
                continue
            done.add(old.id)
            superseded += 1
            if old is fact:
                break
    return superseded


# -- extraction and evolution ---------------------------------------------------------


async def extract_facts(
    store: MemoryStore,
    partition: str,
    thread_id: str,
    *,
    batch: int = EXTRACTION_BATCH,
    pause: Pause | None = None,
) -> int:
    """Extract facts from the thread's messages not read yet, and supersede what they replace.

    Incremental: reads from the thread's extraction cursor on, a batch at a time, and
    moves the cursor after each batch, so a crash repeats at most one batch (adding a
    fact again changes nothing). Runs whether or not the layer is on; `evolve_facts`
    only calls it for threads whose layer is on. ``pause`` is awaited before each batch.

    A call without a result yet holds the cursor before it only where the thread may still
    bring the result: near its end. A batch that ends between a call and its result goes
    on from the call in the same pass, so one pass reads a long session to its end; a call
    met first by a pass, or followed by a whole batch without its result, is read past.

    Returns:
        How many facts the messages read this time yielded.

    Raises:
        NotFound: if the thread does not exist in the partition.
    """
    if batch < 1:
        raise InvalidInput(f"batch must be at least 1, got {batch}")
    state = await store.fact_layer(partition, thread_id)
    opened = first = state.extracted_seq + 1
    extracted = 0
    while True:
        if pause is not None:
            await pause()
        messages = await store.get_messages(partition, thread_id, first_seq=first, limit=batch)
        if not messages:
            break
        complete = len(messages) < batch  # this batch reaches the thread's end
        reading = structural_facts(messages)
        wait = reading.settled > 0
        if not wait and complete and first != opened:
            break  # met again at the thread's end, still unanswered: the next pass reads past it
        if not wait:
            reading = structural_facts(messages, wait=False)
        elif reading.settled < len(messages):
            # Stop before calls still without a result: a full batch goes on from the first
            # of them (its result may be next), the thread's end waits for the next pass.
            messages = messages[: reading.settled]
            reading = structural_facts(messages)
        failures = await _current_failures(store, partition, reading.facts)
        if failures:
            reading = structural_facts(messages, failures, wait=wait)
        proposed = _in_message_order(messages, reading.facts, partition)
        for start in range(0, len(proposed), WRITE_BATCH):
            stored = await store.add_facts(proposed[start : start + WRITE_BATCH])
            extracted += len(stored)
            await supersede_older(store, partition, stored)
        await store.advance_fact_cursor(partition, thread_id, messages[-1].seq)
        if complete:
            break
        first = messages[-1].seq + 1
    return extracted


async def _current_failures(store: MemoryStore, partition: str, facts: Sequence[StructuralFact]) -> dict[str, str]:
    """Commands of ``facts`` whose current stored fact is a failure, with its error (a pass then says so)."""
    failures: dict[str, str] = {}
    for subject in dict.fromkeys(fact.subject for fact in facts if fact.kind == "command"):
        for known in await store.list_facts(partition, subject=subject, current_only=True, limit=1):
            if FAILED in known.text:
                failures[subject] = known.text.split("): ", 1)[-1]
    return failures


def _in_message_order(
    messages: Sequence[Message], structural: Sequence[StructuralFact], partition: str
) -> list[NewFact]:
    """Prose and structural facts together, ordered by the message each was read from (supersession's order)."""
    position = {message.id: index for index, message in enumerate(messages)}
    ordered: list[tuple[int, int, NewFact]] = []
    for message in messages:
        for prose in facts_in_message(message):
            ordered.append((position[message.id], len(ordered), prose))
    for fact in structural:
        new = NewFact(
            partition=partition,
            text=fact.text,
            kind=fact.kind,
            subject=fact.subject,
            source_message_ids=list(fact.sources),
        )
        ordered.append((max(position[source] for source in fact.sources), len(ordered), new))
    return [fact for _, _, fact in sorted(ordered, key=lambda item: (item[0], item[1]))]


async def evolve_facts(store: MemoryStore, *, partition: str | None = None, pause: Pause | None = None) -> int:
    """The evolution step of the maintenance loop: extract facts in every thread whose layer is on (all but ``kg off``).

    Args:
        store: The store to work on.
        partition: Only this partition; ``None`` (the maintenance loop) means all.
        pause: Awaited before each batch of messages (the maintenance loop's yield point).

    Returns:
        How many facts were extracted, all threads together.
    """
    extracted = 0
    for state in await store.fact_layer_threads(partition):
        extracted += await extract_facts(store, state.partition, state.thread_id, pause=pause)
    return extracted


# -- the kg verbs -------------------------------------------------------------------


class KgResult(BaseModel):
    """What one ``kg`` action did and the fact layer's state after it."""

    action: KgAction
    partition: str
    thread_id: str | None
    layer: FactLayerState | None = Field(None, description="The thread's layer, when a thread was named.")
    threads_on: list[FactLayerState] = Field(
        default_factory=list, description="status without a thread: every thread whose layer is on."
    )
    extracted: int = Field(0, description="on: facts extracted right away from the thread's history.")
    cleared: int = Field(0, description="clear: facts deleted.")
    stats: FactStats | None = Field(None, description="Facts grouped by topic (status, on, stats).")


async def kg_command(store: MemoryStore, partition: str, action: KgAction, thread_id: str | None = None) -> KgResult:
    """Run one ``kg`` action (status, on, off, stats, clear) in a partition.

    ``on`` and ``off`` switch one thread's layer (on by default); ``on`` also extracts
    the thread's history at once. ``status`` and ``stats`` describe one thread, or the
    whole partition without a thread. ``clear`` deletes the thread's (or partition's)
    facts; a thread whose layer stays on is extracted afresh at the next evolution.

    Raises:
        InvalidInput: for an unknown action, or ``on``/``off`` without a thread.
        NotFound: if ``thread_id`` names no thread of the partition.
    """
    if action not in get_args(KgAction):
        raise InvalidInput(f"unknown kg action {action!r}: use status, on, off, stats or clear")
    result = KgResult(action=action, partition=partition, thread_id=thread_id)
    if action in ("on", "off"):
        if thread_id is None:
            raise InvalidInput(f"kg {action} needs a thread_id: the fact layer is switched per thread")
        result.layer = await store.set_fact_layer(partition, thread_id, action == "on")
        if action == "on":
            result.extracted = await extract_facts(store, partition, thread_id)
            result.layer = await store.fact_layer(partition, thread_id)
            result.stats = await store.fact_stats(partition, thread_id=thread_id)
    elif action in ("status", "stats"):
        if thread_id is not None:
            layer = await store.fact_layer(partition, thread_id)  # NotFound for an unknown thread
            if action == "status":
                result.layer = layer
        elif action == "status":
            result.threads_on = await store.fact_layer_threads(partition)
        result.stats = await store.fact_stats(partition, thread_id=thread_id)
    else:
        result.cleared = await store.clear_facts(partition, thread_id)
        if thread_id is not None:
            result.layer = await store.fact_layer(partition, thread_id)
    return result
