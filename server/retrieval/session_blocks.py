"""One earlier session as the start-of-session memory shows it: whole items, ranked, rendered in a fixed order.

A session's block is a heading (when, branch, size, the id to expand) and these parts,
in this order: what the user asked (each request with what was done for it), what the
session did (files, state changes, checks), how it ended (the end state in words, then
its last conclusion), what is still open, and its facts worth keeping. The memory has one
budget for several sessions, so a block is built from **items** that are taken whole or
left out, each with a rank saying which to keep first:

1. the heading, the ending and the "Still open" label are the block itself: a session
   shown always says how it ended and whether anything is open;
2. then the open items, the first and the last requests (in few words), what it did;
3. then the latest requests (in few words) and its best facts (`fact_score`, the first
   `FACTS_FIRST`), the older requests, newest first, its other facts, and each request in
   full with what was done for it.

The ending comes in two lengths: the brief one is the block's own, the full one replaces
it when there is room. Rendering puts the chosen items back in the order above, so the
same items always give the same bytes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from palimpsest.graph_schema.models import Fact
from palimpsest.scheduler.reply_text import clip_naming
from palimpsest.scheduler.session_facts import clip
from palimpsest.scheduler.shell_commands import category
from palimpsest.server.retrieval.standing import Standing

#: Words that say, in the ending line, how a session ended.
ENDING_WORDS = {
    "completed": "completed",
    "answered": "answered",
    "failed": "failed",
    "interrupted": "interrupted by the user",
    "tool_rejected": "a tool call rejected by the user",
    "stopped_mid_work": "stopped mid-work",
}
#: The latest requests, kept before the older ones and most facts.
RECENT_ASKS = 5
#: A request in few words (what it asked, without what was done for it).
ASK_SHORT = 80
#: How a request opens without saying what it asks: assent, a courtesy, "can you", "let's". The short form drops it, so
#: its 80 characters reach the words that name the work ("ok, can you check the numbers ..." → "check the numbers ...").
_LEAD_IN = re.compile(
    r"^(?:(?:ok(?:ay)?|yes|yeah|yep|sure|great|cool|perfect|nice|thanks|thank you|alright|all right|hi|hey|hmm|"
    r"well|so|now|and|also|then)\b[,.!:;]*\s+|(?:can|could|would|will) you (?:please |also |now )?|please,?\s+|"
    r"let'?s\s+)+",
    re.IGNORECASE,
)


def _without_lead_in(text: str) -> str:
    """A request without the words that open it and ask nothing; the whole request when little would be left."""
    rest = _LEAD_IN.sub("", text, count=1)
    return rest if len(rest.split()) >= 3 else text


#: Open items named per session, at most (the rest counted).
OPEN_SHOWN = 6
#: Facts a block keeps, best first, before its older requests; the rest rank ``LATER_FACTS`` lower, most after them.
#: A long session (dozens of requests) otherwise spends its room on facts and names few of its requests: chosen on
#: the tuning halves of the long-session evaluation sets (3 and 5 alike, 8 weaker), checked on their other halves.
FACTS_FIRST = 5
LATER_FACTS = 1.0
#: Longest fact line, in characters.
FACT_CHARS = 260
#: How much a fact of each kind is worth keeping, before what it names.
KIND_SCORES = {
    "decision": 6.0,
    "lesson": 5.5,
    "limitation": 4.5,
    "configuration": 4.0,
    "dependency": 4.0,
    "change": 4.0,
    "recommendation": 3.0,
    "technology": 2.5,
    "point": 2.5,
    "command": 2.0,
}
#: Subjects of facts a block already shows in its "Did" line (files, commits, branches...).
_SHOWN_ELSEWHERE = ("file:", "commit:", "branch:", "git:", "gh:")
_TO_THE_USER = re.compile(
    r"^(?:if you|you(?:'ll| will| can| get| may| might)?)\b|\b(?:should|would|might|could) (?:show|be|work)\b", re.I
)
#: A command's outcome with nothing more to it: "`entire auth contexts` passed (ok)".
_BARE_PASS = re.compile(r"` passed \((?:ok|exit 0)\)$")
_BARE_PASS_OF = re.compile(r"^`([^`]+)` passed \((?:ok|exit 0)\)$")
#: A pass that adds only its runner's count: "`pytest -q` passed (ok): 12 passed".
_COUNTED_PASS = re.compile(r"` passed \((?:ok|exit 0)\): \d+ passed(?:, 0 failed)?$")
#: A package an install command added (`structural_facts`): its name, then the command.
_ADDED = re.compile(r"\AAdded dependency (\S+) \((.+)\)\Z")
_NAMED = re.compile(r"`[^`]+`|\b[A-Za-z_]\w*[A-Z]\w*\b|\b\w+_\w+\b|\b[\w.-]+/[\w./-]+|\b\w+\.\w{1,4}\b")


@dataclass(frozen=True)
class Item:
    """One whole line of a block: where it goes (part, then position), how early it is kept, whether a label.

    Rank 0 is the block's base (shown whenever the session is); a label (``- Asked:``) is
    shown only above an item of its part, and paid for with the first one.
    """

    part: int
    position: int
    rank: float
    text: str
    label: bool = False
    #: A richer text for the item at the same place, taken in its stead when there is room.
    upgrade: bool = False


def fact_score(fact: Fact) -> float:
    """How much a fact is worth a token: its kind, then what exact things it names (code, paths, numbers).

    A sentence addressed to the user ("If you commit ...", "You get ...") or guessing
    ("it should show") says less about the code than one stating what is.
    """
    score = KIND_SCORES.get(fact.kind, 1.0)
    if fact.kind == "command" and " after failing with: " in fact.text:
        score += 3.0  # an error and what fixed it
    elif fact.kind == "command" and _BARE_PASS.search(fact.text) and _ran_other(fact):
        score -= 2.0  # a tool of its own ran and exited 0: that says little of the code
    elif fact.kind == "command" and _COUNTED_PASS.search(fact.text):
        score -= 1.0  # a check passed, and how many tests: the "Did" line names the pass, a finding says more
    score += min(1.5, 0.5 * len(_NAMED.findall(fact.text)))
    if re.search(r"\d", fact.text):
        score += 0.5
    if _TO_THE_USER.search(fact.text):
        score -= 2.0
    if len(fact.text) > 220:
        score -= 1.5
    return score


def _ran_other(fact: Fact) -> bool:
    """Whether a command fact is of a command that neither checks the project nor changes state (`category`)."""
    return category((fact.subject or "").removeprefix("command:")) == "other"


def shown_fact(fact: Fact) -> bool:
    """Whether a fact belongs in the memory: never a read-only command, nor what the "Did" line already names."""
    subject = fact.subject or ""
    if subject.startswith(_SHOWN_ELSEWHERE):
        return False
    if subject.startswith("command:"):
        return category(subject.removeprefix("command:")) not in ("read",)
    return True


def _passed_in(fact: Fact, did: str) -> bool:
    """Whether a fact only says a check passed ("`npm run lint` passed (ok)") and the "Did" line says so already."""
    bare = _BARE_PASS_OF.match(fact.text)
    return bare is not None and re.search(re.escape(f"`{bare.group(1)[:50]}") + r"[^`]*` passed", did) is not None


def _key(text: str) -> str:
    return " ".join(re.sub(r"[^\w]+", " ", text.lower()).split())


def block_items(standing: Standing, facts: Sequence[Fact], *, pointer: str) -> tuple[list[Item], Item, Item]:
    """The items of one session's block, and its two ending lines (brief, full).

    The brief ending is part of the block's base; the full one replaces it when the
    budget has room (the caller swaps them). ``pointer`` is the heading line.
    """
    items = [Item(0, 0, 0.0, pointer)]
    ending = standing.ending
    kind = ENDING_WORDS[ending.kind] if ending is not None else "no reply yet"
    brief = Item(3, 0, 0.0, _ending_line(kind, ending.brief if ending else ""))
    full = Item(3, 0, 0.0, _ending_line(kind, ending.conclusion if ending else ""))
    asks = standing.asks
    if asks:
        items.append(Item(1, 0, 1.0, f"- Asked ({len(asks)}):\n" if len(asks) > 1 else "- Asked:\n", label=True))
    for index, ask in enumerate(asks):
        last = index == len(asks) - 1
        recent = len(asks) - index <= RECENT_ASKS
        rank = 1.0 if index == 0 or last else (2.5 if recent else 3.4) + (len(asks) - index) / 1000
        short = f"  {index + 1}. {clip_naming(_without_lead_in(ask.text), ASK_SHORT)}\n"
        items.append(Item(1, index + 1, rank, short))
        outcome = f" → {ask.outcome}" if ask.outcome and not last else ""  # the ending says what the last one led to
        rich = f"  {index + 1}. {ask.text}{outcome}\n"
        if rich != short:
            items.append(Item(1, index + 1, 2.5 if last else 5.0 + (len(asks) - index) / 1000, rich, upgrade=True))
    if standing.did:
        items.append(Item(2, 0, 2.0, f"- Did: {'; '.join(standing.did)}\n"))
    opens = standing.open_steps
    if opens:
        items.append(Item(4, 0, 0.0, "- Still open:\n", label=True))
        for index, step in enumerate(opens[:OPEN_SHOWN]):
            items.append(Item(4, index + 1, 0.0 if index == 0 else 1.0 + index / 100, f"  - {clip(step, 200)}\n"))
        if len(opens) > OPEN_SHOWN:
            items.append(Item(4, OPEN_SHOWN + 1, 1.5, f"  - and {len(opens) - OPEN_SHOWN} more\n"))
    else:
        items.append(Item(4, 0, 0.0, "- Still open: nothing\n"))
    seen = _key(" ".join([ending.conclusion if ending else "", *(ask.text for ask in asks)]))
    asked = [_key(ask.text) for ask in asks if len(ask.text) > 15]
    did = "; ".join(standing.did)
    kept = [
        fact
        for fact in facts
        if shown_fact(fact)
        and _key(fact.text) not in seen
        and not any(key in _key(fact.text) for key in asked)
        and not _passed_in(fact, did)
    ]
    if kept:
        items.append(Item(5, 0, 2.5, "- Facts:\n", label=True))
    worth = {fact.id: fact_score(fact) for fact in kept}
    best = set(sorted(worth, key=worth.__getitem__, reverse=True)[:FACTS_FIRST])
    for fact, text in joined_dependencies(kept):
        position = 1 + facts.index(fact)
        rank = 1.5 + (10.0 - worth[fact.id]) / 2 + (0.0 if fact.id in best else LATER_FACTS)
        source = fact.source_message_ids[0] if fact.source_message_ids else fact.id
        items.append(Item(5, position, rank, f"  - {clip(text, FACT_CHARS)} ({source})\n"))
    return items, brief, full


def joined_dependencies(facts: Sequence[Fact]) -> list[tuple[Fact, str]]:
    """Each fact with its line, the packages one install added on one line: one fact line each would spend the budget.

    "Added dependency streamlit (pip install)", "Added dependency pandas (pip install)"
    from one message become "Added dependencies streamlit, pandas (pip install)".
    """
    lines: list[tuple[Fact, str]] = []
    names: list[str] = []  # the packages of the last line, while it is an install's
    for fact in facts:
        added = _ADDED.match(fact.text) if fact.kind == "dependency" else None
        if added is not None and names:
            first = lines[-1][0]
            if (
                first.text.endswith(f"({added.group(2)})")
                and first.source_message_ids[:1] == fact.source_message_ids[:1]
            ):
                names.append(added.group(1))
                lines[-1] = (first, f"Added dependencies {', '.join(names)} ({added.group(2)})")
                continue
        names = [added.group(1)] if added is not None else []
        lines.append((fact, fact.text))
    return lines


def _ending_line(kind: str, said: str) -> str:
    if not said or said.lower().startswith(kind.split()[0]):
        return f"- Ended: {said or kind}\n"
    return f"- Ended: {kind}. {said}\n"


def render(chosen: Sequence[Item]) -> str:
    """The chosen items of one block in their fixed order, each label only above an item of its part."""
    ordered = sorted(chosen, key=lambda item: (item.part, item.position))
    filled = {item.part for item in ordered if not item.label}
    return "".join(item.text for item in ordered if not item.label or item.part in filled)
