"""What an assistant's reply says, read from its markdown: conclusions, offers, options, next steps.

Replies are markdown written for a person: a preface ("Let me check the tests."), headings,
bullets, tables, fenced code, a closing offer ("Want me to commit this?"). A memory that
quotes a reply must keep what it concluded and drop the rest, and must never cut inside a
heading or a table. The rules:

- A reply is read as `Unit` s: headings, bullets (with their checkbox, if any), paragraphs,
  table rows and code fences. A fence whose language is none, ``md``, ``markdown`` or
  ``text`` and whose lines read as prose (a PR description, a commit message) is read as
  its lines; any other fence, and every table, is left out of a conclusion.
- A heading is never an item of its own: it only says what the items under it are.
- A **preface** is a sentence that announces work instead of reporting it ("Let me ...",
  "I'll ...", "Now dispatching ...", "Verifying git status."); a **chat opener** is a
  short exclamation ("Perfect!", "Done!"). Neither is a conclusion.
- A conclusion is made of whole sentences and whole bullets, in order, up to a length,
  cut only at a sentence or bullet boundary; a line ending in a colon stays only when the
  bullets it introduces follow it.
- The closing question of a reply (its last sentence, ending in ``?``) is an offer when it
  proposes work ("Want me to commit this?", "Ready to implement?").
- Numbered options ("1. **Subagent-Driven** - ...", "**Option 2: ...**") are what a bare
  answer such as "1" or "3, but enabled by default" chose.
- Next steps are the items under a heading or label that names them ("Next steps",
  "Remaining", "TODO", "Follow-ups"), unchecked checkboxes (``- [ ] Verify ...``),
  sentences telling the user what they still have to do ("You'll need to ...", "You may
  want to delete that one manually", "Before retrying, shut down X"), and sentences saying
  what is still left ("The branch still needs to be merged", "CI is queued here: URL",
  "My next pass would be ...": how replies written as prose leave work open), a problem it names as
  still there ("but it's still unfixed", "The import refs still exist on the mirror") and work it
  passed by ("I skipped the onboarding prompts", "No PR created").
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from palimpsest.scheduler.session_facts import clip

_FENCE = re.compile(r"^\s*(```+|~~~+)\s*([\w+-]*)")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^(\s*)(?:[-*+•]|\d{1,3}[.)])\s+(?:\[([ xX])\]\s+)?(.*)$")
_TABLE = re.compile(r"^\s*\|.*\|\s*$")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?\s*$")
_SETEXT = re.compile(r"^\s*(?:=+|-+)\s*$")
_RULE = re.compile(r"^\s*(?:\*\s*){3,}$|^\s*(?:-\s*){3,}$|^\s*(?:_\s*){3,}$")
_EMPHASIS = re.compile(r"\*\*|__|(?<![\w*])\*(?=\S)|(?<=\S)\*(?![\w*])")
_LINK = re.compile(r"\[([^\]]+)\]\([^)\s]+\)")
#: How a question ends, in Latin and in CJK script ("需要我接着帮你实现这些吗？").
QUESTION_MARKS = ("?", "？")
#: A sentence's end: ``. ! ?`` and a space before a capital (Latin, Greek or Cyrillic: "İstersen", "Если"), quote or
#: code span; or a full-width ``。！？``, which Chinese and Japanese replies write with no space after.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"'(\[*À-ÖØ-ÞĀ-žΑ-ΩЀ-Я])|(?<=[。！？])\s*(?=\S)")
#: A line that is a heading in all but markup: bold alone, or an emoji then a few words.
_BOLD_LINE = re.compile(r"^\s*\*\*[^*]{1,80}\*\*:?\s*$")
_PROSE_FENCES = frozenset({"", "md", "markdown", "text", "txt"})
_CODE_LINE = re.compile(
    r"[;{}]\s*$|^\s*(?:def |class |import |from \S+ import|func |return |if \(|for \(|const |let |var )"
)
#: Sentences announcing work rather than reporting it.
_PREFACE = re.compile(
    r"^(?:(?:now|next|first|then|finally|so|ok(?:ay)?|great|perfect|alright)[,!.]?\s+)*"
    r"(?:let me|let's|let us|i'll|i will|i'm going to|i am going to|i need to|i should|i'm now|i am now|"
    r"we'll|we will|we need to|time to|going to|i'm (?:now |still |also |just )?[a-z]+ing\b|"
    r"(?:now\s+)?(?:verifying|checking|running|looking|reading|searching|dispatching|launching|starting|"
    r"trying|creating|updating|adding|fixing|moving|writing|exploring|investigating|examining|testing)\b)",
    re.IGNORECASE,
)
#: The same announcements in the other languages users write to agents in: Spanish "Voy a copiar ...",
#: Russian "Сначала скопирую ..." (first, then a verb's first person), Chinese "让我..." / "我先...", Japanese
#: "...確認します。", Korean "...하겠습니다.".
_PREFACE_ABROAD = re.compile(
    r"^(?:(?:ahora|primero|bien|vale)[,]?\s+)?(?:voy a|vamos a|d[ée]jame)\b"
    r"|^(?:je vais|laisse[- ]moi|ich werde|lass (?:mich|uns)|vou|deixe[- ]me)\b"
    r"|^давай(?:те)?\b|^(?:сначала|сейчас|теперь|затем|далее)\s+(?:\w+\s+){0,2}?\w+[юу]\b"
    r"|^(?:让我|我来|我先|接下来我|现在我来|下面我)"
    # Japanese and Korean say it at the end: "...再実行します。" (will run again), "...확인하겠습니다." (will check).
    r"|(?:します|してみます|していきます|しましょう|しておきます|겠습니다)[。.!！]?$",
    re.IGNORECASE,
)
_WILL = re.compile(
    r"\b(?:I'll|I will|let me|I'm going to|I am going to|(?:I'm|I am|and am) (?:now )?(?:preparing|about) to)\b",
    re.IGNORECASE,
)
#: A short "Now X." that names the next step, not what happened.
_NOW_NEXT = re.compile(r"^now,?\s+[^.!?]{1,40}[.!]?$", re.IGNORECASE)
_OPENER = re.compile(
    r"^(?:perfect|great|excellent|awesome|(?:all )?done|got it|good (?:catch|question|point|idea)|sure|certainly|"
    r"absolutely|nice|alright|ok(?:ay)?|understood|you'?re right|thanks?(?: you)?|all set|success)[!.]*$",
    re.IGNORECASE,
)
#: A sentence that only points at what follows it; one ending in a colon introduces its bullets instead.
_POINTER = re.compile(r"^here(?:'s| is| are)\b[^`.!?:]{0,40}[.!]$", re.IGNORECASE)
_ASSENT = re.compile(
    r"^(?:yes|exactly|good|great|that'?s|that is|this is|makes sense|ah|right|correct|i see|i now|nice|"
    r"interesting|indeed|agreed|excellent|perfect|awesome|understood|got it|okay|ok)\b.*[.!]$",
    re.IGNORECASE,
)
#: A closing question that proposes more work.
_OFFER = re.compile(
    r"\b(?:want me to|would you like me to|shall i|should i|do you want me to|ready to|like me to|may i|"
    r"(?:would you like|do you want|want) to (?:start|proceed|continue|go ahead|commit|create|implement|run|merge|"
    r"push|apply|open|execute)|can i go ahead|proceed with)\b"
    # Chinese: "需要我接着帮你实现这些吗？" (shall I go on and implement these?), "要不要我...", "是否需要我...".
    r"|(?:需要|要不要|是否需要)我|^要我",
    re.IGNORECASE,
)
_NEXT_LABEL = re.compile(
    r"\b(?:next steps?|next up|up next|what'?s next|remaining(?: work| items| tasks)?|to ?do|todos?|follow[- ]ups?|"
    r"still (?:to do|open|needed)|open (?:items|questions)|left to do|pending|not yet done|action items)\b",
    re.IGNORECASE,
)
#: A heading over what the work leaves undone, said as gaps rather than steps: each paragraph under it opens on one.
_GAP_LABEL = re.compile(
    r"\b(?:missing features?|known (?:issues|limitations|gaps|bugs)|not (?:yet )?(?:fixed|implemented|addressed)|"
    r"what'?s missing|open issues|chose not to fix)\b",
    re.IGNORECASE,
)
_NEXT_SENTENCE = re.compile(
    r"^(?:next steps?|next up|up next|todo|to do|remaining|follow[- ]ups?|still to do|left to do)\s*:\s*(\S.+)$",
    re.IGNORECASE,
)
_USER_ACTION = re.compile(
    r"\b(?:you(?:'ll| will)? need to|you(?: may| might)? want to|you should|you must|make sure (?:to|you)|"
    r"remember to|don'?t forget to|before (?:retrying|running|you|trying)|be sure to|"
    r"(?:by hand|manually)\b)"
    # "You can backfill the [0.4.2] section later, or remove the placeholder before committing."
    r"|\byou (?:can|could)\b.*\b(?:later|before (?:committing|merging|pushing|releasing|publishing|deploying))\b",
    re.IGNORECASE,
)
#: An offer whose object only points back ("Want me to make that change?"): what it means is said before it.
_POINTING_OFFER = re.compile(
    r"^(?:go ahead and |go ahead with |(?:make|do|apply|implement|try|add|write|use|go with|proceed with)\s+)"
    r"(?:that|this|it|these|those|them|the (?:change|fix|refactor|cleanup)s?)"
    r"(?:\s+(?:change|fix|refactor|update|edit|approach|cleanup|suggestion|version)s?)?(?:\s+(?:now|too|as well))?$",
    re.IGNORECASE,
)
#: The same in Chinese: an offer ending on "these", "this", "it" ("接着帮你实现这些": go on and implement these).
_POINTING_OFFER_CJK = re.compile(r"(?:这些|这个|它们|它|这部分|这样做|这一步)$")
#: Longest request named beside an offer that only points back.
ASKED_CHARS = 70
#: A sentence that proposes a change ("we could at least remove the map", "I'd suggest inlining it").
_PROPOSAL = re.compile(
    r"\b(?:we|I|you) could\b|\bI'?d (?:suggest|recommend|propose)\b|\b(?:one|a simpler|a cleaner|the simplest|"
    r"the cleanest|a better) (?:option|fix|approach|way)\b|\blet'?s\b",
    re.IGNORECASE,
)
#: An offer made as a statement, not a question: "Say the word if you want it run anyway.", "Let me know if
#: you'd like me to add a profile field.", "If you want, I can write an update script.", "Happy to add it too."
_STATED_OFFER = re.compile(
    r"(?:^|[—–;]\s*|\s-\s)(?:say the word|let me know|tell me|just say|ping me)\b.*"
    r"\b(?:if|when) you(?:'d| would| are)? (?:like|want|prefer|ready)\b"
    r"|^if you(?:'d| would)? (?:like|want|prefer)(?: it| that| to| me to)?[^.!?]{0,60}?,"
    r"\s*I(?:'d| can| could| will|'ll)\b"
    r"|^I (?:can|could) (?:also )?\w+[^.!?]*\bif you(?:'d| would)? (?:like|want|prefer)\b"
    r"|^(?:happy|glad) to\b[^.!?]*\b(?:if you|too|as well|next)\b"
    # Chinese: "如果你需要，我可以继续实现 loss.py" (if you want, I can go on and ...), "如需下一步，我可以：..." (if a
    # next step is wanted, I can: ...).
    r"|^(?:如果(?:你|您)(?:需要|愿意|想|要)|如需|如有需要|需要的话)[^。！？]{0,30}[，,]\s*我(?:可以|来|再|就)"
    # "If you want, I can ..." in the other languages users write to agents in: Portuguese, Spanish, French, German,
    # Russian, Turkish ("İstersen ... yazabilirim"), Japanese, Korean.
    r"|^se (?:quiser|preferir|desejar)\b[^.!?]{0,60}?,\s*(?:eu )?posso\b"
    r"|^si (?:quieres|prefieres|deseas|lo deseas)\b[^.!?]{0,60}?,\s*(?:yo )?puedo\b"
    r"|^si (?:vous (?:voulez|le souhaitez|souhaitez)|tu veux)\b[^.!?]{0,60}?,\s*je (?:peux|pourrais)\b"
    r"|^wenn (?:du|sie) (?:willst|möchtest|wollen|möchten)\b[^.!?]{0,60}?,\s*kann ich\b"
    r"|^если (?:хотите|хочешь|нужно)[^.!?]{0,60}?,\s*(?:я )?(?:могу|сделаю)"
    r"|^[İi]stersen(?:iz)?\b.*\w(?:abilirim|ebilirim)\b"
    r"|^(?:必要であれば|よろしければ|ご希望であれば|ご希望なら)[^。！？]{0,60}(?:できます|します|しましょう)"
    r"|^(?:원하시면|필요하시면)[^.!?]{0,60}(?:수 있습니다|드릴게요|드리겠습니다)",
    re.IGNORECASE,
)
#: A closing question that only checks in with the user.
_COURTESY = re.compile(
    r"\b(?:anything else|any(?: other| more)? questions|"
    r"(?:does|did) (?:that|this) (?:help|make sense|work for you|answer)|make sense\?|"
    r"sound good|is there anything|what else|help with anything|clear\?|happy with)\b",
    re.IGNORECASE,
)
#: Work a reply says it left for later ("Deferred", "out of scope for this PR", "not addressed yet"); not
#: "deferred" naming what a list holds ("the 6 deferred items", ``deferred-work.md``).
_DEFERRED = re.compile(
    r"\b(?:deferred(?![-_\w]|\s+(?:items?|work|tasks?|issues?|findings?|ones|list|section)\b)|postponed|"
    r"out of scope|left for (?:later|a follow[- ]up)|skipped for now|not (?:yet )?addressed|"
    r"(?:in|for) a (?:later|future|follow[- ]up|separate) (?:pr|change|session|commit)|left as is for now)\b",
    re.IGNORECASE,
)
#: A review's finding, tagged by priority as Codex's reviews tag them ("P2 — tests/x.py:110: ...", "[P1] ..."):
#: the review only reports it, so it is left to fix.
_FINDING = re.compile(r"^(?:\[P[0-3]\]\s|P[0-3]\s*[—–:-]\s)")
#: A sentence saying what is still left of the work ("The branch still needs to be merged", "The npm dist-tags
#: are still stale until the recovery workflow runs", "CI is queued here: URL", "My next pass would be ...",
#: "The plan leaves five open questions (...) to resolve before ...").
_REMAINING = re.compile(
    r"\bstill (?:needs?|requires?|has to|have to|must|waits? (?:on|for))\b"
    r"|\b(?:(?:is|are) still|remains?|stays?) "
    r"(?:stale|unmerged|unpublished|unreleased|undeployed|unreviewed|outstanding|pending|queued|blocked)\b"
    r"|\b(?:remains?|left) to be "
    r"(?:done|merged|pushed|published|deployed|released|reviewed|run|tested|verified|fixed)\b"
    r"|\bnot (?:been )?(?:merged|pushed|published|deployed|released|reviewed) yet\b"
    r"|\bnot yet (?:been )?(?:merged|pushed|published|deployed|released|reviewed)\b"
    r"|\b(?:CI|(?:the|a) (?:new )?(?:run|build|workflow|pipeline|job|deploy(?:ment)?))\b[^.!?]{0,30}?"
    r"\b(?:is|are) (?:still |now )?(?:queued|in progress|pending|running)\b"
    r"|^(?:my|the|our) next (?:step|pass|move|iteration|change)s? (?:would|will|should|could) be\b"
    r"|\b(?:leaves?|left|has|have) (?:\w+ ){0,2}open questions?\b"
    # A problem the reply names as still there ("but it's still unfixed", "The 18 import refs still exist on the
    # mirror", "may still have uncommitted edits"), work it passed by ("I skipped those since you weren't around",
    # "No PR created, since you asked for commit and push only").
    r"|\bstill (?:(?:has|have|holds?) )?(?:unfixed|broken|failing|exists?|missing|present|untracked|uncommitted|"
    r"unpushed|unresolved)\b|\bunfixed\b|\b(?:is|are|was|were) not (?:yet )?(?:fixed|resolved)\b"
    r"|\b(?:I|we) skipped\b|\bno (?:pr|pull request) (?:was )?(?:created|opened)\b"
    # Chinese: "下一步最自然的是把它合并" (the next step is ...), "接下来需要 ..." (what comes next needs ...).
    r"|^(?:下一步|接下来|后续)",
    re.IGNORECASE,
)
#: The line an agent signs a commit or PR text with ("🤖 Generated with [Claude Code](...)").
_SIGNATURE = re.compile(r"Generated with (?:\[|Claude Code|Codex|Gemini)|^Co-Authored-By:", re.IGNORECASE)
_OPTION = re.compile(
    r"^\s*(?:#{1,6}\s*)?(?:\*\*)?\s*(?:option\s+)?(\d{1,2})\s*[.):]\s*(?:\*\*)?\s*(.+)$", re.IGNORECASE
)


@dataclass(frozen=True)
class Unit:
    """One block of a reply: ``heading``, ``bullet``, ``para`` or ``table`` (a row), with its text."""

    kind: str
    text: str
    depth: int = 0
    #: A bullet's checkbox: ``" "`` unchecked, ``"x"`` checked, None without one.
    box: str | None = None


#: Typographic apostrophes as plain ones: Codex writes "I’ll" and "you’ll need to", and the rules read "I'll".
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'"})


def straight_quotes(text: str) -> str:
    """``text`` with typographic apostrophes made plain, so one pattern of "I'll" reads every agent's."""
    return text.translate(_APOSTROPHES)


