"""The deterministic summarizer: a structured checkpoint pulled out of the text itself.

It exists so that compaction works, and is tested, with no model and no network (the
default), and so that there is always something to fall back on when the model fails.
It writes the same checkpoint sections an LLM is asked for — objective, completed,
current state, important files with the sentence that names them, failed attempts,
decisions, open processes, next steps — by sorting sentences with patterns, then trims
the sections until the text fits a budget well under its sources' tokens.

Same input, same text: no randomness, no set iteration, no clock.

Tiny sources are the one limit: a summary must be shorter in
``palimpsest.graph_schema.identity.estimate_tokens`` than what it covers, and below about eight
tokens of sources there is no room for a useful line. The draft is then the shortest
clipped line that fits (empty text for a single-token source), and for sources of zero
tokens nothing is shorter: the draft is empty and the caller must leave those sources
uncovered.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from palimpsest.graph_schema.models import Message, Role, Summary
from palimpsest.scheduler.summarizer import SummaryDraft

#: The checkpoint's sections, in the order they are written.
SECTIONS = (
    "Objective",
    "Completed",
    "Current state",
    "Important files",
    "Failed attempts",
    "Decisions",
    "Open processes",
    "Next steps",
)
#: Starts the last line, which names topics the checkpoint leaves out.
EXPAND_PREFIX = "Expand for details about:"

_MIN_TARGET = 256
_MAX_TARGET = 1500
_ITEM_CHARS = 200
_REASON_CHARS = 120
_SECTION_ITEMS = 6
_FILE_ITEMS = 10
_TOPICS = 8
_TOPIC_CHARS = 48
_SCAN_HEAD = 20000
_SCAN_TAIL = 5000
_FILE_SEPARATOR = " — "

_EXTENSIONS = (
    "py|pyi|ipynb|js|mjs|cjs|ts|tsx|jsx|json|jsonl|yaml|yml|toml|ini|cfg|conf|md|rst|txt|csv|tsv|"
    "sql|cypher|sh|bash|zsh|ps1|rs|go|java|kt|kts|swift|c|h|cc|cpp|hpp|cs|rb|php|html|htm|css|scss|"
    "vue|svelte|lock|xml|proto|gradle|tf|mk|lua|scala|dart|ex|exs|erl|hs|ml|clj|log|patch|diff"
)
_PATH_RE = re.compile(
    rf"(?<![\w@/.-])((?:~|\.{{1,2}})?/?(?:[\w.-]+/)*[\w-][\w.-]*\.(?:{_EXTENSIONS}))(?![\w/])"
    r"|\b(Dockerfile|Makefile|Procfile|Justfile|Gemfile|Jenkinsfile)\b"
)
_NOT_PATHS = re.compile(r"^(node|vue|next|nuxt|react|express|three|chart)\.js$", re.IGNORECASE)
_URL_RE = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.IGNORECASE)
_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9`\"'(\[])")
_BULLET_RE = re.compile(r"^\s*(?:#{1,6}\s+|[-*•>]\s+|\d+[.)]\s+)+")
_NEGATED_FAIL = re.compile(r"\b(?:0|no|zero|without) (?:errors?|failures?|failed)\b", re.IGNORECASE)
_FAIL_WORDS = re.compile(
    r"\b(?:failed|fails|failing|failure|doesn'?t work|does not work|didn'?t work|won'?t work|not working|"
    r"broken|crash(?:es|ed)?|traceback|still red|regressed|error:)",
    re.IGNORECASE,
)
_ERROR_NAME = re.compile(r"\b[A-Z]\w*(?:Error|Exception)\b(?!\s+handling)")
_TOOL_FAIL = re.compile(
    r"^\s*(?:FAILED\b|ERROR\b|E\s+(?:\w+(?:Error|Exception)|assert)\b|fatal:|error(?:\[\w+\])?:|npm ERR!|panic:)"
    r"|^[\w.]*[A-Z]\w*(?:Error|Exception)(?::|$)|\bfailed\b|command not found|No such file or directory|"
    r"Permission denied",
    re.IGNORECASE,
)
_TEST_STATE = re.compile(r"\b\d+ (?:passed|failed)\b|\b\d+ errors? in \d")
_DECISION = re.compile(
    r"\b(?:decision:|decided|we decide|let'?s use|let us use|we'?ll use|we will use|i'?ll use|going with|"
    r"go with|chose|settled on|agreed|instead of|rather than)",
    re.IGNORECASE,
)
_OPEN = re.compile(
    r"\b(?:listening on|running on|serving on|server (?:is )?(?:running|started|up)|"
    r"started (?:the |a )?[\w-]*\s?(?:server|process|job|daemon|watcher|worker)|in the background|"
    r"background (?:job|process|task)|nohup|still running|in progress|pid[ :=]?\d+)\b",
    re.IGNORECASE,
)
_TODO = re.compile(r"\b(?:TODO|FIXME|WIP)\b")
_NEXT = re.compile(
    r"\b(?:next(?: steps?)?:|next,? i|next step|then i'?ll|i'?ll now|now i'?ll|need to|needs to|still need|"
    r"remaining|left to do|to do:|plan:|going to)",
    re.IGNORECASE,
)
_DONE = re.compile(
    r"\b(?:done|fixed|implemented|added|created|updated|refactored|removed|renamed|wrote|written|completed|"
    r"resolved|merged|installed|configured|migrated|passes|passing|now works|works now|green)\b",
    re.IGNORECASE,
)
_WORD_RE = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]{3,}\b")
_STOPWORDS = frozenset(
    """
    about above after again against also because been before being below between both could does doing down
    during each from further have having here into itself just more most much must only other over same
    should some such than that their them then there these they this those through under until very what
    when where which while will with would your yours you'll i'll it's that's let's can't don't didn't
    make sure tell know want need please thanks okay read first file files line lines true false none null
    self return import class async await print test tests pass passed failed error done fixed added now
    still what's check see like look used uses using onto well
    """.split()
)
_HEADING_RE = re.compile(
    r"^\s*#{0,6}\s*\*{0,2}\s*(" + "|".join(SECTIONS) + r")\s*\*{0,2}\s*(?::\s*\*{0,2}\s*(.*))?$",
    re.IGNORECASE,
)
_NONE_ITEM = re.compile(r"^\(?(?:none|n/a|nothing)\)?\.?$", re.IGNORECASE)
_DROP_FRONT = ("Completed", "Failed attempts", "Decisions", "Open processes", "Next steps")


def target_tokens(source_tokens: int, level: int) -> int:
    """How long a checkpoint over ``source_tokens`` tokens should be, at most.

    Why these numbers: a third of the messages (half of already condensed summaries)
    keeps the gist, a floor keeps room for the sections on short chunks, a ceiling
    stops a 20,000-token chunk from becoming a 7,000-token summary, and the result is
    always below the sources (invariant 6). Zero or less when the sources are too small
    for any text to be shorter.
    """
    ratio = 3 if level <= 1 else 2
    return min(source_tokens - 1, max(_MIN_TARGET, min(_MAX_TARGET, source_tokens // ratio)))


def clip(text: str, max_chars: int) -> str:
    """``text`` cut to ``max_chars`` characters, an ellipsis marking the cut."""
    text = " ".join(text.split())
    if len(text) <= max_chars:
        return text
    if max_chars <= 0:
        return ""
    return text[: max_chars - 1].rstrip() + "…"


@dataclass
class Checkpoint:
    """The sections of one checkpoint as lists of items, before it is fitted and written."""

    sections: dict[str, list[str]] = field(default_factory=lambda: {name: [] for name in SECTIONS})
    topics: list[str] = field(default_factory=list)
    #: Items at the front of "Next steps" that fitting keeps longest (the last user request).
    pinned_next: int = 0
    #: The first sentence of the sources: the one-line checkpoint when nothing else fits.
    lead: str = ""


class ExtractiveSummarizer:
    """Writes checkpoints by extraction: deterministic, offline, always shorter than its sources."""

    name = "extractive"

    async def summarize_messages(self, messages: Sequence[Message]) -> SummaryDraft:
        """An L1 checkpoint of a run of messages, fitted under ``target_tokens``.

        Why never raising: it is the fallback of every other summarizer, so it must
        produce a draft for any content (see the module docstring for tiny sources).
        """
        source_tokens = sum(message.tokens for message in messages)
        checkpoint = extract_checkpoint(messages)
        return SummaryDraft(text=fit(checkpoint, target_tokens(source_tokens, 1)), summarizer=self.name)

    async def summarize_summaries(self, summaries: Sequence[Summary], level: int) -> SummaryDraft:
        """A level-``level`` checkpoint merging its children's sections, fitted under budget."""
        source_tokens = sum(summary.tokens for summary in summaries)
        checkpoint = merge_checkpoints([parse_checkpoint(summary.text) for summary in summaries])
        return SummaryDraft(text=fit(checkpoint, target_tokens(source_tokens, level)), summarizer=self.name)


