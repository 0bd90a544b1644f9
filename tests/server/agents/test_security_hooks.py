"""Hooks on hostile paths and input (issue 30, part 4), through a real ``palimpsest hook`` process.

A hook reads what an agent's payload names, so ``transcript_path`` may be ``/dev/zero``
(a read without end: memory grew to gigabytes), a FIFO (a read that never returned) or
a directory, and stdin or a transcript line may be JSON nested 100,000 deep (a
traceback). Each must end in one ``error:`` line on stderr and exit 1 (never 2: Claude
Code reads 2 as "block"), storing nothing. A last line still being written must be
left out of the stored position, so the call that finds it finished parses that line
alone; and one call reads at most ``READ_BYTES``, the next going on from where it
stopped. The subprocess timeout only keeps a hanging hook from hanging the suite; the
assertions are on what the hook did.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from palimpsest.graph_schema.backends import open_store
from palimpsest.graph_schema.errors import NotFound
from palimpsest.graph_schema.models import ReadPosition
from palimpsest.server.agents.registry import NAMES
from palimpsest.server.feeds.hooks import READ_BYTES
from palimpsest.server.feeds.transcripts import MAX_LINE_BYTES, ReadState, read_lines
from tests.support.transcripts import PROJECT_CWD, append_jsonl, claude_line, codex_lines

pytestmark = pytest.mark.slow

SESSION = "5d2f7a10-3c4b-4e8d-9a6f-0b1c2d3e4f50"
CODEX_SESSION = "019e3b52-6d4c-7e31-b2a5-4f0c9d8e7b6a"
SCRIPT = Path(sys.executable).parent / "palimpsest"
#: Far above what a hook takes: a hook blocked on a FIFO fails the test instead of hanging it.
HANG_S = 60
#: Address space a hook gets under ``bounded_memory``: a few times what it needs, far from gigabytes.
MEMORY_BYTES = 1 << 30
DEEP = "[" * 100_000 + "]" * 100_000


def bounded_memory() -> None:
    """Run in the child before ``exec``: an address space of ``MEMORY_BYTES``."""
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))


def hook(
    agent: str, stdin: str | bytes, url: str, *args: str, preexec: Callable[[], None] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """``palimpsest hook AGENT`` as the agent starts it: stdin in, no follow-up left behind."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PALIMPSEST_")}
    env["PALIMPSEST_HOOK_FOLLOW_UP"] = "off"
    # The refusals checked here are the in-process path's; a queued payload's are logged by its drainer.
    env["PALIMPSEST_HOOK_QUEUE"] = "off"
    data = stdin.encode("utf-8") if isinstance(stdin, str) else stdin
    return subprocess.run(
        [str(SCRIPT), "hook", agent, "--store", url, *args],
        input=data,
        capture_output=True,
        timeout=HANG_S,
        env=env,
        preexec_fn=preexec,
        check=False,
    )


def claude_payload(transcript: Path | str, event: str = "Stop") -> str:
    return json.dumps(
        {"session_id": SESSION, "transcript_path": str(transcript), "cwd": PROJECT_CWD, "hook_event_name": event}
    )


def codex_payload(rollout: Path) -> str:
    return json.dumps(
        {"session_id": CODEX_SESSION, "transcript_path": str(rollout), "cwd": PROJECT_CWD, "hook_event_name": "Stop"}
    )


def refused(result: subprocess.CompletedProcess[bytes], *phrases: str) -> str:
    """The one error line of a hook that refused its input (exit 1, nothing on stdout)."""
    stderr = result.stderr.decode("utf-8", errors="replace")
    assert (result.returncode, result.stdout) == (1, b""), stderr
    assert "Traceback" not in stderr and stderr.startswith("error: ") and stderr.count("\n") == 1, stderr
    for phrase in phrases:
        assert phrase in stderr, stderr
    return stderr


def in_store(url: str, partition: str, thread: str) -> tuple[list[str], list[ReadPosition]]:
    """The thread's stored message ids, and the read positions kept for it."""

    async def read() -> tuple[list[str], list[ReadPosition]]:
        store = open_store(url)
        await store.initialize()
        try:
            positions = await store.read_positions(partition, thread)
            try:
                messages = await store.get_messages(partition, thread)
            except NotFound:
                return [], positions
            return [str(m.source_id) for m in messages], positions
        finally:
            await store.close()

    return asyncio.run(read())