def plain(text: str) -> str:
    """Inline markdown flattened: emphasis markers gone (never inside a code span), spacing collapsed.

    Typographic apostrophes become plain ones (`straight_quotes`).
    """
    parts = re.split(r"(`[^`]*`)", straight_quotes(text))
    flat = (part if part.startswith("`") else _EMPHASIS.sub("", _LINK.sub(r"\1", part)) for part in parts)
    return " ".join("".join(flat).split())


def _prose_fence(lines: list[str]) -> bool:
    """Whether a fence's lines read as prose (a PR text, a commit message) rather than code."""
    filled = [line for line in lines if line.strip()]
    if not filled:
        return False
    code = sum(1 for line in filled if _CODE_LINE.search(line))
    return code * 4 < len(filled)


#: What an agent appends to a reply for its own tooling, not words to the user: Codex's memory citation block
#: (``<oai-mem-citation><citation_entries>MEMORY.md:1-2|note=[...]</citation_entries>...``), its reply's last content.
_TOOL_MARKUP = re.compile(r"<oai-mem-citation>.*?(?:</oai-mem-citation>|\Z)", re.DOTALL)
#: The tags around the plan Codex proposes in plan mode, each on a line of its own: the plan inside is the reply.
_PLAN_TAG = re.compile(r"^[ \t]*</?proposed_plan>[ \t]*$", re.MULTILINE)