# -- extraction from messages ------------------------------------------------------------


@dataclass
class _Unit:
    """One sentence (chat) or one line (tool output) of one message."""

    text: str
    role: Role


def extract_checkpoint(messages: Sequence[Message]) -> Checkpoint:
    """Sort the sentences of ``messages`` into checkpoint sections.

    Each sentence lands in at most one of failed attempts, decisions, open processes,
    next steps and completed (in that order of precedence); objective, current state
    and the last request are taken from the first and last turns.
    """
    checkpoint = Checkpoint()
    sections = checkpoint.sections
    units_by_message = [list(_units(message)) for message in messages]
    users = [index for index, units in enumerate(units_by_message) if units and units[0].role == Role.user]
    objective_source = users[0] if users else None
    if objective_source is not None:
        sections["Objective"].append(" ".join(unit.text for unit in units_by_message[objective_source][:3]))
    checkpoint.lead = next((u[0].text for u in units_by_message if u and u[0].role != Role.system), "")
    test_state: str | None = None
    for units in units_by_message:
        for unit in units:
            if unit.role == Role.system:
                continue
            if unit.role == Role.tool:
                if _TEST_STATE.search(unit.text):
                    test_state = unit.text.strip(" =")
                    continue
                if _TOOL_FAIL.search(unit.text) and not _NEGATED_FAIL.search(unit.text):
                    sections["Failed attempts"].append(unit.text)
                elif _OPEN.search(unit.text) or _TODO.search(unit.text):
                    sections["Open processes"].append(unit.text)
                continue
            section = _classify(unit)
            if section is not None:
                sections[section].append(unit.text)
    sections["Current state"] += _current_state(units_by_message)
    if test_state is not None:
        sections["Current state"].append(f"Tests: {test_state}")
    if users and users[-1] != objective_source:
        last_request = " ".join(unit.text for unit in units_by_message[users[-1]][:3])
        sections["Next steps"].insert(0, f"Last request: {last_request}")
        checkpoint.pinned_next = 1
    files = _important_files(messages, units_by_message)
    sections["Important files"] = files[:_FILE_ITEMS]
    checkpoint.topics = [item.split(_FILE_SEPARATOR)[0] for item in files[_FILE_ITEMS:]]
    checkpoint.topics += _frequent_terms(
        unit.text for units in units_by_message for unit in units if unit.role != Role.system
    )
    _tidy(checkpoint)
    return checkpoint