def line_bytes(record: dict[str, Any]) -> bytes:
    return (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")


def user_line(uuid: str, text: str, second: int) -> dict[str, Any]:
    return claude_line("user", uuid, text, second, session=SESSION)


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'memory.db'}"


def test_dev_zero_is_refused_before_a_byte_is_read(tmp_path: Path, url: str) -> None:
    """Under a 1 GiB address space: the endless read it was would end in MemoryError, not this line."""
    alias = tmp_path / "transcript.jsonl"
    alias.symlink_to("/dev/zero")
    for path in (Path("/dev/zero"), alias):
        result = hook("claude", claude_payload(path), url, preexec=bounded_memory)
        refused(result, str(path), "a character device, not a regular file")
    assert in_store(url, "claude", SESSION) == ([], [])


def test_a_fifo_is_refused_without_blocking(tmp_path: Path, url: str) -> None:
    """Nobody ever opens the FIFO's other end: a hook that opened it would wait forever."""
    fifo = tmp_path / "transcript.jsonl"
    os.mkfifo(fifo)
    refused(hook("claude", claude_payload(fifo), url), str(fifo), "a FIFO, not a regular file")
    assert in_store(url, "claude", SESSION) == ([], [])


def test_a_directory_is_refused_and_a_symlink_to_a_transcript_is_read(tmp_path: Path, url: str) -> None:
    refused(hook("claude", claude_payload(tmp_path), url), str(tmp_path), "a directory, not a regular file")
    real = append_jsonl(tmp_path / "real.jsonl", [user_line("u1", "first prompt", 1)])
    alias = tmp_path / f"{SESSION}.jsonl"
    alias.symlink_to(real)
    result = hook("claude", claude_payload(alias), url)
    assert (result.returncode, result.stderr) == (0, b"")
    ids, positions = in_store(url, "claude", SESSION)
    assert ids == ["u1"]
    assert [(p.path, p.offset) for p in positions] == [(str(alias), real.stat().st_size)]


@pytest.mark.parametrize("agent", sorted(NAMES))
def test_json_nested_100000_deep_on_stdin_is_one_line(agent: str, url: str) -> None:
    refused(hook(agent, DEEP, url), "hook input on stdin is not JSON (nested too deep)")


MALFORMED_STDIN: list[tuple[str, bytes, str]] = [
    ("not JSON", b"session_id=abc", "is not JSON (Expecting value at column 1)"),
    ("not an object", b'["session_id"]', "must be a JSON object"),
    ("invalid UTF-8", b'{"session_id": "caf\xc3", "transcript_path": "/tmp/x"}', "not valid UTF-8 (byte 0xc3"),
    ("a 5,000-digit integer", b'{"session_id": ' + b"7" * 5000 + b"}", "an integer of over 4300 digits"),
    ("a NUL byte in the path", b'{"session_id": "s", "transcript_path": "/tmp/a\\u0000b"}', "NUL byte"),
    ("a lone surrogate in the path", b'{"session_id": "s", "transcript_path": "/tmp/\\udcff"}', "lone surrogate"),
]


@pytest.mark.parametrize(("name", "stdin", "phrase"), MALFORMED_STDIN, ids=[name for name, _, _ in MALFORMED_STDIN])
def test_malformed_stdin_is_one_line(name: str, stdin: bytes, phrase: str, url: str) -> None:
    refused(hook("claude", stdin, url), phrase)


BAD_LINES: list[tuple[str, bytes, str]] = [
    ("nested 100,000 deep", b'{"type": "user", "message": ' + DEEP.encode() + b"}", "malformed JSON (nested too deep)"),
    (
        "a 5,000-digit integer",
        b'{"type": "user", "n": ' + b"9" * 5000 + b"}",
        "malformed JSON (an integer of over 4300 digits)",
    ),
    ("invalid UTF-8", b'{"type": "user", "x": "\xff"}', "not valid UTF-8 (byte 0xff"),
]


