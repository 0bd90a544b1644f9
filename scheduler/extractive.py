"""The deterministic summarizer: a checkpoint built from the session's own structure.

It exists so that compaction works, and is tested, with no model and no network (the
default), and so that there is always something to fall back on when the model fails.
It is what most users get, so it must be good on its own:

- what was done comes from the tool calls (`palimpsest.scheduler.session_facts`): files
  modified with how often, files read, commands with their exit status, failed calls
  with the error's first line, the todo list; nothing is copied out of a file that was
  only read, and no item holds raw tool-call JSON;
- the objective is the user's own first request in the chunk (the last one is pinned
  in next steps); decisions, next steps and what was completed come from the
  assistant's own text, sorted by patterns;
- a conversation without tools (people talking) gets an objective naming who talks,
  when and about what, and its most informative sentences as dated events, relative
  dates ("yesterday", "last year") resolved against the message's time;
- "Expand for details about" names the identifiers, paths, error names and proper
  nouns the checkpoint leaves out, never common words: ranked by how often the chunk
  uses them times how rare they are in the thread (the engine's `Background`), and a
  term found in more than `COMMON_SHARE` of the thread's messages is left out however
  often the chunk uses it (a speaker's name, the project's main module, "I'd").

Escalated checkpoints merge their children's sections (`checkpoint_text.merge_checkpoints`).
Same input, same text: no randomness, no set iteration, no clock. A summary is always
shorter in ``estimate_tokens`` than its sources (invariant 6); below about eight tokens
of sources the draft is the shortest clipped line that fits, and for sources of zero
tokens it is empty and the caller leaves them uncovered.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timedelta

from palimpsest.graph_schema.models import Message, Role, Summary
from palimpsest.scheduler.checkpoint_text import (
    EXPAND_PREFIX,
    ITEM_CHARS,
    SECTIONS,
    Checkpoint,
    fit,
    merge_checkpoints,
    parse_checkpoint,
    render,
    tidy,
)
from palimpsest.scheduler.session_facts import (
    SessionFacts,
    clip,
    describe_change,
    describe_command,
    extract_facts,
)
from palimpsest.scheduler.summarizer import Background, SummaryDraft

__all__ = [
    "COMMON_SHARE",
    "EXPAND_PREFIX",
    "SECTIONS",
    "ExtractiveSummarizer",
    "distinctive",
    "extract_checkpoint",
    "parse_checkpoint",
    "target_tokens",
]

_MIN_TARGET = 256
_MAX_TARGET = 1200
_SCAN_CHARS = 8000
_OBJECTIVE_CHARS = 260
#: Latest assistant texts searched for a statement of where the work stands.
_STATE_LOOKBACK = 3
#: A term in more than this share of the thread's messages is common there, not distinctive.
COMMON_SHARE = 0.08
#: A background of fewer messages is too small to call a term common.
_MIN_BACKGROUND = 12

_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9`\"'(\[])")
_BULLET_RE = re.compile(r"^\s*(?:#{1,6}\s+|[-*•>]\s+|\d+[.)]\s+)+")
_NEGATED_FAIL = re.compile(r"\b(?:0|no|zero|without) (?:errors?|failures?|failed)\b", re.IGNORECASE)
_FAIL_WORDS = re.compile(
    r"\b(?:failed|fails|failing|doesn'?t work|does not work|didn'?t work|won'?t work|not working|broken|"
    r"crash(?:es|ed)?|still red|regressed)\b",
    re.IGNORECASE,
)
_DECISION = re.compile(
    r"\b(?:decision:|decided|decide to|we decide|let'?s use|let'?s go with|we'?ll use|we will use|i'?ll use|"
    r"going with|go with|chose|choose|settled on|agreed|instead of|rather than|better to|the fix is|"
    r"the approach is|switch(?:ing)? to|prefer)\b",
    re.IGNORECASE,
)
_OPEN = re.compile(
    r"\b(?:listening on|running on|serving on|in the background|background (?:job|process|task)|still running|"
    r"TODO|FIXME)\b"
)
_NEXT = re.compile(
    r"\b(?:next(?: steps?)?:|next,? i|next step|then i'?ll|i'?ll now|now i'?ll|need to|needs to|still need|"
    r"remaining|left to do|to do:|plan:|going to)",
    re.IGNORECASE,
)
_DONE = re.compile(
    r"\b(?:done|fixed|implemented|added|created|updated|refactored|removed|renamed|wrote|completed|resolved|"
    r"merged|installed|configured|migrated|passes|passing|now works|works now|green)\b",
    re.IGNORECASE,
)
_BACKTICKED = re.compile(r"`([^`\n]{3,40})`")
_EDGE_PUNCTUATION = "\"'()[]{}<>,;:!?.`*"
_WORD_RE = re.compile(r"[A-Za-z][A-Za-z'-]*|\d[\d,.:/]*")
_SPEAKER_PREFIX = re.compile(r"^([A-Z][\w'.-]{0,20}(?: [A-Z][\w'.-]{0,20})?):\s")
_STOPWORDS = frozenset(
    """
    a about above after again against all also am an and any are as at be because been before being below between
    both but by can could did do does doing down during each few for from further had has have having he her here
    hers him his how i if in into is it its itself just me more most much must my no nor not now of off on once
    only or other our out over own same she should so some such than that the their them then there these they
    this those through to too under until up very was we were what when where which while who whom why will with
    would you your yours yes yeah oh hey hi hello wow thanks thank really so very much lot lots great good nice
    awesome amazing cool glad love like just totally definitely always never something anything everything thing
    things stuff really pretty kind sure okay ok well also still even though since maybe way ways lot time times
    make makes made get gets got going gonna want wanted know knew think thought feel feels felt see saw look
    looking say said tell told let lets can't don't didn't i'm it's that's you're i've i'll we're they're there's
    what's let's isn't wasn't aren't couldn't wouldn't doesn't haven't hasn't ever one two new day days year
    years today yesterday tomorrow week weeks month months btw lol omg haha hmm
    """.split()
)
_MONTHS = "January February March April May June July August September October November December".split()
_WEEKDAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
_NUMBER_WORDS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "few": 3}
_RELATIVE = re.compile(
    r"\b(yesterday|last night|today|tonight|this morning|last (?:week|weekend|month|year|" + "|".join(_WEEKDAYS) + r")|"
    r"next (?:week|month|year)|this (?:week|month|year)|(\d+|a|an|one|two|three|four|five|six|few) "
    r"(day|week|month|year)s? ago)\b",
    re.IGNORECASE,
)


def target_tokens(source_tokens: int, level: int) -> int:
    """How long a checkpoint over ``source_tokens`` tokens should be, at most.

    Why these numbers: a third of the messages (half of already condensed summaries)
    keeps the gist, a floor keeps room for the sections on short chunks, a ceiling
    keeps a 20,000-token chunk from becoming a long summary that crowds the context,
    and the result is always below the sources (invariant 6). Zero or less when the
    sources are too small for any text to be shorter.
    """
    ratio = 3 if level <= 1 else 2
    return min(source_tokens - 1, max(_MIN_TARGET, min(_MAX_TARGET, source_tokens // ratio)))


class ExtractiveSummarizer:
    """Writes checkpoints from structure and extraction: deterministic, offline, always shorter than its sources."""

    name = "extractive"

    async def summarize_messages(
        self, messages: Sequence[Message], *, background: Background | None = None
    ) -> SummaryDraft:
        """An L1 checkpoint of a run of messages, fitted under ``target_tokens``.

        Why never raising: it is the fallback of every other summarizer, so it must
        produce a draft for any content (see the module docstring for tiny sources).
        """
        budget = target_tokens(sum(message.tokens for message in messages), 1)
        checkpoint = extract_checkpoint(messages, budget, background=background)
        return SummaryDraft(text=fit(checkpoint, budget), summarizer=self.name)

    async def summarize_summaries(
        self, summaries: Sequence[Summary], level: int, *, background: Background | None = None
    ) -> SummaryDraft:
        """A level-``level`` checkpoint merging its children's sections, fitted under budget.

        The children's topics are ranked again against the thread: what was rare in
        one chunk may be common across the run being merged.
        """
        budget = target_tokens(sum(summary.tokens for summary in summaries), level)
        checkpoint = merge_checkpoints([parse_checkpoint(summary.text) for summary in summaries])
        checkpoint.topics = distinctive(Counter(dict.fromkeys(checkpoint.topics, 1)), background)
        return SummaryDraft(text=fit(checkpoint, budget), summarizer=self.name)


def distinctive(counts: Counter[str], background: Background | None, *, limit: int = 24) -> list[str]:
    """The terms that mark a chunk against the rest of its thread, most telling first.

    ``background`` is the thread without the chunk (`Background.elsewhere`). A term's
    worth is how often the chunk uses it times its inverse document frequency there; a
    term in more than `COMMON_SHARE` of a background of at least `_MIN_BACKGROUND`
    messages is dropped. Without one (or with too small a one), the chunk's own counts
    decide. Ties keep the order of first appearance (``counts`` is insertion ordered).
    """
    if background is None or background.documents < _MIN_BACKGROUND:
        return sorted(counts, key=lambda term: -counts[term])[:limit]
    kept = [term for term in counts if background.share(term) <= COMMON_SHARE]
    return sorted(kept, key=lambda term: -counts[term] * background.weight(term))[:limit]


def extract_checkpoint(
    messages: Sequence[Message], budget_tokens: int = _MAX_TARGET, *, background: Background | None = None
) -> Checkpoint:
    """The checkpoint of a run of messages: structural facts first, then the conversation's own words.

    ``budget_tokens`` only bounds how many events a conversation without tools keeps;
    `fit` enforces the budget on the whole. ``background`` says which words are common
    in the thread, these messages included (see `distinctive`).
    """
    facts = extract_facts(messages)
    checkpoint = Checkpoint()
    sections = checkpoint.sections
    talk = [m for m in messages if m.id not in facts.structural_ids and m.role != Role.system and m.content.strip()]
    speakers = _speakers(talk)
    elsewhere = background.elsewhere(messages) if background is not None else None
    _objective(checkpoint, facts, talk, speakers, elsewhere)
    _from_facts(checkpoint, facts)
    people_talking = facts.tool_calls == 0 and _named(talk, speakers)
    for message in [] if people_talking else talk:
        if message.role == Role.assistant:
            thinking = message.metadata.get("kind") == "thinking"
            for sentence in _sentences(message.content):
                section = _classify(sentence)
                if section is not None and (not thinking or section == "Decisions"):
                    sections[section].append(sentence)
    if not people_talking:
        sections["Current state"] = _current_state(talk) + sections["Current state"]
    checkpoint.lead = next((_first_sentence(m.content) for m in talk), "")
    checkpoint.topics = _topics(facts, talk, speakers, elsewhere)
    tidy(checkpoint)
    if not facts.structural_ids and talk:
        room = 4 * budget_tokens - len(render(checkpoint)) - 40
        sections["Events"] = _events(talk, speakers, room)
    return checkpoint


def _objective(
    checkpoint: Checkpoint,
    facts: SessionFacts,
    talk: Sequence[Message],
    speakers: list[str],
    elsewhere: Background | None,
) -> None:
    """The user's first request (the last one pinned in next steps), or who talks about what.

    What people talk about is what they come back to here and less elsewhere in the thread.
    """
    sections = checkpoint.sections
    requests = facts.requests
    if facts.tool_calls == 0 and _named(talk, speakers):
        first, last = talk[0].created_at, talk[-1].created_at
        when = _day(first) if first.date() == last.date() else f"{_day(first)} to {_day(last)}"
        about = _chat_topics(talk, speakers, elsewhere)
        people = " and ".join(speakers) if len(speakers) <= 3 else ", ".join(speakers)
        sections["Objective"].append(f"{people} talk on {when}" + (f" about {', '.join(about)}" if about else ""))
        return
    if requests:
        sections["Objective"].append(clip(_first_sentences(requests[0]), _OBJECTIVE_CHARS))
        if len(requests) > 1 and requests[-1] != requests[0]:
            sections["Next steps"].insert(0, "Last request: " + clip(_first_sentences(requests[-1]), _OBJECTIVE_CHARS))
            checkpoint.pinned_next = 1
        return
    work = list(facts.modified)[:3] or [run.command for run in list(facts.commands.values())[:2]]
    if work:
        sections["Objective"].append("No new request here; work continues on " + ", ".join(work))
    elif talk:
        sections["Objective"].append("No new request here; " + clip(_first_sentence(talk[0].content), 200))


def _named(talk: Sequence[Message], speakers: list[str]) -> bool:
    """Whether people with names talk here (a chat between people rather than with an agent)."""
    return bool(talk) and (len(speakers) >= 2 or any(m.metadata.get("speaker") for m in talk))


def _from_facts(checkpoint: Checkpoint, facts: SessionFacts) -> None:
    """The sections the tool calls fill by themselves."""
    sections = checkpoint.sections
    sections["Files modified"] = [describe_change(path, change) for path, change in facts.modified.items()]
    sections["Files read"] = [path for path in facts.read if path not in facts.modified]
    sections["Commands"] = [describe_command(run) for run in facts.commands.values()]
    sections["Failed attempts"] = [f"{failure.what}: {failure.error}" for failure in facts.failures]
    sections["Open processes"] = [f"{command} started in the background" for command in facts.background]
    sections["Completed"] = [f"Todo done: {item}" for item in facts.todo_done]
    sections["Next steps"] += [f"Todo: {item}" for item in facts.todo_open]
    if facts.test_state:
        sections["Current state"].append(f"Tests: {facts.test_state}")


def _current_state(talk: Sequence[Message]) -> list[str]:
    """Where the work stands: what the latest assistant texts say beyond completed work, failures and plans."""
    looked = 0
    for message in reversed(talk):
        if message.role == Role.assistant and message.metadata.get("kind") in (None, "text"):
            said = [sentence for sentence in _sentences(message.content) if _classify(sentence) is None]
            if said:
                return [" ".join(said[:2])]
            looked += 1
            if looked == _STATE_LOOKBACK:
                break
    return []


def _sentences(content: str) -> Iterator[str]:
    """The sentences of a message outside code fences, bullets stripped, short ones joined to the next."""
    in_fence = False
    for raw in content[:_SCAN_CHARS].splitlines():
        if raw.lstrip().startswith("```"):
            in_fence = not in_fence
            continue
        if in_fence or not raw.strip() or raw.lstrip().startswith("|"):
            continue
        pending = ""
        for sentence in _SENTENCE_RE.split(_BULLET_RE.sub("", raw).strip()):
            sentence = f"{pending} {sentence}".strip() if pending else sentence.strip()
            if len(sentence) < 12:
                pending = sentence  # "Done." carries no facts alone: join it to what follows
                continue
            pending = ""
            yield clip(sentence, ITEM_CHARS)
        if len(pending) >= 3:
            yield pending


def _first_sentence(content: str) -> str:
    return next(_sentences(content), clip(content, 200))


def _first_sentences(content: str) -> str:
    return " ".join(list(_sentences(content))[:2]) or clip(content, _OBJECTIVE_CHARS)


def _classify(sentence: str) -> str | None:
    """The section an assistant sentence belongs to, or None when it is none of them."""
    if not _NEGATED_FAIL.search(sentence) and _FAIL_WORDS.search(sentence):
        return "Failed attempts"
    if _DECISION.search(sentence):
        return "Decisions"
    if _OPEN.search(sentence):
        return "Open processes"
    if _NEXT.search(sentence):
        return "Next steps"
    if _DONE.search(sentence):
        return "Completed"
    return None


# -- what the checkpoint leaves out, and conversations without tools ----------------------------


def _topics(
    facts: SessionFacts, talk: Sequence[Message], speakers: list[str], background: Background | None
) -> list[str]:
    """Identifiers, paths, error names and proper nouns of the chunk, most distinctive first.

    Only from what the people and the assistant wrote and from the failed calls' errors,
    never from the output of a file that was read. A word counts when its shape says it
    is technical (a path, ``snake_case``, ``dotted.name``, ``CamelCase``, ``SomeError``,
    a backticked span); plain words never do, however frequent.
    """
    counts: Counter[str] = Counter()
    texts: list[str] = [m.content[:_SCAN_CHARS] for m in talk if m.metadata.get("kind") != "thinking"]
    texts += [failure.error for failure in facts.failures]
    for text in texts:
        for span in _BACKTICKED.findall(text):
            counts[span] += 1
        for raw in text.split():
            word = raw.strip(_EDGE_PUNCTUATION)
            if 3 <= len(word) <= 60 and "`" not in word and _technical(word):
                counts[word] += 1
    if not facts.structural_ids:
        for term in _proper_nouns(talk, speakers):
            counts[term] += 1
    counts.update(facts.read[10:])
    return distinctive(counts, background)


def _technical(word: str) -> bool:
    """Whether a word's shape marks it as an identifier, a path or an error name."""
    rest = word[1:]
    if rest.islower() and word.isalpha():
        return False  # the common case, decided first: a plain word
    lower = word.lower()
    if "://" in word or lower in _STOPWORDS or word[0].isdigit() or lower in ("e.g", "i.e"):
        return False
    if "/" in word or "_" in word.strip("_"):
        return any(c.isalpha() for c in word)
    if "." in word.strip("."):
        head, _, tail = word.rpartition(".")
        return head[:1].isalpha() and tail[:1].isalpha() and not word.endswith("...")
    return word[0].isalpha() and rest != rest.lower() and word != word.upper()