def _current_state(units_by_message: Sequence[Sequence[_Unit]]) -> list[str]:
    """Where the work stands: the latest assistant turn that says more than what comes next."""
    for units in reversed(units_by_message):
        if units and units[0].role == Role.assistant:
            said = [unit.text for unit in units if _classify(unit) != "Next steps"]
            if said:
                return [" ".join(said[:2])]
    return []


def _units(message: Message) -> Iterator[_Unit]:
    """The sentences of a chat message outside code fences, or the lines of a tool result."""
    content = message.content
    if len(content) > _SCAN_HEAD + _SCAN_TAIL:
        content = content[:_SCAN_HEAD] + "\n" + content[-_SCAN_TAIL:]
    in_fence = False
    for raw in content.splitlines():
        if raw.lstrip().startswith("```"):
            in_fence = not in_fence
            continue
        if message.role == Role.tool:
            line = raw.strip()
            if line:
                yield _Unit(clip(line, _ITEM_CHARS), message.role)
            continue
        if in_fence:
            continue
        pending = ""
        for sentence in _SENTENCE_RE.split(_BULLET_RE.sub("", raw).strip()):
            sentence = f"{pending} {sentence}".strip() if pending else sentence.strip()
            if len(sentence) < 12:
                pending = sentence  # "Done." carries no facts alone: join it to what follows
                continue
            pending = ""
            yield _Unit(clip(sentence, _ITEM_CHARS), message.role)
        if len(pending) >= 3:
            yield _Unit(pending, message.role)