@pytest.mark.parametrize(("name", "bad", "phrase"), BAD_LINES, ids=[name for name, _, _ in BAD_LINES])
def test_a_hostile_transcript_line_is_one_line_naming_it(
    name: str, bad: bytes, phrase: str, tmp_path: Path, url: str
) -> None:
    transcript = tmp_path / f"{SESSION}.jsonl"
    transcript.write_bytes(line_bytes(user_line("u1", "fine", 1)) + bad + b"\n")
    refused(hook("claude", claude_payload(transcript), url), f"{transcript}:2: {phrase}")
    assert in_store(url, "claude", SESSION) == ([], [])


def test_claude_partial_last_line_waits_and_is_parsed_alone_once_finished(tmp_path: Path, url: str) -> None:
    transcript = tmp_path / f"{SESSION}.jsonl"
    whole = [line_bytes(user_line("u1", "first", 1)), line_bytes(user_line("u2", "second", 2))]
    last = line_bytes(user_line("u3", "third", 3))
    transcript.write_bytes(b"".join(whole) + last[:50])
    assert hook("claude", claude_payload(transcript), url).returncode == 0
    ids, positions = in_store(url, "claude", SESSION)
    assert ids == ["u1", "u2"]
    assert [(p.offset, p.line) for p in positions] == [(len(b"".join(whole)), 3)]

    with transcript.open("ab") as handle:
        handle.write(last[50:])
    finished = hook("claude", claude_payload(transcript), url, "--json")
    assert finished.returncode == 0, finished.stderr
    report = json.loads(finished.stdout)
    # One message parsed: the finished line; the two before it were not read again.
    assert (report["messages"], report["appended"]) == (1, 1)
    ids, positions = in_store(url, "claude", SESSION)
    assert ids == ["u1", "u2", "u3"]
    assert [(p.offset, p.line) for p in positions] == [(transcript.stat().st_size, 4)]


def test_a_whole_last_line_without_newline_is_stored_but_not_passed(tmp_path: Path, url: str) -> None:
    """A finished line lacking only its newline is stored; the position still stops before it."""
    transcript = tmp_path / f"{SESSION}.jsonl"
    first = line_bytes(user_line("u1", "first", 1))
    transcript.write_bytes(first + line_bytes(user_line("u2", "second", 2)).rstrip(b"\n"))
    assert hook("claude", claude_payload(transcript), url).returncode == 0
    ids, positions = in_store(url, "claude", SESSION)
    assert ids == ["u1", "u2"]
    assert [(p.offset, p.line) for p in positions] == [(len(first), 2)]

    with transcript.open("ab") as handle:
        handle.write(b"\n" + line_bytes(user_line("u3", "third", 3)))
    report = json.loads(hook("claude", claude_payload(transcript), url, "--json").stdout)
    # u2 parsed again (its line is the one not passed), u1 not; only u3 is new.
    assert (report["messages"], report["appended"]) == (2, 1)
    assert in_store(url, "claude", SESSION)[0] == ["u1", "u2", "u3"]


def test_codex_partial_last_line_waits_and_is_parsed_alone_once_finished(tmp_path: Path, url: str) -> None:
    rollout = tmp_path / f"rollout-2026-11-30T10-00-00-{CODEX_SESSION}.jsonl"
    first_turn = b"".join(line_bytes(line) for line in codex_lines(CODEX_SESSION, 0))
    second = [line_bytes(line) for line in codex_lines(CODEX_SESSION, 1)]
    answer = second[-2]  # the assistant's "Turn 1 done." item (the last line is its UI echo)
    assert b"Turn 1 done." in answer and b"response_item" in answer
    done = first_turn + b"".join(second[:-2])
    rollout.write_bytes(done + answer[:-30])
    assert hook("codex", codex_payload(rollout), url).returncode == 0
    ids, positions = in_store(url, "codex", CODEX_SESSION)
    lines_done = done.count(b"\n")
    assert [(p.offset, p.line) for p in positions] == [(len(done), lines_done + 1)]
    assert f"line-{lines_done + 1}" not in ids

    with rollout.open("ab") as handle:
        handle.write(answer[-30:] + second[-1])
    finished = hook("codex", codex_payload(rollout), url, "--json")
    assert finished.returncode == 0, finished.stderr
    report = json.loads(finished.stdout)
    # The finished answer alone (its UI echo is bookkeeping): nothing before it parsed again.
    assert (report["messages"], report["appended"], report["skipped"]) == (1, 1, 1)
    ids, positions = in_store(url, "codex", CODEX_SESSION)
    assert ids.count(f"line-{lines_done + 1}") == 1 and ids[-1] == f"line-{lines_done + 1}"
    assert [(p.offset, p.line) for p in positions] == [(rollout.stat().st_size, lines_done + 3)]