def readable(text: str) -> str:
    """A reply without the markup its agent adds for itself (`_TOOL_MARKUP`, `_PLAN_TAG`); the message keeps it."""
    if "<oai-mem-citation>" in text:  # units() reads every reply several times: most hold neither, and skip both
        text = _TOOL_MARKUP.sub("", text)
    return _PLAN_TAG.sub("", text) if "proposed_plan>" in text else text


def units(text: str) -> list[Unit]:
    """The blocks of a markdown text, in order (see the module docstring for fences and tables)."""
    found: list[Unit] = []
    lines = readable(text).splitlines()
    index = 0
    paragraph: list[str] = []

    def flush() -> None:
        if paragraph:
            found.append(Unit("para", plain(" ".join(paragraph))))
            paragraph.clear()

    while index < len(lines):
        raw = lines[index]
        fence = _FENCE.match(raw)
        if fence is not None:
            flush()
            closing = next(
                (j for j in range(index + 1, len(lines)) if lines[j].strip().startswith(fence.group(1))), len(lines)
            )
            body = lines[index + 1 : closing]
            if fence.group(2).lower() in _PROSE_FENCES and _prose_fence(body):
                found.extend(units("\n".join(body)))
            else:
                filled = [line.strip() for line in body if line.strip()]
                found.append(Unit("code", filled[0] if len(filled) == 1 else ""))
            index = closing + 1
            continue
        stripped = raw.strip()
        index += 1
        if not stripped or _RULE.match(stripped):
            flush()
            continue
        if _SETEXT.match(stripped) and paragraph:
            found.append(Unit("heading", plain(" ".join(paragraph))))
            paragraph.clear()
            continue
        heading = _HEADING.match(raw)
        if heading is not None or _BOLD_LINE.match(stripped):
            flush()
            found.append(Unit("heading", plain(heading.group(1) if heading else stripped).rstrip(":")))
            continue
        if _TABLE.match(raw):
            flush()
            if not _TABLE_RULE.match(stripped):
                found.append(Unit("table", stripped))
            continue
        bullet = _BULLET.match(raw)
        if bullet is None and stripped.startswith(("**", "__")):  # **1. Option** - ...
            bullet = _BULLET.match(plain(raw))
        if bullet is not None:
            flush()
            depth = len(bullet.group(1).replace("\t", "    ")) // 2
            box = bullet.group(2).lower() if bullet.group(2) else None
            found.append(Unit("bullet", plain(bullet.group(3)), depth, box))
            continue
        if found and found[-1].kind == "bullet" and raw[:1].isspace() and not paragraph:
            last = found.pop()
            found.append(Unit("bullet", f"{last.text} {plain(stripped)}", last.depth, last.box))
            continue
        paragraph.append(stripped)
    flush()
    return found


