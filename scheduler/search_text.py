"""What a tool call or a tool result is about, in words, for search: derived, stored beside the content.

A coding session's tool call is stored as the agent wrote it, ``Bash {"command": "mix
format --check-formatted 2>&1", "description": "Check formatting"}``, and its result as
the tool's raw output, often thousands of lines of which the embedder reads the first
256 tokens. A later question asks "which command checked the formatting?" or "why was
the commit rejected?": it meets the call through its purpose and the result through
how it ended, neither of which that raw text puts first. So what is embedded for them
is a text written for search, while the stored content stays byte-exact:

- a call: its stated purpose (the input's ``description``), then the tool and each of
  its short inputs in words (``Bash command: mix format --check-formatted``, ``Edit
  file: lib/app.ex``);
- a result: the purpose and command of the call it answers (found in the thread,
  `other_half`), its exit status (``Exit code 1``, or failed when the feed marked it
  ``is_error``), then its salient lines (errors, failures, counts such as "3 failed,
  12 passed"), its first lines and its last ones.

Every other message, summary and fact is embedded as its text. What of it the
content does not say (a call's text whole, a result's purpose and exit status:
`result_heading`) is also written once beside the message
(`MemoryStore.set_search_texts`: a column on SQLite, a property on Neo4j) and indexed
for text search with the content, so "commit rejected" finds the result of a commit
its hook rejected in text mode too; hits still show the content, the derived text
only when the query matched nothing else. That indexed text also holds the parts of
the camel-cased names in the content (`code_terms`: ``PaymentGateway`` → payment
gateway), which neither store's tokenizer splits. It is written by whoever
derives it first: the embedder, for what it embeds (before the vector, so a vector
with no text beside it was made from the raw content), or the ``search_text`` step of
maintenance (`fill_search_texts`), for tool messages stored before this text existed
or with no embedder configured; that step also deletes the raw-content vectors of the
messages it writes, for the embedding backfill to make again from the text, once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import NamedTuple

from palimpsest.graph_schema.models import MAX_EMBED_CHARS, EmbeddingTodo, Message, MessageRef, Role
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler import paging
from palimpsest.scheduler.compaction import Pause
from palimpsest.scheduler.session_facts import clip

#: Messages after a call (before a result) in which its other half is looked for: a
#: result follows its call closely, a turn's parallel calls all coming first.
PAIR_WINDOW = 16
#: Messages looked at first, the rest of the window only when the other half is not among them.
PAIR_NEAR = 3
#: Characters of one input value or one output line kept.
VALUE_CHARS = 300
#: Lines a result's text keeps from its start, and from its end.
HEAD_LINES = 4
TAIL_LINES = 4
#: Salient lines a result's text keeps at most.
SALIENT_LINES = 8
#: Inputs said first, in this order, with these words; any other string input follows.
INPUT_WORDS = {
    "command": "command",
    "file_path": "file",
    "notebook_path": "notebook",
    "path": "path",
    "pattern": "pattern",
    "glob": "files",
    "url": "URL",
    "query": "query",
    "skill": "skill",
    "subagent_type": "agent",
    "prompt": "prompt",
    "old_string": "replacing",
    "new_string": "with",
    "content": "content",
}
#: A line that says how a run went: an error, a failure, a refusal, a count of results.
SALIENT = re.compile(
    r"\b(?:error|errors|failed|failure|failures|fail|fatal|exception|traceback|panic|abort(?:ed)?|"
    r"denied|rejected|refused|forbidden|not found|no such|cannot|can't|unable|invalid|missing|"
    r"warning|conflict|timed? ?out|\d+ (?:passed|failed|errors?|tests?|warnings?|files?|skipped))\b",
    re.IGNORECASE,
)
_EXIT_CODE = re.compile(r"\AExit code (\d+)")
#: A name whose case changes inside it after a lower-case letter or a run of capitals: ``sessionStore``,
#: ``HTTPServer``, ``GrepHit``; not ``Hello``, ``README`` or ``mix_test``.
_CAMEL_NAME = re.compile(r"\b[A-Za-z][a-z0-9]*[A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*\b|\b[A-Z]{2,}[a-z][A-Za-z0-9]*\b")
#: Where a camelCase or PascalCase name changes word: ``session|Store``, ``HTTP|Server``, ``v2|Beta``.
_CAMEL_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
#: Parts of identifiers a tool message's indexed text adds at most.
MAX_CODE_TERMS = 200
#: Tool messages derived and written at once by `fill_search_texts`.
FILL_BATCH = 256


def is_call(ref: Message | MessageRef) -> bool:
    """Whether a message is a tool call: an assistant message whose metadata says so (every feed writes
    ``kind: tool_use`` or a ``tool_name`` on one)."""
    return ref.role is Role.assistant and (ref.metadata.get("kind") == "tool_use" or "tool_name" in ref.metadata)


async def other_half(store: MemoryStore, ref: Message | MessageRef) -> tuple[Message | None, Message | None]:
    """A call or result as stored, and the result it got (after it) or the call it answers (before it).

    Reads the ``PAIR_NEAR`` messages next to it first (a result most often follows its
    call at once), then, only if the other half is not there, the rest of
    ``PAIR_WINDOW``: tool outputs can be large, and most searches hit lone pairs.
    ``(None, None)`` when the message is gone, ``(message, None)`` when its other half
    is not within reach.
    """
    before = ref.role is Role.tool
    own: Message | None = None
    for near, far in ((0, PAIR_NEAR), (PAIR_NEAR + 1, PAIR_WINDOW)):
        if before:
            first, last = max(0, ref.seq - far), ref.seq - near
        else:
            first, last = ref.seq + near, ref.seq + far
        if last < first:
            break
        window = await store.get_messages(ref.partition, ref.thread_id, first_seq=first, last_seq=last)
        if own is None:
            mine = window[-1:] if before else window[:1]
            if not mine or mine[0].id != ref.id:
                return None, None
            own = mine[0]
            if own.tool_call_id is None:
                return own, None
        others = reversed(window) if before else window
        other_role = Role.assistant if before else Role.tool
        found = next((m for m in others if m.role is other_role and m.tool_call_id == own.tool_call_id), None)
        if found is not None:
            return own, found
    return own, None


def call_text(content: str, tool_name: str | None = None) -> str | None:
    """A call ``Name {json input}`` in words: its purpose, then its tool and inputs; None if not that shape."""
    name, _, rendered = content.partition(" ")
    try:
        arguments = json.loads(rendered)
    except ValueError:
        return None
    if not isinstance(arguments, dict):
        return None
    tool = tool_name or name
    parts: list[str] = []
    description = arguments.get("description")
    if isinstance(description, str) and description.strip():
        parts.append(clip(description, VALUE_CHARS).rstrip(".") + ".")
    keys = [key for key in INPUT_WORDS if key in arguments] + [key for key in arguments if key not in INPUT_WORDS]
    said = [
        f"{tool} {INPUT_WORDS.get(key, key.replace('_', ' '))}: {clip(value, VALUE_CHARS)}."
        for key in keys
        if key != "description" and isinstance(value := arguments[key], str) and value.strip()
    ]
    return " ".join([*parts, *(said or [f"{tool} {clip(rendered, VALUE_CHARS)}."])])[:MAX_EMBED_CHARS]


def result_heading(
    content: str, call: str | None = None, *, tool_name: str | None = None, is_error: bool = False
) -> str:
    """What a result's content does not say: what it answers (``call``, the call's content) and how it ended.

    The text a result is indexed by beside its content: the rest of `result_text`
    repeats the content's own lines, which counted twice in the index and outranked
    other messages (bench/coding_recall.py, ``text`` on the tuning half: 79.0 with the
    whole text indexed, 79.8 with this heading or with nothing, 83.6 against 80.3 and
    81.4 on checking).
    """
    parts: list[str] = []
    purpose = call_text(call, tool_name) if call is not None else None
    if purpose:
        parts.append(f"Result of: {purpose}")
    code = _EXIT_CODE.match(content)
    if code is not None:
        parts.append(f"Exit code {code.group(1)}{', failed' if code.group(1) != '0' else ''}.")
    elif is_error:
        parts.append("Failed with an error.")
    return "\n".join(parts)[:MAX_EMBED_CHARS]


def result_text(content: str, call: str | None = None, *, tool_name: str | None = None, is_error: bool = False) -> str:
    """A result in words: what it answers (``call``, the call's content), how it ended, its salient, first and
    last lines."""
    return _with_lines(result_heading(content, call, tool_name=tool_name, is_error=is_error), content)


def _with_lines(heading: str, content: str) -> str:
    """`result_text` from its `result_heading`: the heading, then the content's salient, first and last lines."""
    parts = [heading] if heading else []
    lines = [line.strip() for line in content.splitlines() if line.strip()]
    salient = [line for line in lines if SALIENT.search(line)][:SALIENT_LINES]
    kept = dict.fromkeys([*salient, *lines[:HEAD_LINES], *lines[-TAIL_LINES:]])
    parts += [clip(line, VALUE_CHARS) for line in kept]
    return "\n".join(parts)[:MAX_EMBED_CHARS]


def code_terms(text: str) -> str:
    """The parts of the camel-cased names in ``text``, lower-cased, in one line.

    Both stores' tokenizers index ``sessionStore``, ``HTTPServerError`` or
    ``getUserById`` as one token each (FTS5's ``unicode61`` and Lucene's standard
    tokenizer split on punctuation and underscores, never on a change of case), so a
    question that names a part ("the session store", "the server error") misses them.
    Each name that changes case inside gives its parts of two characters or more, once,
    up to ``MAX_CODE_TERMS``. Parts the tokenizers already split apart (``os.path``,
    ``filter_warnings``) are not repeated: counted twice, they would outrank other
    messages. The stored content stays as written; this is indexed beside it.
    """
    terms: dict[str, None] = {}
    for found in _CAMEL_NAME.finditer(text):
        for part in _CAMEL_PART.findall(found.group()):
            if len(part) >= 2:
                terms.setdefault(part.lower())
                if len(terms) >= MAX_CODE_TERMS:
                    return " ".join(terms)
    return " ".join(terms)


def indexed_text(derived: str, content: str) -> str:
    """What a tool message is indexed by beside its content: its derived text, then its `code_terms`."""
    terms = code_terms(content)
    return "\n".join(part for part in (derived, terms) if part)[:MAX_EMBED_CHARS]


class SearchTexts(NamedTuple):
    """What to embed for a batch, and the derived texts to store before its vectors."""

    #: One text per node, in the batch's order.
    texts: list[str]
    #: ``(message id, derived text)`` of each tool message, ``''`` for a call that says nothing more.
    derived: list[tuple[str, str]]


async def search_texts(store: MemoryStore, todo: Sequence[EmbeddingTodo]) -> SearchTexts:
    """The text to embed for each node: the derived text of a call or result, else the node's own.

    One `MemoryStore.message_refs` read for the batch's messages, then one bounded
    thread read (`other_half`) per result, which also gives the result whole (a todo's
    text is cut at ``MAX_EMBED_CHARS``, and a result's last lines are often what
    matter), and one read of a call whose cut text is no longer its whole input.
    """
    messages = [item.id for item in todo if item.kind == "message"]
    refs = {ref.id: ref for ref in await store.message_refs(None, messages)} if messages else {}
    texts: list[str] = []
    derived: list[tuple[str, str]] = []
    for item in todo:
        ref = refs.get(item.id)
        text = item.text
        if ref is not None and is_call(ref):
            said = call_text(item.text, _tool_name(ref))
            if said is None and len(item.text) >= MAX_EMBED_CHARS:
                said = await message_search_text(store, await store.get_message(ref.partition, ref.id)) or None
            text = said or item.text
            derived.append((item.id, indexed_text(said or "", item.text)))
        elif ref is not None and ref.role is Role.tool:
            text, heading = await _result_texts(store, ref, item.text)
            derived.append((item.id, heading))
        texts.append(text)
    return SearchTexts(texts, derived)


async def _result_texts(store: MemoryStore, ref: Message | MessageRef, text: str) -> tuple[str, str]:
    """A result's `result_text` (embedded) and `result_heading` with its `code_terms` (indexed): its call found
    in the thread, its whole content read there too."""
    own, call = await other_half(store, ref)
    whole = own.content if own is not None else text
    answered = call.content if call is not None else None
    tool_name = _tool_name(call) if call is not None else None
    heading = result_heading(whole, answered, tool_name=tool_name, is_error=ref.metadata.get("is_error") is True)
    return _with_lines(heading, whole), indexed_text(heading, whole)


def _tool_name(call: Message | MessageRef) -> str | None:
    """The tool a call names in its metadata, when a feed wrote one."""
    name = call.metadata.get("tool_name")
    return name if isinstance(name, str) else None


async def message_search_text(store: MemoryStore, message: Message) -> str:
    """A tool message's text to index beside its content: a call's `call_text`, a result's `result_heading`,
    each with its content's `code_terms`; ``''`` when it says nothing beyond its content."""
    if is_call(message):
        return indexed_text(call_text(message.content, _tool_name(message)) or "", message.content)
    if message.role is Role.tool:
        return (await _result_texts(store, message, message.content))[1]
    return ""


async def fill_search_texts(
    store: MemoryStore,
    *,
    batch: int = FILL_BATCH,
    partition: str | None = None,
    pause: Pause | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Write the derived text of every tool message that has none: the ``search_text`` maintenance step.

    Walks the store's tool messages without one by id (`MemoryStore.missing_search_texts`,
    a cursor, never a rescan), ``batch`` at a time, one write each, awaiting ``pause``
    between batches. Writing a message's text deletes the vector it had, made from its
    raw content by a Palimpsest before this text existed; the ``embeddings`` step, which
    runs after this one, makes it again from the text. Run it twice and the second run
    writes nothing. With ``progress`` it first counts what is missing, then reports
    (done, total) after each batch, as the embedding backfill does.

    Returns:
        How many messages got their text.
    """
    total = 0
    if progress is not None:
        total = await paging.count(lambda after: store.missing_search_texts(partition, FILL_BATCH, after=after))
        progress(0, total)
    written = done = 0
    async for todo in paging.walk(lambda after: store.missing_search_texts(partition, batch, after=after)):
        items = [(message.id, await message_search_text(store, message)) for message in todo]
        written += await store.set_search_texts(items)
        done += len(todo)
        if progress is not None:
            progress(done, max(total, done))
        if pause is not None:
            await pause()
    return written