def test_one_call_reads_at_most_read_bytes_and_the_next_goes_on(tmp_path: Path, url: str) -> None:
    """Two bookkeeping lines of 40 MiB: the second does not fit in the first call's 64 MiB.

    A call also stops taking lines after ``READ_SECONDS``, which a loaded machine can reach
    first: so each call is checked to stay within the byte bound and to move on, and the calls
    together to store every message once, in order.
    """
    transcript = tmp_path / f"{SESSION}.jsonl"
    big = 40 * 1024 * 1024
    assert 2 * big > READ_BYTES > big
    first = line_bytes(user_line("u1", "before", 1))
    filler = line_bytes({"type": "file-history-snapshot", "messageId": "m", "snapshot": "x" * big})
    transcript.write_bytes(first + filler + filler + line_bytes(user_line("u4", "after", 4)))
    offsets = [0]
    for _ in range(6):  # at least one line a call: five lines at most
        assert hook("claude", claude_payload(transcript), url).returncode == 0
        ids, positions = in_store(url, "claude", SESSION)
        [position] = positions
        assert offsets[-1] < position.offset <= offsets[-1] + READ_BYTES  # it moved on, within the bound
        offsets.append(position.offset)
        if position.offset == transcript.stat().st_size:
            break
    # The file did not change, yet later calls read on: a read stopped at the bound, not the end.
    assert len(offsets) > 2 and offsets[1] <= len(first) + len(filler)
    assert ids == ["u1", "u4"]
    assert (position.offset, position.line) == (transcript.stat().st_size, 5)


def test_a_line_that_never_ends_is_refused_in_bounded_memory(tmp_path: Path, url: str) -> None:
    """A sparse file of 2 GiB without a newline: one line's bound is read, then refused."""
    transcript = tmp_path / f"{SESSION}.jsonl"
    with transcript.open("wb") as handle:
        handle.truncate(2 << 30)
    result = hook("claude", claude_payload(transcript), url, preexec=bounded_memory)
    refused(result, f"{transcript}:1: the line does not end within {MAX_LINE_BYTES} bytes")
    assert in_store(url, "claude", SESSION) == ([], [])


def test_a_transcript_read_whole_over_the_bound_is_refused(tmp_path: Path, url: str) -> None:
    """Windsurf's log is read from its start at every call: past the bound it could never be read to its end."""
    transcript = tmp_path / "windsurf.jsonl"
    step = line_bytes({"type": "checkpoint", "status": "done", "blob": "y" * (40 * 1024 * 1024)})
    transcript.write_bytes(step + step)
    payload = {
        "agent_action_name": "post_cascade_response_with_transcript",
        "trajectory_id": "traj-1",
        "execution_id": "exec-1",
        "cwd": str(tmp_path),
        "tool_info": {"transcript_path": str(transcript)},
    }
    refused(hook("windsurf", json.dumps(payload), url), str(transcript), "read whole at every call")
    assert in_store(url, "windsurf", "traj-1") == ([], [])


def test_a_read_past_its_deadline_takes_no_line_and_keeps_its_position(tmp_path: Path) -> None:
    transcript = append_jsonl(tmp_path / "t.jsonl", [user_line("u1", "a", 1), user_line("u2", "b", 2)])
    state = ReadState(limit=READ_BYTES, deadline=time.monotonic() - 1)
    assert list(read_lines(transcript, state=state)) == []
    assert (state.cut, state.position.offset, state.position.line) == ("time", 0, 1)
