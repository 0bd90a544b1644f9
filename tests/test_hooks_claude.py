"""``palimpsest hook claude`` on a recorded Claude Code session, replayed turn by turn through the real CLI.

What a hook promises, checked on content: the session's messages stored once and in
order (subagents after the turn that started them), only new bytes read, a
half-written last line left for the next call, two processes racing on one
transcript storing each message once, bad input changing nothing, and memory handed
back on ``SessionStart`` in Claude Code's shape.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from typer.testing import CliRunner, Result

from palimpsest.graph_schema.backends import open_store
from palimpsest.graph_schema.models import Message
from palimpsest.server.cli.main import app
from tests.transcripts import CLAUDE_EXPECTED, PNG, PROJECT_CWD, append_jsonl, claude_line, claude_turns

SESSION = "3c07f08f-e544-47b9-898a-f169f651788c"
CLEAN_ENV: dict[str, str | None] = {"PALIMPSEST_STORE": None, "PALIMPSEST_PARTITION": None}


def payload(transcript: Path, event: str = "Stop", **extra: Any) -> str:
    """What Claude Code writes on a hook's stdin."""
    return json.dumps(
        {
            "session_id": SESSION,
            "transcript_path": str(transcript),
            "cwd": PROJECT_CWD,
            "permission_mode": "default",
            "hook_event_name": event,
            **extra,
        }
    )


def hook(stdin: str, store_url: str, *args: str) -> Result:
    return CliRunner().invoke(app, ["hook", "claude", "--store", store_url, *args], input=stdin, env=CLEAN_ENV)


def stored(store_url: str, partition: str = "claude", thread: str = SESSION) -> list[Message]:
    async def read() -> list[Message]:
        store = open_store(store_url)
        await store.initialize()
        try:
            return await store.get_messages(partition, thread)
        finally:
            await store.close()

    return asyncio.run(read())


def write_turn(folder: Path, turn: dict[str, list[dict[str, Any]]]) -> Path:
    """Append one turn's lines to the session's files; the transcript's path."""
    transcript = folder / f"{SESSION}.jsonl"
    for name, lines in turn.items():
        append_jsonl(transcript if name == "main" else folder / SESSION / name, lines)
    return transcript


def test_replayed_session_is_stored_once_in_order(store_url: str, tmp_path: Path) -> None:
    turns = claude_turns(SESSION)
    transcript = tmp_path / f"{SESSION}.jsonl"
    start = hook(payload(transcript, "SessionStart", source="startup"), store_url)
    assert start.exit_code == 0, start.output
    assert json.loads(start.stdout) == {
        "hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": ""}
    }
    counts = []
    for turn in turns:
        write_turn(tmp_path, turn)
        done = hook(payload(transcript), store_url)
        assert (done.exit_code, done.stdout, done.stderr) == (0, "", "")
        counts.append(len(stored(store_url)))
    assert counts == [10, 12, 15]
    messages = stored(store_url)
    assert [(m.source_id, m.role.value, m.content) for m in messages] == CLAUDE_EXPECTED
    assert [m.seq for m in messages] == list(range(len(CLAUDE_EXPECTED)))
    by_id = {m.source_id: m for m in messages}
    # Non-text blocks kept whole; the workflow agent's message is in the session's thread.
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}
    assert by_id["u4"].metadata["blocks"] == [image]
    assert by_id["u3"].metadata["blocks"] == [{"type": "tool_reference", "tool_name": "Grep"}]
    assert by_id["s2"].metadata["workflow_agent"] == "agent-a1" and by_id["s2"].metadata["sidechain"] is True
    assert by_id["u5"].metadata["compact_summary"] is True

    # Every event again, in any order: nothing new.
    for event in ("PreCompact", "SessionEnd", "Stop"):
        assert hook(payload(transcript, event), store_url).exit_code == 0
    assert len(stored(store_url)) == len(CLAUDE_EXPECTED)