def prose_sentences(parts: Sequence[Unit]) -> list[str]:
    """The sentences of the paragraphs and bullets among ``parts`` (`units`), in order: a reply's prose."""
    return [sentence for unit in parts if unit.kind in ("para", "bullet") for sentence in sentences(unit.text)]


def sentences(text: str) -> list[str]:
    """A line split into sentences (at ``. ! ?`` followed by a capital, a quote or a code span).

    A number alone before its period ("2. Parallel") is a list marker, not a sentence.
    """
    found: list[str] = []
    for part in _SENTENCE_END.split(text):
        part = part.strip()
        if not part:
            continue
        if found and re.fullmatch(r"\d{1,3}[.)]", found[-1]):
            found[-1] = f"{found[-1]} {part}"
        else:
            found.append(part)
    return found


def is_preface(sentence: str) -> bool:
    """Whether a sentence announces work ("Let me check ...", "Now dispatching ...") rather than reporting it.

    A sentence that says what the writer will do ("..., I'll `git add docs/color.md`.") is a preface
    wherever the announcement stands in it.
    """
    flat = sentence.strip().lstrip("*_ ")
    announced = bool(
        _PREFACE.match(flat) or _NOW_NEXT.match(flat) or _WILL.search(flat) or _PREFACE_ABROAD.search(flat)
    )
    return announced and not flat.endswith(QUESTION_MARKS)


