"""``palimpsest hook windsurf`` on a whole Cascade session, replayed through the real CLI as Cascade sends it.

Every step of the transcript is stored once, as what it is (the prompt, the answer, each
tool's call and result, a step with no message shape kept whole); replaying adds
nothing; a conversation reverted to an earlier step (Cascade rewrites the transcript
from the start) keeps its new turn, in order; nothing any step said is missing from the
store; no tool's output is stored as the assistant's words.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from palimpsest.graph_schema.models import Message
from tests.support.hooks import hook, silent
from tests.support.step_sessions import (
    WINDSURF_TRAJECTORY,
    by_step,
    stored,
    unrecoverable,
    windsurf_payload,
    windsurf_turns,
    write_jsonl,
)


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Cascade runs hooks in the workspace (its payloads carry no ``cwd``)."""
    folder = tmp_path / "billing-api"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


def shape(messages: list[Message]) -> list[tuple[str, str, str]]:
    return [(m.role.value, m.metadata["kind"], m.content) for m in messages]


def replay(store_url: str, transcript: Path, turns: list[list[tuple[dict[str, Any], Any]]]) -> None:
    """Each turn appended to the transcript, then the hook Cascade runs after the response."""
    lines: list[dict[str, Any]] = []
    for number, turn in enumerate(turns):
        lines += [step for step, _ in turn]
        write_jsonl(transcript, lines)
        silent(hook("windsurf", windsurf_payload(transcript, f"exec-{number}"), store_url))


def test_a_cascade_session_stores_every_step_once(store_url: str, tmp_path: Path, workspace: Path) -> None:
    turns = windsurf_turns()
    steps = [item for turn in turns for item in turn]
    assert len(steps) == 27
    transcript = tmp_path / ".windsurf" / "transcripts" / f"{WINDSURF_TRAJECTORY}.jsonl"
    replay(store_url, transcript, turns)
    messages = stored(store_url, "windsurf", WINDSURF_TRAJECTORY)
    assert shape(messages) == [message for _, expected in steps for message in expected]

    groups = by_step(messages)
    assert len(groups) == len(steps)
    for (step, _), group in zip(steps, groups, strict=True):
        assert unrecoverable(step, group, ("timestamp",)) == [], step
        assert {m.metadata["step_type"] for m in group} == {step["type"]}
    calls = {m.tool_call_id: m for m in messages if m.metadata["kind"] == "tool_use"}
    for result in (m for m in messages if m.role.value == "tool"):
        call = calls[result.tool_call_id]
        assert call.seq < result.seq and call.metadata["tool_name"] == result.metadata["tool_name"]
    outputs = {m.content for m in messages if m.role.value == "tool"}
    assert not [m for m in messages if m.role.value == "assistant" and m.content in outputs]
    failed = [m for m in messages if m.metadata.get("is_error")]
    assert [(m.metadata["tool_name"], m.metadata.get("exit_code")) for m in failed] == [
        ("run_command", 1),
        ("run_command", 1),
    ]
    timed = next(m for m in messages if m.content == "Want me to fix the lint?")
    assert timed.created_at.isoformat() == "2026-11-30T11:07:30+00:00"

    replay(store_url, transcript, turns)
    assert [m.id for m in stored(store_url, "windsurf", WINDSURF_TRAJECTORY)] == [m.id for m in messages]
    rules = (workspace / ".windsurf" / "rules" / "palimpsest.md").read_text(encoding="utf-8")
    assert WINDSURF_TRAJECTORY in rules


def test_a_reverted_conversation_keeps_its_new_turn_in_order(store_url: str, tmp_path: Path, workspace: Path) -> None:
    first, second, _ = windsurf_turns()
    transcript = tmp_path / "transcripts" / f"{WINDSURF_TRAJECTORY}.jsonl"
    replay(store_url, transcript, [first, second])
    before = shape(stored(store_url, "windsurf", WINDSURF_TRAJECTORY))
    # Reverted to the end of the first turn, then a new prompt: the file is rewritten from
    # the start, and the new prompt sits on the line where the old one was.
    prompt = {"status": "done", "type": "user_input", "user_input": {"user_response": "Show me the README instead."}}
    answer = {"status": "done", "type": "planner_response", "planner_response": {"response": "Here it is."}}
    new_turn = [(prompt, None), (answer, None)]
    replay(store_url, transcript, [first + new_turn])
    after = stored(store_url, "windsurf", WINDSURF_TRAJECTORY)
    assert shape(after) == [
        *before,
        ("user", "text", "Show me the README instead."),
        ("assistant", "text", "Here it is."),
    ]
    replay(store_url, transcript, [first + new_turn])
    replay(store_url, transcript, [first, second])
    assert len(stored(store_url, "windsurf", WINDSURF_TRAJECTORY)) == len(after)


def test_the_same_prompt_twice_is_two_turns(store_url: str, tmp_path: Path, workspace: Path) -> None:
    again = [
        ({"status": "done", "type": "user_input", "user_input": {"user_response": "continue"}}, None),
        ({"status": "done", "type": "planner_response", "planner_response": {"response": "Continuing."}}, None),
    ]
    transcript = tmp_path / "t.jsonl"
    replay(store_url, transcript, [again, again])
    assert [m.content for m in stored(store_url, "windsurf", WINDSURF_TRAJECTORY)] == ["continue", "Continuing."] * 2


def test_a_transcript_not_written_yet_stores_nothing_and_a_later_call_stores_it(
    store_url: str, tmp_path: Path, workspace: Path
) -> None:
    transcript = tmp_path / "late.jsonl"
    silent(hook("windsurf", windsurf_payload(transcript, "exec-0"), store_url))
    assert stored(store_url, "windsurf", WINDSURF_TRAJECTORY) == []
    first = windsurf_turns()[0]
    replay(store_url, transcript, [first])
    assert len(stored(store_url, "windsurf", WINDSURF_TRAJECTORY)) == sum(len(expected) for _, expected in first)


def test_a_bad_line_exits_1_naming_it_and_stores_nothing(store_url: str, tmp_path: Path, workspace: Path) -> None:
    transcript = tmp_path / "bad.jsonl"
    transcript.write_text(
        '{"status": "done", "type": "user_input", "user_input": {"user_response": "hi"}}\n[1, 2]\n', encoding="utf-8"
    )
    result = hook("windsurf", windsurf_payload(transcript, "exec-0"), store_url)
    assert (result.exit_code, result.stdout) == (1, "")
    assert f"{transcript}:2: a line must be a JSON object" in result.stderr and result.stderr.count("\n") == 1
    assert stored(store_url, "windsurf", WINDSURF_TRAJECTORY) == []