def test_only_new_bytes_are_read(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    transcript = write_turn(tmp_path, claude_turns(SESSION)[0])
    assert hook(payload(transcript), url).exit_code == 0
    # The report counts the lines read: the new one alone, not the turn read before.
    append_jsonl(transcript, [claude_line("user", "u9", "One more thing", 50, session=SESSION)])
    result = hook(payload(transcript), url, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["messages"], report["appended"], report["skipped"]) == (1, 1, 0)


def test_half_written_last_line_waits_for_the_next_call(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    transcript = tmp_path / f"{SESSION}.jsonl"
    whole = json.dumps(claude_line("user", "u2", "second prompt", 5, session=SESSION))
    append_jsonl(transcript, [claude_line("user", "u1", "first prompt", 1, session=SESSION)], tail=whole[:40])
    assert hook(payload(transcript), url).exit_code == 0
    assert [m.source_id for m in stored(url)] == ["u1"]
    with transcript.open("a", encoding="utf-8") as handle:
        handle.write(whole[40:] + "\n")
    assert hook(payload(transcript), url).exit_code == 0
    assert [(m.source_id, m.content) for m in stored(url)] == [("u1", "first prompt"), ("u2", "second prompt")]


def test_two_hook_processes_racing_store_each_message_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'race.db'}"
    transcript = write_turn(tmp_path, claude_turns(SESSION)[0])
    script = Path(sys.executable).parent / "palimpsest"
    env = {key: value for key, value in os.environ.items() if key not in CLEAN_ENV}
    racers = [
        subprocess.Popen(
            [str(script), "hook", "claude", "--store", url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(2)
    ]
    outputs = [racer.communicate(payload(transcript), timeout=120) for racer in racers]
    assert [racer.returncode for racer in racers] == [0, 0], outputs
    assert [(m.source_id, m.role.value, m.content) for m in stored(url)] == CLAUDE_EXPECTED[:10]


def test_bad_input_is_one_line_exit_1_and_changes_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    transcript = write_turn(tmp_path, claude_turns(SESSION)[0])
    assert hook(payload(transcript), url).exit_code == 0
    before = [(m.source_id, m.content) for m in stored(url)]
    append_jsonl(transcript, [claude_line("user", "u7", "fine", 40, session=SESSION)])
    with transcript.open("a", encoding="utf-8") as handle:
        handle.write('{"type": "user", "broken\n')
    for stdin in ("{", '{"session_id": "x"}', payload(transcript)):
        result = hook(stdin, url)
        assert (result.exit_code, result.stdout) == (1, "")
        assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    assert [(m.source_id, m.content) for m in stored(url)] == before


def test_session_start_hands_back_memory_in_claude_codes_shape(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    transcript = write_turn(tmp_path, claude_turns(SESSION)[0])
    assert hook(payload(transcript), url).exit_code == 0
    other = tmp_path / "next.jsonl"
    new = CliRunner().invoke(
        app,
        ["hook", "claude", "--store", url],
        input=json.dumps(
            {
                "session_id": "next-session",
                "transcript_path": str(other),
                "cwd": PROJECT_CWD,
                "hook_event_name": "SessionStart",
                "source": "startup",
            }
        ),
        env=CLEAN_ENV,
    )
    assert new.exit_code == 0, new.output
    context = json.loads(new.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "billing-api" in context and SESSION in context and "- Asked:\n  1. Add JWT auth" in context
    resumed = hook(payload(transcript, "SessionStart", source="compact"), url)
    text = json.loads(resumed.stdout)["hookSpecificOutput"]["additionalContext"]
    assert text.startswith("# Context of thread") or "Recent messages" in text
    assert "Done: JWT auth added." in text


def test_the_hook_path_imports_no_heavy_library(tmp_path: Path) -> None:
    # It runs after every turn: no LLM client, MCP server, numpy, rich, search stack, the
    # other commands, the CLI framework or pydantic-settings on its way.
    transcript = write_turn(tmp_path, claude_turns(SESSION)[0])
    heavy = (
        "openai",
        "fastmcp",
        "numpy",
        "rich",
        "regex",
        "palimpsest.server.retrieval.grep",
        "palimpsest.server.cli.main",
        "palimpsest.scheduler.portability",
        "typer",
        "pydantic_settings",
    )
    url = f"sqlite:///{tmp_path / 'm.db'}"
    code = (
        "import sys\n"
        "from palimpsest.server.cli.launch import main\n"
        f"sys.argv = ['palimpsest', 'hook', 'claude', '--store', {url!r}]\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
        f"print(sorted(name for name in {heavy!r} if name in sys.modules))\n"
    )
    env = {key: value for key, value in os.environ.items() if key not in CLEAN_ENV}
    done = subprocess.run(
        [sys.executable, "-c", code], input=payload(transcript), capture_output=True, text=True, env=env, timeout=120
    )
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert done.stdout == "[]\n"
    assert len(stored(url)) == 10


def test_a_hook_usage_error_exits_1_with_one_line_never_2(tmp_path: Path) -> None:
    # Exit code 2 tells an agent to block; a flag this version does not know must not.
    transcript = write_turn(tmp_path, claude_turns(SESSION)[0])
    url = f"sqlite:///{tmp_path / 'm.db'}"
    code = (
        "import sys\nfrom palimpsest.server.cli.launch import main\nsys.argv = ['palimpsest', *sys.argv[1:]]\nmain()\n"
    )
    env = {key: value for key, value in os.environ.items() if key not in CLEAN_ENV}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", code, *args], input=payload(transcript), capture_output=True, text=True, env=env
        )

    unknown_flag = run("hook", "claude", "--store", url, "--from-a-newer-version")
    assert unknown_flag.returncode == 1 and unknown_flag.stdout == ""
    assert unknown_flag.stderr == "error: No such option: --from-a-newer-version\n"
    unknown_agent = run("hook", "vim", "--store", url)
    assert (unknown_agent.returncode, unknown_agent.stderr) == (1, "error: No such command 'vim'.\n")
    assert not (tmp_path / "m.db").exists()
    stored_turn = run("hook", "claude", "--store", url)
    assert (stored_turn.returncode, stored_turn.stderr, stored_turn.stdout) == (0, "", "")
    assert len(stored(url)) == 10