def _speakers(talk: Sequence[Message]) -> list[str]:
    """Who talks, in order of first words: metadata ``speaker``, a ``Name:`` prefix, else nobody named."""
    found: list[str] = []
    for message in talk:
        name = message.metadata.get("speaker")
        if not isinstance(name, str):
            match = _SPEAKER_PREFIX.match(message.content)
            name = match.group(1) if match else None
        if name and name not in found:
            found.append(name)
    return found


def _speaker(message: Message) -> str:
    name = message.metadata.get("speaker")
    if isinstance(name, str):
        return name
    match = _SPEAKER_PREFIX.match(message.content)
    return match.group(1) if match else message.role.value.capitalize()


def _proper_nouns(talk: Sequence[Message], speakers: list[str]) -> Iterator[str]:
    """Capitalised words inside sentences, speakers and months left out.

    A word opening a sentence is capitalised whatever it is ("Taking", "Hope"), so a
    word after one that ends a sentence (``.!?:``, a closing bracket, an emoji) is
    skipped too: short sentences are joined to the next, and chats end lines in emoji.
    """
    skip = {*speakers, "I", *_MONTHS, *_WEEKDAYS}
    for message in talk:
        for sentence in _sentences(_SPEAKER_PREFIX.sub("", message.content)):
            words = sentence.split()
            for previous, word in zip(words, words[1:], strict=False):
                if previous[-1] in ".!?:;)" or not previous[-1].isalnum() and previous[-1] not in ",'\"":
                    continue
                word = word.strip(".,!?;:\"'()[]")
                if len(word) > 2 and word[0].isupper() and word not in skip and word.lower() not in _STOPWORDS:
                    yield word