def _classify(unit: _Unit) -> str | None:
    """The section a chat sentence belongs to, or None when it is none of them."""
    text = unit.text
    if not _NEGATED_FAIL.search(text) and (_FAIL_WORDS.search(text) or _ERROR_NAME.search(text)):
        return "Failed attempts"
    if _DECISION.search(text):
        return "Decisions"
    if _OPEN.search(text) or _TODO.search(text):
        return "Open processes"
    if _NEXT.search(text):
        return "Next steps"
    if unit.role == Role.assistant and _DONE.search(text):
        return "Completed"
    return None


def _paths(text: str) -> list[str]:
    """File paths named in ``text``, in order of appearance, URLs left out."""
    found = []
    for match in _PATH_RE.finditer(_URL_RE.sub(" ", text)):
        path = match.group(1) or match.group(2)
        if path.startswith(("a/", "b/")):
            path = path[2:]  # git diff's old/new prefixes
        if not _NOT_PATHS.match(path):
            found.append(path)
    return found


def _important_files(messages: Sequence[Message], units_by_message: Sequence[Sequence[_Unit]]) -> list[str]:
    """``path — reason`` items, most mentioned first; the reason is a sentence naming the path.

    A sentence from the user or the assistant that says more than the path itself is
    preferred to a line of tool output.
    """
    mentions: Counter[str] = Counter()
    reasons: dict[str, tuple[int, str]] = {}
    for message, units in zip(messages, units_by_message, strict=True):
        if message.role == Role.system:
            continue
        named = [value for value in message.metadata.values() if isinstance(value, str)]
        for path in dict.fromkeys(path for text in [message.content[:_SCAN_HEAD], *named] for path in _paths(text)):
            mentions[path] += 1
        for unit in units:
            for path in _paths(unit.text):
                rest = len(unit.text.replace(path, "").strip(" .,:;`'\"")) >= 20
                rank = (0 if unit.role != Role.tool else 2) + (0 if rest else 1)
                if path not in reasons or rank < reasons[path][0]:
                    reasons[path] = (rank, unit.text)
    ordered = sorted(mentions, key=lambda path: -mentions[path])  # stable: first appearance breaks ties
    # A reason that only repeats the path ("Reading a.py.") is left out.
    return [
        f"{path}{_FILE_SEPARATOR}{clip(reasons[path][1], _REASON_CHARS)}"
        if path in reasons and reasons[path][0] % 2 == 0
        else path
        for path in ordered
    ]


def _frequent_terms(texts: Iterator[str]) -> list[str]:
    """Words used at least twice, identifiers weighted up: candidates for the expand line."""
    counts: Counter[str] = Counter()
    spelling: dict[str, str] = {}
    for text in texts:
        for word in _WORD_RE.findall(text):
            key = word.lower()
            if key not in _STOPWORDS and not key.isdigit():
                counts[key] += 1
                spelling.setdefault(key, word)

    def weight(key: str) -> int:
        word = spelling[key]
        technical = "_" in word or any(c.isdigit() for c in word) or any(c.isupper() for c in word[1:])
        return counts[key] * (3 if technical else 1)

    frequent = [key for key in counts if counts[key] >= 2]
    return [spelling[key] for key in sorted(frequent, key=lambda key: -weight(key))[: 3 * _TOPICS]]