def is_opener(sentence: str) -> bool:
    """Whether a sentence is only chat: an exclamation ("Perfect!", "Done."), a short assent ("That makes sense.")
    or a pointer to what follows ("Here's the full picture.").
    """
    flat = sentence.strip().strip("*_ ")
    if _OPENER.match(flat) is not None or _POINTER.match(flat) is not None:
        return True
    return len(flat.split()) <= 6 and "`" not in flat and _ASSENT.match(flat) is not None


def _kept(sentence: str) -> bool:
    if _SIGNATURE.search(sentence):
        return False
    return not (is_preface(sentence) or is_opener(sentence) or sentence.endswith(QUESTION_MARKS))


def _pieces(text: str) -> Iterator[tuple[str, str]]:
    """The conclusion's candidate pieces, in order: ``(text, role)``, role ``sentence``, ``intro`` or ``bullet``.

    An ``intro`` is a sentence ending in a colon directly followed by bullets; any other
    sentence ending in a colon introduces nothing that is kept, and is left out. What is
    still to do is no conclusion: the items under a next-steps heading, unchecked boxes,
    and what the user is told to do (they are `next_steps`).
    """
    blocks = [unit for unit in units(text) if unit.kind != "table"]
    under = False
    for position, unit in enumerate(blocks):
        if unit.kind == "code":
            continue
        if unit.kind == "heading":
            under = _NEXT_LABEL.search(unit.text) is not None
            continue
        following = blocks[position + 1] if position + 1 < len(blocks) else None
        if unit.kind == "bullet":
            if unit.box != " " and not under and _kept(unit.text):
                yield unit.text, "bullet"
            continue
        said = [
            sentence
            for sentence in sentences(unit.text)
            if _kept(sentence)
            and not is_user_action(sentence)
            and not is_remaining(sentence)
            and labelled_step(sentence) is None
        ]
        under = bool(said) and said[-1].endswith(":") and _NEXT_LABEL.search(said[-1]) is not None
        for number, sentence in enumerate(said):
            if not sentence.endswith(":"):
                yield sentence, "sentence"
            elif number == len(said) - 1 and following is not None and following.kind == "bullet" and not under:
                yield sentence, "intro"
            elif number == len(said) - 1 and following is not None and following.kind == "code" and following.text:
                yield f"{sentence} `{clip_code(following.text)}`", "sentence"
            elif number == len(said) - 1 and following is not None and _shown_value(following):
                yield f"{sentence} {following.text}", "sentence"


#: A value set on a line of its own in bold: a code span, or one word with a digit or a URL's or path's marks
#: (``**`http://localhost:5174/`**``, ``**v2.3.1**``); a heading's words ("Summary") are none.
_VALUE_LINE = re.compile(r"^(?:`[^`\n]+`|\S*[\d/:.@]\S*)$")


def _shown_value(unit: Unit) -> bool:
    """Whether a block is the value a sentence ending in a colon points at ("The server is running at:" then
    ``**`http://localhost:5174/`**``): the markdown reads it as a bold heading, the reply as the sentence's end."""
    return unit.kind == "heading" and _VALUE_LINE.match(unit.text.strip()) is not None


#: Longest one-line code block quoted after the sentence that introduces it.
CODE_CHARS = 120


def clip_code(line: str) -> str:
    """A one-line code block as an inline span: no backticks of its own, at most `CODE_CHARS`."""
    flat = line.replace("`", "'")
    return flat if len(flat) <= CODE_CHARS else flat[: CODE_CHARS - 1].rstrip() + "…"


#: What plans a step after the one at hand, in a preface.
_LATER = re.compile(r"\b(?:then|after that|afterwards|once (?:that|it|this)|before (?:I|we))\b", re.IGNORECASE)


def announced(text: str, limit: int, *, every: bool = False) -> str:
    """What a reply said it would do after the step at hand: its prefaces that plan a later step, at most ``limit``.

    A session cut off mid-work or interrupted ends on such a reply ("`main` is behind, so
    I'm making a focused commit first, then I'll rebase and push."): the later steps are the
    work left. A preface of one step ("Let me check the schema first.") only names the call
    that was running, and says nothing more; but where no call followed (an error stopped the
    agent first), ``every`` preface is work announced and never begun.
    """
    out = ""
    for unit in units(text):
        if unit.kind not in ("para", "bullet"):
            continue
        for sentence in sentences(unit.text):
            if not is_preface(sentence) or (_LATER.search(sentence) is None and not every):
                continue  # "Let me check the schema first." names no more than the call running
            candidate = f"{out} {sentence}".strip()
            if len(candidate) > limit:
                return out or cut(sentence, limit)
            out = candidate
    return out


#: How a piece of a conclusion may already end, in Latin or full-width CJK punctuation ("。", "：").
_CLOSED = (".", "!", "?", ":", ";", "。", "！", "？", "：", "；")