def _chat_topics(talk: Sequence[Message], speakers: list[str], elsewhere: Background | None) -> list[str]:
    """The few words a conversation keeps coming back to: proper nouns, then repeated content words.

    Counted case-blind (a name keeps its capitals), at least twice, then ranked as
    `distinctive` ranks terms against the rest of the thread.
    """
    counts: Counter[str] = Counter()
    shown: dict[str, str] = {}
    for name in _proper_nouns(talk, speakers):
        shown.setdefault(name.lower(), name)
        counts[name.lower()] += 1
    lowered = {name.lower() for name in speakers}
    for message in talk:
        for word in _WORD_RE.findall(message.content):
            key = word.lower()
            if len(key) >= 5 and key not in _STOPWORDS and key not in lowered and not key[0].isdigit():
                shown.setdefault(key, key)
                counts[key] += 1
    frequent = Counter({shown[key]: count for key, count in counts.items() if count >= 2})
    return distinctive(frequent, elsewhere, limit=5)


def _events(talk: Sequence[Message], speakers: list[str], room: int) -> list[str]:
    """The most informative sentences within ``room`` characters, in time order, dates resolved.

    A sentence is worth its proper nouns, numbers, dates and content words per
    character; questions and small talk are worth little. The chosen sentences of one
    message share one line, ``Speaker: ...``.
    """
    skip = {*speakers, "I"}
    scored: list[tuple[float, int, int, str]] = []
    for index, message in enumerate(talk):
        text = _SPEAKER_PREFIX.sub("", message.content)
        for position, sentence in enumerate(_sentences(text)):
            score = _worth(sentence, skip)
            if score > 0:
                dated = _resolve_dates(sentence, message.created_at)
                scored.append((score / (len(dated) + 30), index, position, dated))
    chosen: dict[int, list[tuple[int, str]]] = {}
    used = 0
    for _, index, position, sentence in sorted(scored, key=lambda item: (-item[0], item[1], item[2])):
        cost = len(sentence) + 1 + (0 if index in chosen else len(_speaker(talk[index])) + 4)
        if used + cost > room:
            continue
        used += cost
        chosen.setdefault(index, []).append((position, sentence))
    return [
        f"{_speaker(talk[index])}: " + " ".join(sentence for _, sentence in sorted(chosen[index]))
        for index in sorted(chosen)
    ]


