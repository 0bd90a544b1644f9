"""``palimpsest hook antigravity`` on a whole ``agy`` session, replayed through the real CLI as ``agy`` sends it.

``agy`` writes its transcript after the ``Stop`` hook, so the replay does too: a ``Stop``
that finds no file, or a file without the last answer, exits 0 and stores what is
there; the next turn's ``PreInvocation`` stores the rest. Every step is stored once, as
what it is; the tools' results (source ``MODEL``) are ``tool`` messages answering their
call, never the assistant's words; a ``RUNNING`` step rewritten as ``DONE`` keeps both;
nothing any step said is missing from the store. ``install antigravity`` wires the IDE's
own ``mcp_config.json`` where the IDE keeps its data, and ``uninstall`` gives it back.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from palimpsest.server.agents.antigravity.hook import FOLLOW_UP_S, request
from palimpsest.server.cli.main import app
from tests.support.hooks import hook, silent
from tests.support.step_sessions import (
    AGY_CONVERSATION,
    PRE_INVOCATION,
    STOP,
    agy_payload,
    agy_turns,
    by_step,
    stored,
    unrecoverable,
    write_jsonl,
)


@pytest.fixture
def transcript(tmp_path: Path) -> Path:
    return tmp_path / "brain" / AGY_CONVERSATION / ".system_generated" / "logs" / "transcript.jsonl"


def shape(store_url: str) -> list[tuple[str, str, str]]:
    return [(m.role.value, m.metadata["kind"], m.content) for m in stored(store_url, "antigravity", AGY_CONVERSATION)]


def test_an_agy_session_with_a_late_transcript_stores_every_step_once(store_url: str, transcript: Path) -> None:
    first, second = agy_turns()
    steps = first + second
    expected = [message for _, said in steps for message in said]
    lines = [step for step, _ in steps]
    # Turn 1: the model runs while the transcript does not exist yet; Stop comes first.
    silent(hook("antigravity", agy_payload(transcript, **PRE_INVOCATION), store_url))
    silent(hook("antigravity", agy_payload(transcript, **STOP), store_url))
    assert shape(store_url) == []
    # agy writes the transcript seconds after Stop, the last answer later still.
    write_jsonl(transcript, lines[: len(first) - 1])
    silent(hook("antigravity", agy_payload(transcript, **STOP), store_url))
    assert shape(store_url) == [message for _, said in first[:-1] for message in said]
    # Turn 2: its first model call finds the first turn's last answer.
    write_jsonl(transcript, lines[: len(first)])
    silent(hook("antigravity", agy_payload(transcript, **{**PRE_INVOCATION, "initialNumSteps": len(first)}), store_url))
    assert shape(store_url)[-1] == ("assistant", "text", "The tests are running in the background.")
    write_jsonl(transcript, lines)
    silent(hook("antigravity", agy_payload(transcript, **STOP), store_url))
    messages = stored(store_url, "antigravity", AGY_CONVERSATION)
    assert shape(store_url) == expected

    for (step, _), group in zip(steps, by_step(messages), strict=True):
        if step["type"] == "USER_INPUT":  # the step's text comes back byte for byte, wrapper and all
            (prompt,) = group
            before, after = prompt.metadata["around"]
            assert before + prompt.content + after == step["content"]
            step = {key: value for key, value in step.items() if key != "content"}
        assert unrecoverable(step, group, ("created_at",)) == [], step
    calls = {m.tool_call_id: m for m in messages if m.metadata["kind"] == "tool_use"}
    results = [m for m in messages if m.metadata["kind"] == "tool_result"]
    assert [(calls[m.tool_call_id].metadata["tool_name"], m.metadata["step_type"]) for m in results] == [
        ("list_dir", "LIST_DIRECTORY"),
        ("run_command", "RUN_COMMAND"),
        ("view_file", "VIEW_FILE"),
        ("list_dir", "LIST_DIRECTORY"),
    ]
    assert all(m.role.value == "tool" for m in results)
    assert [m.metadata.get("is_error", False) for m in results] == [False, False, True, False]
    assert not [m for m in messages if m.role.value == "assistant" and m.metadata["step_type"] != "PLANNER_RESPONSE"]
    prompt = messages[0]
    assert prompt.metadata["wrapped"]["ADDITIONAL_METADATA"] == "The current local time is: 2026-11-30T21:02:01+01:00."
    assert prompt.created_at.isoformat() == "2026-11-30T20:02:01+00:00"

    for _replay in range(2):
        silent(hook("antigravity", agy_payload(transcript, **PRE_INVOCATION), store_url))
        silent(hook("antigravity", agy_payload(transcript, **STOP), store_url))
    assert [m.id for m in stored(store_url, "antigravity", AGY_CONVERSATION)] == [m.id for m in messages]


def test_a_running_step_rewritten_as_done_keeps_both_answering_one_call(store_url: str, transcript: Path) -> None:
    first, _ = agy_turns()
    lines = [step for step, _ in first]
    write_jsonl(transcript, lines)
    silent(hook("antigravity", agy_payload(transcript, **STOP), store_url))
    done = "Created At: 2026-11-30T20:02:12Z\nCompleted At: 2026-11-30T20:02:29Z\nThe command completed successfully."
    rewritten = [{**line, "status": "DONE", "content": done} if line["status"] == "RUNNING" else line for line in lines]
    write_jsonl(transcript, rewritten)
    silent(hook("antigravity", agy_payload(transcript, **STOP), store_url))
    messages = stored(store_url, "antigravity", AGY_CONVERSATION)
    runs = [m for m in messages if m.metadata.get("step_type") == "RUN_COMMAND"]
    assert [(m.metadata["status"], m.content) for m in runs] == [("RUNNING", first[6][0]["content"]), ("DONE", done)]
    assert runs[0].tool_call_id == runs[1].tool_call_id is not None
    silent(hook("antigravity", agy_payload(transcript, **STOP), store_url))
    assert len(stored(store_url, "antigravity", AGY_CONVERSATION)) == len(messages)


def test_the_stop_asks_for_a_follow_up_and_the_events_are_told_by_their_fields(tmp_path: Path) -> None:
    path = tmp_path / "transcript.jsonl"
    stop = request(agy_payload(path, **STOP))
    assert (stop.event, stop.follow_up_s, stop.thread_id, stop.project) == (
        "Stop",
        FOLLOW_UP_S,
        AGY_CONVERSATION,
        "suivi-ca",
    )
    assert [item.path for item in stop.transcripts] == [path]
    invocation = request(agy_payload(path, **PRE_INVOCATION))
    assert (invocation.event, invocation.follow_up_s) == ("Invocation", 0.0)
    tool = request(agy_payload(path, stepIdx=4, toolCall={"name": "view_file", "args": {}}))
    assert tool.event == "PreToolUse"


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ({"transcriptPath": "/tmp/t.jsonl", **STOP}, "missing field 'conversationId'"),
        ({"conversationId": "c-1", **STOP}, "missing field 'transcriptPath'"),
    ],
)
def test_a_payload_without_its_conversation_exits_1(tmp_path: Path, payload: dict[str, Any], reason: str) -> None:
    result = hook("antigravity", payload, f"sqlite:///{tmp_path / 'm.db'}")
    assert (result.exit_code, result.stdout) == (1, "")
    assert reason in result.stderr and result.stderr.count("\n") == 1


# -- install: the IDE's own mcp_config.json ---------------------------------------------------


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("home", "data", "project"):
        (tmp_path / name).mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path / "project")
    return tmp_path / "home"


def palimpsest(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_install_wires_the_ide_where_it_keeps_its_data_and_uninstall_gives_it_back(home: Path) -> None:
    ide = home / ".gemini" / "antigravity"
    ide.mkdir(parents=True)
    theirs = '{\n  "mcpServers": {\n    "github": {"command": "gh-mcp"}\n  }\n}\n'
    (ide / "mcp_config.json").write_text(theirs, encoding="utf-8")
    palimpsest("install", "antigravity")
    wired = json.loads((ide / "mcp_config.json").read_text(encoding="utf-8"))
    assert set(wired["mcpServers"]) == {"github", "palimpsest"}
    assert wired["mcpServers"]["palimpsest"]["args"][:3] == ["serve", "--partition", "antigravity"]
    hooks = json.loads((home / ".gemini" / "config" / "hooks.json").read_text(encoding="utf-8"))
    assert sorted(hooks["palimpsest"]) == ["PreInvocation", "Stop"]
    palimpsest("uninstall", "antigravity")
    assert (ide / "mcp_config.json").read_text(encoding="utf-8") == theirs


def test_install_leaves_the_ide_alone_where_it_is_not_installed(home: Path) -> None:
    palimpsest("install", "antigravity")
    assert not (home / ".gemini" / "antigravity").exists()
    assert (home / ".gemini" / "config" / "mcp_config.json").is_file()