def conclusion(text: str, limit: int, *, cut_first: bool = True) -> str:
    """What a reply concluded, on one line: whole sentences and bullets, at most ``limit`` characters.

    Bullets follow the sentence introducing them and are separated by ``;``. A first
    piece longer than ``limit`` is cut at its last sentence end, clause end or word
    that fits, with an ellipsis (nothing at all without ``cut_first``); any later piece
    that does not fit ends the conclusion.
    """
    out, intro, previous = "", "", ""
    for piece, role in _pieces(text):
        if role == "intro":
            intro = piece
            continue
        if role != "bullet":
            intro = ""
        addition = f"{intro} {piece}" if intro else piece
        if not out:
            candidate = addition
        elif role == "bullet" and previous == "bullet" and not intro and not out.endswith(":"):
            candidate = f"{out}; {addition}"
        else:
            candidate = f"{out}{'' if out.endswith(_CLOSED) else '.'} {addition}"
        intro, previous = "", role
        if len(candidate) > limit:
            return (cut(addition, limit) if cut_first else "") if not out else out
        out = candidate
    return out


def cut(text: str, limit: int) -> str:
    """A too long piece cut at the last sentence end, then clause end, then word that fits."""
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    for pattern in (r"[.!?](?=\s)", r"[;,:](?=\s)", r"\s"):
        ends = [match.start() for match in re.finditer(pattern, head)]
        if ends and ends[-1] > limit // 3:
            cut = head[: ends[-1] + (1 if pattern != r"\s" else 0)].rstrip(" ;,:")
            return cut if cut.endswith((".", "!", "?")) else cut + "…"
    return head.rstrip() + "…"


#: At most how many words a question that only details the offer before it has ("Something like `session.jsonl`?").
_DETAIL_WORDS = 6


def closing_question(text: str) -> str | None:
    """The reply's last sentence when it is a question (the offer or question it ends on).

    A short question after an offer details it ("Want me to copy it into the repo and commit
    it? Something like `session.jsonl`?"): the two are the offer.
    """
    blocks = [unit for unit in units(text) if unit.kind in ("para", "bullet")]
    if not blocks:
        return None
    last = sentences(blocks[-1].text)
    if not last or not last[-1].endswith(QUESTION_MARKS):
        return None
    offer = last[-2] if len(last) > 1 and last[-2].endswith(QUESTION_MARKS) else ""
    if offer and is_offer(offer) and not is_offer(last[-1]) and len(last[-1].split()) <= _DETAIL_WORDS:
        return f"{offer} {last[-1]}"
    return last[-1]


def is_offer(question: str) -> bool:
    """Whether a closing question proposes more work ("Want me to commit this?")."""
    return _OFFER.search(question) is not None


def stated_offer(text: str) -> str | None:
    """An offer the reply's last paragraph makes as a statement ("Say the word if you want it run anyway.").

    One that only points back ("... if you want it run anyway") comes with the sentence before
    it, which says what "it" is ("I skipped the `review-branch` gate the hook suggested").
    """
    blocks = [unit for unit in units(text) if unit.kind in ("para", "bullet")]
    for block in blocks[-2:][::-1]:
        said = [sentence.strip() for sentence in sentences(plain(block.text))]
        for index in range(len(said) - 1, -1, -1):
            if _STATED_OFFER.search(said[index]) is None:
                continue
            if index > 0 and _POINTS_BACK.search(said[index]) and not _NAME.search(said[index]):
                return f"{cut(said[index - 1], 110)} {said[index]}"
            return said[index]
    return None


#: An offer whose object is a pronoun: "... if you want it run anyway", "Happy to do that too".
_POINTS_BACK = re.compile(r"\b(?:it|that|this|them|those|these|one)\b", re.IGNORECASE)


def is_open_question(question: str) -> bool:
    """Whether a closing question waits on the user's answer (a choice, a fact only they know), not a courtesy.

    "Which approach?" and "Should the cache be per user?" leave the work waiting;
    "Anything else?" and "Does that make sense?" do not.
    """
    return _COURTESY.search(question) is None and len(question.split()) >= 2


def offered_work(question: str) -> str:
    """What an offer proposes, as a step: "Want me to commit these changes?" → "commit these changes"."""
    match = _OFFER.search(question)
    rest = question[match.end() :] if match is not None else question
    rest = rest.strip(" ?？").removesuffix("吗").removeprefix("to ").strip()
    return rest if len(rest.split()) >= 1 and match is not None and match.group(0).lower() != "ready to" else question


def offer_in_full(text: str, offer: str, asked: str | None, limit: int) -> str:
    """An offer whose object only points back, with what it points at: the reply's proposal and the request.

    "make that change" alone tells a new session nothing; the reply said what the change is
    ("we could at least remove the map ...") in answer to a request ("that double constant
    definition in registry is yuck"). An offer that names its object is kept as it is. The
    request comes first, cut to `ASKED_CHARS`; the proposal has the rest of ``limit``.
    """
    pointing_cjk = _POINTING_OFFER_CJK.search(offer.strip()) is not None
    if _POINTING_OFFER.match(offer.strip()) is None and not pointing_cjk:
        return offer
    said = [sentence.rstrip(" :") for sentence in prose_sentences(units(text)) if not sentence.endswith(QUESTION_MARKS)]
    if pointing_cjk:  # what "这些" (these) are is the sentence before the question
        proposal = said[-1] if said else None
    else:
        found = next((match for match in map(_PROPOSAL.search, reversed(said)) if match), None)
        proposal = found.string[found.start() :] if found else None  # from "we could ...", not "Now that we have ..."
    full = f"{offer} (asked: {cut(asked, ASKED_CHARS)})" if asked else offer
    room = limit - len(full) - 2
    return f"{full}: {cut(proposal, room)}" if proposal and room > ASKED_CHARS // 2 else full