def _tidy(checkpoint: Checkpoint) -> None:
    """Drop duplicates and keep each section to its size, moving dropped paths to topics."""
    for name, items in checkpoint.sections.items():
        first_seen: dict[str, str] = {}
        for item in items:
            first_seen.setdefault(_key(item), item)
        unique = list(first_seen.values())
        if name == "Important files":
            limit, keep = _FILE_ITEMS, unique[:_FILE_ITEMS]
        else:
            limit = _SECTION_ITEMS + (checkpoint.pinned_next if name == "Next steps" else 0)
            keep = _shrink(unique, limit, front=name in _DROP_FRONT, pinned=_pinned(checkpoint, name))
        checkpoint.sections[name] = [clip(item, _ITEM_CHARS) for item in keep]
        for item in unique:
            if item not in keep:
                checkpoint.topics[:0] = _paths(item)[:1]
    checkpoint.topics = list(dict.fromkeys(topic for topic in checkpoint.topics if topic))


def _pinned(checkpoint: Checkpoint, name: str) -> int:
    return checkpoint.pinned_next if name == "Next steps" else 0


def _shrink(items: list[str], limit: int, *, front: bool, pinned: int) -> list[str]:
    """At most ``limit`` items, dropping the oldest (``front``) or the least important."""
    if len(items) <= limit:
        return items
    if front:
        return items[:pinned] + items[len(items) - (limit - pinned) :]
    return items[:limit]


def _key(item: str) -> str:
    return " ".join(re.sub(r"\W+", " ", item.lower()).split())


# -- merging summaries -----------------------------------------------------------------


def parse_checkpoint(text: str) -> Checkpoint:
    """Read a checkpoint back into sections, whoever wrote it.

    Tolerant on purpose: LLM checkpoints vary headings (``## Objective``, ``**Decisions:**``,
    ``Next steps: ...``); the lines of a text without headings (a one-line checkpoint)
    are read as what it completed, the first also kept as its lead.
    """
    checkpoint = Checkpoint()
    current: str | None = None
    loose: list[str] = []
    canonical = {name.lower(): name for name in SECTIONS}
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.lower().startswith(EXPAND_PREFIX.lower()):
            topics = line[len(EXPAND_PREFIX) :].strip().rstrip(".")
            checkpoint.topics += [topic.strip() for topic in topics.split(",") if topic.strip()]
            continue
        heading = _HEADING_RE.match(line)
        if heading:
            current = canonical[heading.group(1).lower()]
            line = heading.group(2) or ""
            if not line.strip():
                continue
        item = _BULLET_RE.sub("", line).strip()
        if not item or _NONE_ITEM.match(item):
            continue
        if current is None:
            loose.append(item)
        else:
            checkpoint.sections[current].append(item)
    if loose:
        if not any(checkpoint.sections.values()):
            loose[0] = checkpoint.lead = re.sub(r"^checkpoint:\s*", "", loose[0], flags=re.IGNORECASE)
        checkpoint.sections["Completed"][:0] = loose
    return checkpoint


