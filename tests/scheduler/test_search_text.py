"""What a tool call or result is embedded as: its purpose, command, exit status and salient lines.

Calls and results are shaped as the Claude Code feed stores them (`server/agents/claude/transcript.py`:
``Name {json input}`` with metadata ``kind: tool_use`` and ``tool_name``; a ``tool``
message with the call's ``tool_call_id``, ``is_error`` in metadata when Claude Code said so).
"""

from __future__ import annotations

import math

from palimpsest.graph_schema.models import NewMessage, Role
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.embedders import SentenceTransformerEmbedder
from palimpsest.scheduler.embedding import backfill_embeddings
from palimpsest.scheduler.search_text import call_text, result_text

P = "claude"
CALL = 'Bash {"command": "mix format --check-formatted 2>&1", "description": "Check formatting without changing files"}'
NOISE = "\n".join(f"Compiling lib/module_{index}.ex" for index in range(400))
RESULT = f"Exit code 1\n{NOISE}\n** (Mix) mix format failed due to --check-formatted.\nlib/zebra.ex is not formatted"


def test_a_call_says_its_purpose_then_its_tool_and_inputs_in_words() -> None:
    text = call_text(CALL, "Bash")
    assert text == "Check formatting without changing files. Bash command: mix format --check-formatted 2>&1."
    edit = call_text('Edit {"file_path": "lib/app.ex", "old_string": "a", "new_string": "b", "replace_all": false}')
    assert edit == "Edit file: lib/app.ex. Edit replacing: a. Edit with: b."
    assert call_text('TodoWrite {"todos": [{"content": "x"}]}') == 'TodoWrite {"todos": [{"content": "x"}]}.'
    assert call_text("plain words, not a call") is None


def test_a_result_says_what_it_answers_how_it_ended_and_its_salient_lines() -> None:
    text = result_text(RESULT, CALL, tool_name="Bash")
    lines = text.splitlines()
    assert (
        lines[0]
        == "Result of: Check formatting without changing files. Bash command: mix format --check-formatted 2>&1."
    )
    assert lines[1] == "Exit code 1, failed."
    assert lines[2] == "** (Mix) mix format failed due to --check-formatted."  # salient, from deep in the output
    assert "lib/zebra.ex is not formatted" in lines and "Compiling lib/module_0.ex" in lines
    assert "Compiling lib/module_200.ex" not in text, "the middle of a long output is left out"
    assert result_text("permission denied", None, is_error=True).splitlines() == [
        "Failed with an error.",
        "permission denied",
    ]


async def test_backfill_embeds_calls_and_results_by_what_they_are_about(
    store: MemoryStore, minilm: SentenceTransformerEmbedder
) -> None:
    messages = [
        NewMessage(role=Role.user, content="check the formatting", message_id="u0"),
        NewMessage(
            role=Role.assistant, content=CALL, message_id="a1", tool_call_id="toolu_1",
            metadata={"kind": "tool_use", "tool_name": "Bash"},
        ),
        NewMessage(
            role=Role.tool, content=RESULT, message_id="r1", tool_call_id="toolu_1", metadata={"is_error": True}
        ),
    ]  # fmt: skip
    ids = (await store.append_messages(P, "session-1", messages)).message_ids
    assert await backfill_embeddings(store, minilm) == 3
    stored = {vector.node_id: vector.vector for vector in await store.read_embeddings(ids)}
    expected = await minilm.embed(
        [
            "check the formatting",
            call_text(CALL, "Bash") or "",
            result_text(RESULT, CALL, tool_name="Bash", is_error=True),
        ]
    )
    for node_id, vector in zip(ids, expected, strict=True):
        assert math.isclose(_cosine(stored[node_id], vector), 1.0, abs_tol=1e-4)
    todo = await store.missing_embeddings(P, ("message",), 10, ids=ids)
    assert todo == [], "embedded once"
    raw = await minilm.embed([RESULT])
    assert _cosine(stored[ids[2]], raw[0]) < 0.99, "the result is not embedded as its raw output"


def _cosine(left: list[float], right: list[float]) -> float:
    dot = sum(a * b for a, b in zip(left, right, strict=True))
    return dot / (math.sqrt(sum(a * a for a in left)) * math.sqrt(sum(b * b for b in right)))