def options(text: str) -> dict[int, str]:
    """Numbered options a reply offers (``1. **Subagent-Driven** - ...``), by number, each on one line.

    The last numbered list is the one offered: the options come after any steps they follow.
    """
    runs: list[dict[int, str]] = []
    for line in text.splitlines():
        match = _OPTION.match(line)
        if match is None:
            continue
        number = int(match.group(1))
        if number == 1 or not runs:
            runs.append({})
        runs[-1].setdefault(number, plain(match.group(2)).strip(" -:"))
    return runs[-1] if runs else {}


def next_steps(text: str) -> list[str]:
    """The steps a reply leaves: items under a next-steps heading or label, unchecked boxes, user actions.

    A heading is never a step itself; the bullets under it are (see the module docstring).
    """
    steps: list[str] = []
    under = gaps = False
    for unit in units(text):
        if unit.kind == "heading":
            gaps = _GAP_LABEL.search(unit.text) is not None
            under = gaps or _NEXT_LABEL.search(unit.text) is not None
            continue
        if unit.kind == "code":
            continue
        if unit.kind == "table":
            cells = [plain(cell).strip() for cell in unit.text.strip("|").split("|")]
            if len(cells) > 1 and cells[0] and any(_DEFERRED.search(cell) for cell in cells[1:]):
                steps.append(f"deferred: {cells[0]}")
            continue
        if unit.kind == "bullet":
            if unit.box == " " or (under and unit.box is None):
                steps.append(unit.text)
            elif _DEFERRED.search(unit.text):
                steps.append(f"deferred: {unit.text}")
            elif _FINDING.match(unit.text):
                steps.append(f"review finding: {unit.text}")
            elif is_remaining(unit.text):
                steps.append(unit.text)
            continue
        said = sentences(unit.text)
        if gaps and said:  # "The one I'd have focused more on: the mirror ambiguity case. `needs_review` ..."
            steps.append(said[0])
            continue
        if said and said[-1].endswith(":"):
            under = _NEXT_LABEL.search(said[-1]) is not None
        else:
            under = False
        steps.extend(
            labelled_step(sentence) or sentence
            for sentence in said
            if is_user_action(sentence) or labelled_step(sentence) or is_remaining(sentence)
        )
    return steps


#: A heading over what a review found ("Technical findings", "Issues", "Bugs found"), not over what is next.
_FINDINGS_LABEL = re.compile(r"\b(?:findings?|issues|problems|bugs|concerns|risks|weaknesses)\b", re.IGNORECASE)
#: A request for a review of work already there: what the review finds is the work it leaves.
REVIEW_ASK = re.compile(
    r"\b(?:review|audit|critique|assess|evaluate)\w*\b|\b(?:take a |have a )?look (?:at|over|through)\b",
    re.IGNORECASE,
)


def findings(text: str, limit: int) -> list[str]:
    """The top-level items a review lists under a heading naming its findings, each cut to ``limit``.

    A review that changes nothing leaves its findings to be acted on: they are the next
    session's work ("**2. Sticky tooltip**: ...") as much as a "Next steps" list is.
    """
    found: list[str] = []
    under = False
    for unit in units(text):
        if unit.kind == "heading":
            under = _FINDINGS_LABEL.search(unit.text) is not None and _NEXT_LABEL.search(unit.text) is None
        elif under and unit.kind == "bullet" and unit.depth == 0 and unit.box is None:
            found.append(cut(re.sub(r"^\d{1,3}[.)]\s+", "", unit.text), limit))
    return found


#: A heading over a plan's steps ("Changes", "Implementation steps", "Phase 2"), and over how it is checked.
_STEPS_LABEL = re.compile(r"\b(?:changes|steps|implementation|tasks|phases?|approach|plan)\b", re.IGNORECASE)
_CHECK_LABEL = re.compile(r"\b(?:verification|verify|testing|test plan|how to test)\b", re.IGNORECASE)
_NUMBERED = re.compile(r"^(?:(?:step|phase|part)\s+)?\d{1,2}[.):]\s*", re.IGNORECASE)


def plan_steps(text: str, limit: int) -> list[str]:
    """A plan's steps, each cut to ``limit``: its numbered headings, or the top-level items under a heading naming
    its steps; then how it is to be checked, as one step ("verify: ...").

    A plan that was never carried out leaves these steps to the next session, which needs them
    by name, not only the plan's title. Items under "Next steps" are `next_steps`, told apart.
    """
    steps: list[str] = []
    listing = False  # under a heading naming the steps, whose top-level items are steps
    for unit in units(text):
        if unit.kind == "heading":
            if _CHECK_LABEL.search(unit.text):
                listing = False  # its items are `plan_checks`, told as one step below
            elif _NUMBERED.match(unit.text):
                steps.append(cut(_NUMBERED.sub("", unit.text), limit))
                listing = False
            else:
                listing = _STEPS_LABEL.search(unit.text) is not None and _NEXT_LABEL.search(unit.text) is None
        elif unit.kind == "bullet" and unit.depth == 0 and listing:
            steps.append(cut(_NUMBERED.sub("", unit.text), limit))
    checks = plan_checks(text)
    if checks:
        steps.append(cut("verify: " + "; ".join(checks), limit))
    return steps


def plan_checks(text: str) -> list[str]:
    """The items of a plan's "Verification" (or "Testing") section: how the plan says its work is to be checked."""
    checks: list[str] = []
    under = False
    for unit in units(text):
        if unit.kind == "heading":
            under = _CHECK_LABEL.search(unit.text) is not None
        elif unit.kind == "bullet" and under:
            checks.append(_NUMBERED.sub("", unit.text))
    return checks


#: A plan's headings over what was found and why ("Context", "Root cause"), not over what is to be done.
_FOUND_LABEL = re.compile(r"\b(?:context|background|problem|root cause|cause|diagnosis|findings?|why)\b", re.IGNORECASE)