def _worth(sentence: str, skip: Iterable[str]) -> float:
    words = _WORD_RE.findall(sentence)
    content = [w for w in words if len(w) >= 4 and w.lower() not in _STOPWORDS]
    if len(content) < 2:
        return 0.0
    names = {*skip}
    proper = sum(1 for w in words[1:] if w[0].isupper() and w not in names and w.lower() not in _STOPWORDS)
    numbers = sum(1 for w in words if w[0].isdigit())
    dated = 3 if _RELATIVE.search(sentence) or any(m in words for m in _MONTHS) else 0
    score = 2.0 * proper + 2.0 * numbers + dated + len(content)
    return score * (0.4 if sentence.rstrip().endswith("?") else 1.0)


def _day(moment: datetime) -> str:
    return f"{moment.day} {_MONTHS[moment.month - 1]} {moment.year}"


def _month(year: int, month: int) -> str:
    while month < 1:
        year, month = year - 1, month + 12
    while month > 12:
        year, month = year + 1, month - 12
    return f"{_MONTHS[month - 1]} {year}"


def _resolve_dates(sentence: str, said_at: datetime) -> str:
    """``yesterday`` → ``yesterday (7 May 2023)``: relative dates made absolute from when they were said."""

    def absolute(match: re.Match[str]) -> str:
        phrase = match.group(0)
        lowered = phrase.lower()
        if lowered in ("yesterday", "last night"):
            when = _day(said_at - timedelta(days=1))
        elif lowered in ("today", "tonight", "this morning"):
            when = _day(said_at)
        elif lowered in ("last week", "last weekend"):
            when = f"the {lowered.split()[1]} before {_day(said_at)}"
        elif lowered.startswith("last ") and lowered[5:].capitalize() in _WEEKDAYS:
            when = f"the {lowered[5:].capitalize()} before {_day(said_at)}"
        elif lowered == "last month":
            when = _month(said_at.year, said_at.month - 1)
        elif lowered == "this month":
            when = _month(said_at.year, said_at.month)
        elif lowered == "next month":
            when = _month(said_at.year, said_at.month + 1)
        elif lowered in ("last year", "this year", "next year"):
            when = str(said_at.year + {"last": -1, "this": 0, "next": 1}[lowered.split()[0]])
        elif lowered in ("this week", "next week"):
            when = f"the week {'of' if lowered.startswith('this') else 'after'} {_day(said_at)}"
        else:
            amount = match.group(2).lower()
            count = int(amount) if amount.isdigit() else _NUMBER_WORDS.get(amount, 1)
            unit = match.group(3).lower()
            if unit == "year":
                when = str(said_at.year - count)
            elif unit == "month":
                when = _month(said_at.year, said_at.month - count)
            else:
                when = _day(said_at - timedelta(days=count * (7 if unit == "week" else 1)))
        return f"{phrase} ({when})"

    return _RELATIVE.sub(absolute, sentence)