def merge_checkpoints(children: Sequence[Checkpoint]) -> Checkpoint:
    """One checkpoint over several consecutive ones, oldest first.

    The objective is the first child's; current state and next steps are the latest
    child's that has any (the most recent state wins); the other sections are the
    children's items in order, deduplicated; files are merged by path, the ones most
    children mention first.
    """
    merged = Checkpoint(lead=next((child.lead for child in children if child.lead), ""))
    sections = merged.sections
    sections["Objective"] = next((c.sections["Objective"][:1] for c in children if c.sections["Objective"]), [])
    for name in ("Current state", "Next steps"):
        sections[name] = next((c.sections[name] for c in reversed(children) if c.sections[name]), [])
    for name in ("Completed", "Failed attempts", "Decisions", "Open processes"):
        sections[name] = [item for child in children for item in child.sections[name]]
    mentions: Counter[str] = Counter()
    first_item: dict[str, str] = {}
    for child in children:
        for item in child.sections["Important files"]:
            found = _paths(item)
            path = found[0] if found else item.split(_FILE_SEPARATOR)[0]
            mentions[path] += 1
            first_item.setdefault(path, item)
    files = [first_item[path] for path in sorted(mentions, key=lambda path: -mentions[path])]
    sections["Important files"] = files
    merged.topics = [path for item in files[_FILE_ITEMS:] for path in _paths(item)[:1]]
    merged.topics += [topic for child in children for topic in child.topics]
    merged.topics += _frequent_terms(item for child in children for items in child.sections.values() for item in items)
    _tidy(merged)
    return merged


# -- fitting the budget ----------------------------------------------------------------


def render(checkpoint: Checkpoint, *, keep_empty: bool = True) -> str:
    """The checkpoint as text: one ``## Section`` heading and ``- item`` lines per section.

    The last line names topics not already in the text, so an agent knows what
    ``expand`` would bring back.
    """
    lines: list[str] = []
    for name in SECTIONS:
        items = checkpoint.sections[name]
        if not items and not keep_empty:
            continue
        lines.append(f"## {name}")
        lines += [f"- {item}" for item in items] if items else ["- none"]
    body = "\n".join(lines)
    lowered = body.lower()
    topics = list(dict.fromkeys(clip(t, _TOPIC_CHARS) for t in checkpoint.topics if t.lower() not in lowered))
    topics = topics[:_TOPICS]
    if topics:
        body = f"{body}\n{EXPAND_PREFIX} {', '.join(topics)}" if body else f"{EXPAND_PREFIX} {', '.join(topics)}"
    return body


def fit(checkpoint: Checkpoint, budget_tokens: int) -> str:
    """The longest rendering of ``checkpoint`` within ``budget_tokens`` (estimate_tokens).

    Empty sections go first, then items one at a time from the fullest section (its
    oldest item for chronological sections, its least important otherwise; file
    reasons before files), so that every section keeps its best item longest; dropped
    file paths joining the expand line; when only the objective is left and still too
    long, a single clipped line. A budget below one token gives empty text.
    """
    max_chars = 4 * budget_tokens
    text = render(checkpoint)
    if len(text) <= max_chars:
        return text
    sections = {name: list(items) for name, items in checkpoint.sections.items()}
    trimmed = Checkpoint(
        sections=sections, topics=list(checkpoint.topics), pinned_next=checkpoint.pinned_next, lead=checkpoint.lead
    )
    while True:
        text = render(trimmed, keep_empty=False)
        if len(text) <= max_chars:
            return text
        droppable = [name for name in SECTIONS[1:] if sections[name]]
        if not droppable:
            break
        # The section with the most items gives one up: each keeps its best items longest.
        name = max(droppable, key=lambda n: (len(sections[n]), sum(len(item) for item in sections[n])))
        items = sections[name]
        with_reason = [i for i, item in enumerate(items) if _FILE_SEPARATOR in item]
        if name == "Important files" and with_reason:
            # A file keeps its path longer than its reason.
            items[with_reason[-1]] = items[with_reason[-1]].split(_FILE_SEPARATOR)[0]
            continue
        # Chronological sections lose their oldest item, but pinned items (the last request) go last.
        index = min(_pinned(trimmed, name), len(items) - 1) if name in _DROP_FRONT else len(items) - 1
        trimmed.topics[:0] = _paths(items.pop(index))[:1]
        if name == "Next steps":
            trimmed.pinned_next = min(trimmed.pinned_next, len(items))
    first_item = next((items[0] for items in checkpoint.sections.values() if items), checkpoint.lead)
    return clip(f"Checkpoint: {first_item or 'no text'}", max_chars)