def plan_context(text: str) -> str:
    """The sections of a plan that say what was found and why (its "Context", "Root cause"), as markdown.

    They hold the session's findings and the reasons for its decisions ("encryption is the
    access control, so strict POSIX checks add no security"); the steps are work, not facts.
    """
    kept: list[str] = []
    keep = False
    for line in readable(text).splitlines():
        heading = _HEADING.match(line)
        if heading is not None:
            keep = _FOUND_LABEL.search(heading.group(1)) is not None
            continue
        if keep:
            kept.append(line)
    return "\n".join(kept)


def check_commands(item: str) -> list[str]:
    """The commands a plan's check item names in code spans ("Run `bun run test` to confirm no regressions")."""
    return re.findall(r"`([^`]+)`", item)


def labelled_step(sentence: str) -> str | None:
    """The step a sentence names after a next-steps label ("Next step: patch the migration." → the rest)."""
    found = _NEXT_SENTENCE.match(sentence.strip())
    return found.group(1).strip() if found is not None else None


def is_remaining(sentence: str) -> bool:
    """Whether a sentence says what is still left of the work ("The branch still needs to be merged").

    Codex and Gemini end on prose, not on a "Next steps" list: this is how their replies leave
    work open. A condition ("If CI is still pending, ...") or a question is no step.
    """
    flat = sentence.strip()
    if flat.endswith(QUESTION_MARKS) or re.match(r"^(?:if|when|unless|whenever|once)\b", flat, re.IGNORECASE):
        return False
    return _REMAINING.search(flat) is not None


def is_user_action(sentence: str) -> bool:
    """Whether a sentence tells the user what they still have to do ("You may want to delete it manually").

    A question is no step, nor a condition the agent answers ("If you need to ..., I can
    help"); one whose main clause tells the user ("If your repositories change, you can
    manually clear the cache") is.
    """
    flat = sentence.strip()
    if flat.endswith(("?", ":")):
        return False
    condition = re.match(r"^(?:if|when|unless|whenever)\b[^,]*,\s*", flat, re.IGNORECASE)
    if condition is not None:  # "If your repositories change, you can manually clear the cache": the clause after it
        rest = flat[condition.end() :]
        return re.match(r"you\b", rest, re.IGNORECASE) is not None and _USER_ACTION.search(rest) is not None
    return _USER_ACTION.search(flat) is not None


def table_digest(text: str) -> list[str]:
    """The first cells of a reply's table rows (a table answers "where is X used?" by its first column).

    A column of numbers or row ids (``#``, ``1``, ``FI-1``) names nothing: the column after it does.
    """
    lines = text.splitlines()
    rows = [
        [plain(cell).strip() for cell in line.strip().strip("|").split("|")]
        for index, line in enumerate(lines)
        if _TABLE.match(line)
        and not _TABLE_RULE.match(line)
        and not (index + 1 < len(lines) and _TABLE_RULE.match(lines[index + 1]))  # a header, over its rule
    ]
    cells = [row[1] if len(row) > 1 and _ROW_ID.match(row[0]) else row[0] for row in rows]
    return list(dict.fromkeys(cell for cell in cells if cell and not _ROW_ID.match(cell)))


#: A table cell that only numbers or labels its row: ``#``, ``3``, ``FI-1``, ``P0``.
_ROW_ID = re.compile(r"^(?:#|\d{1,3}\.?|[A-Z]{1,4}-?\d{1,3})$")


#: What names one thing in a request: a code span, an identifier (``IncrementalTypeTaskStart``, ``files_to_archive``,
#: ``Type()``), a file (``registry.go``), an issue or PR (``#91``, ``ENT-59``), a version, a URL's last segment.
_NAME = re.compile(
    r"`([^`\n]{2,40})`"
    r"|https?://\S+?/([\w.-]{3,40})/?(?=[\s)\]>,;]|$)"
    r"|(?<![\w/.-])("
    r"[\w-]{2,}\.(?:[a-z]{1,4}|jsonl|toml|yaml)"
    r"|\w+\(\)"
    r"|[a-z]*[A-Z][a-z0-9]+[A-Z]\w*"
    r"|[a-z][a-z0-9]*[A-Z]\w*"
    r"|[A-Za-z]\w*_\w+"
    r"|#\d+|[A-Z][A-Z0-9]+-\d+|v?\d+\.\d+(?:\.\d+)+"
    r")(?![\w/-])"
)
#: Room the names a cut request keeps take, at most, in characters.
NAMES_CHARS = 44


def names(text: str) -> list[str]:
    """The names a text mentions (see `_NAME`), each once, in order."""
    found = (next(group for group in match.groups() if group) for match in _NAME.finditer(text))
    return list(dict.fromkeys(name.strip(".") for name in found if name.strip(".")))


def clip_naming(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, keeping in brackets the names the cut would lose.

    A long request is known by what it names: "This change removes the only production
    code path that ever sets IncrementalTypeTaskStart" cut at 80 characters loses the one word
    a new session would search for. The names that fit in `NAMES_CHARS` follow the cut head.
    """
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    named = names(flat)
    head, suffix = clip(flat, limit), ""
    for _ in range(3):  # a shorter head can lose a name the longer one kept: settle in a few rounds
        kept: list[str] = []
        for name in (name for name in named if name.lower() not in head.lower()):
            if any(name.lower() in other.lower() for other in kept):
                continue  # "TaskStart" beside "IncrementalTypeTaskStart"
            if len(", ".join([*kept, name])) + 3 > NAMES_CHARS:
                break
            kept.append(name)
        suffix = f" [{', '.join(kept)}]" if kept else ""
        shorter = clip(flat, limit - len(suffix))
        if shorter == head:
            break
        head = shorter
    return head + suffix
