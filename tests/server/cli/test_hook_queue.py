"""The queued hook, the default: a turn is queued on the store's spool and a drainer stores it.

Real console-script processes, a real SQLite store, the real detached drainer. A test
that must see a payload sit in the queue holds the spool's drain lock itself, as a
running drainer would: the hook then starts none, and nothing is stored until the test
lets go and drains.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from palimpsest.graph_schema.backends import open_store
from palimpsest.graph_schema.errors import NotFound
from palimpsest.server.feeds.hooks import READ_BYTES
from palimpsest.server.feeds.spool import STDIN_BYTES, Spool, appending, pending, queue_enabled, spool_for
from palimpsest.server.settings import Settings
from tests.support.waiting import wait_until

SCRIPT = Path(sys.executable).parent / "palimpsest"
CWD = "/home/ada/src/billing-api"
#: The console script's entry point, run as ``python -c`` so that ``-X importtime`` applies.
LAUNCH = "import sys; sys.argv[0] = 'palimpsest'; from palimpsest.server.cli.launch import main; main()"
#: A guard on waits for the detached drainer, never a bound on its speed.
DRAIN_WAIT_S = 120.0


@pytest.fixture
def queued(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    """The environment of a hook that queues: the default, its spool under ``tmp_path``."""
    monkeypatch.delenv("PALIMPSEST_HOOK_QUEUE")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    env = {name: value for name, value in os.environ.items() if not name.startswith("PALIMPSEST_")}
    env.update(PALIMPSEST_HOOK_FOLLOW_UP="off", PALIMPSEST_EMBEDDER="none", XDG_DATA_HOME=str(tmp_path / "data"))
    return env


def record(kind: str, session: str, uuid: str, text: str) -> str:
    """One Claude Code transcript line."""
    message = {"role": kind, "content": [{"type": "text", "text": text}]}
    value = {"type": kind, "uuid": uuid, "sessionId": session, "cwd": CWD, "message": message}
    return json.dumps({**value, "timestamp": "2026-11-30T09:00:00.000Z", "parentUuid": None}) + "\n"


def add_turn(transcript: Path, session: str, number: int) -> None:
    """Append a prompt and its answer, text that names the session and the turn."""
    with transcript.open("a", encoding="utf-8") as handle:
        handle.write(record("user", session, f"{session}-u{number}", f"prompt {number} of {session}"))
        handle.write(record("assistant", session, f"{session}-a{number}", f"answer {number} of {session}"))


def stop_payload(session: str, transcript: Path, event: str = "Stop") -> str:
    return json.dumps({"session_id": session, "transcript_path": str(transcript), "cwd": CWD, "hook_event_name": event})


def hook(stdin: str, url: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), "hook", "claude", "--store", url],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def contents(url: str, session: str, partition: str = "claude") -> list[str]:
    """The thread's messages' text, in order; empty when the thread does not exist."""

    async def read() -> list[str]:
        store = open_store(url)
        await store.initialize()
        try:
            return [message.content for message in await store.get_messages(partition, session)]
        except NotFound:
            return []
        finally:
            await store.close()

    return asyncio.run(read())


def expected(session: str, turns: int) -> list[str]:
    return [
        text for number in range(turns) for text in (f"prompt {number} of {session}", f"answer {number} of {session}")
    ]


@contextmanager
def drain_lock_held(spool: Spool) -> Iterator[None]:
    """Hold the spool's drain lock, as a running drainer does: hooks queue and start none."""
    os.makedirs(spool.folder, exist_ok=True)
    handle = os.open(spool.drain, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)


def drained(spool: Spool) -> None:
    """Wait for the queue to be empty and no drainer to hold it."""

    def idle() -> bool | None:
        handle = os.open(spool.drain, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX)
            return True if pending(spool) == 0 else None
        finally:
            os.close(handle)

    wait_until(idle, DRAIN_WAIT_S, "the hook spool was never drained")


def drain(url: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run the drainer in the foreground, as a hook starts it."""
    return subprocess.run(
        [sys.executable, "-m", "palimpsest.server.cli.hook_drain", url],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


def test_the_hook_takes_on_stdin_what_the_runner_reads() -> None:
    assert STDIN_BYTES == READ_BYTES


def test_a_stop_is_queued_and_the_drainer_stores_it(queued: dict[str, str], tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    spool = spool_for(url)
    transcript = tmp_path / "s1.jsonl"
    add_turn(transcript, "s1", 0)
    with drain_lock_held(spool):
        secrets = {"NEO4J_PASSWORD": "s3cret-neo4j", "PALIMPSEST_TOKEN": "s3cret-token"}
        done = hook(stop_payload("s1", transcript), url, {**queued, **secrets, "PALIMPSEST_PARTITION": "work"})
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
        [line] = Path(spool.queue).read_text(encoding="utf-8").splitlines()
    value: dict[str, Any] = json.loads(line)
    assert value["agent"] == "claude" and value["store"] == url and value["cwd"] == os.getcwd()
    assert json.loads(value["payload"])["session_id"] == "s1"
    assert value["env"]["XDG_DATA_HOME"] == queued["XDG_DATA_HOME"] and value["env"]["PALIMPSEST_PARTITION"] == "work"
    assert "s3cret" not in line
    assert contents(url, "s1", "work") == []
    # The drainer runs the payload with the hook's partition, not its own environment's.
    assert drain(url, queued).returncode == 0
    assert contents(url, "s1", "work") == expected("s1", 1) and contents(url, "s1") == []
    assert pending(spool) == 0


def test_the_detached_drainer_stores_a_queued_stop(queued: dict[str, str], tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    transcript = tmp_path / "s1.jsonl"
    for number in range(2):
        add_turn(transcript, "s1", number)
        assert hook(stop_payload("s1", transcript), url, queued).returncode == 0
    drained(spool_for(url))
    assert contents(url, "s1") == expected("s1", 2)


def test_the_fast_path_imports_no_pydantic_asyncio_or_store(queued: dict[str, str], tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    transcript = tmp_path / "s1.jsonl"
    add_turn(transcript, "s1", 0)
    with drain_lock_held(spool_for(url)):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", LAUNCH, "hook", "claude", "--store", url],
            input=stop_payload("s1", transcript),
            capture_output=True,
            text=True,
            env=queued,
            timeout=120,
            check=False,
        )
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if "|" in line}
    assert "palimpsest.server.feeds.spool" in imported, done.stderr[-2000:]
    heavy = {"pydantic", "asyncio", "palimpsest.graph_schema.store", "palimpsest.graph_schema.models"}
    # Nor argparse (with shutil and gettext) nor OpenSSL (``_hashlib``): a fifth and a tenth of the queued path.
    assert not (heavy | {"argparse", "_hashlib"}) & imported
    assert pending(spool_for(url)) == 1


def test_a_spool_is_named_as_before_so_turns_queued_by_an_older_version_are_drained(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    assert spool_for(url).key == hashlib.sha256(url.encode("utf-8")).hexdigest()[:16]


def test_concurrent_hooks_lose_and_duplicate_nothing(queued: dict[str, str], tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    sessions = [f"c{number}" for number in range(8)]
    for session in sessions:
        add_turn(tmp_path / f"{session}.jsonl", session, 0)
        add_turn(tmp_path / f"{session}.jsonl", session, 1)
    calls = [session for session in sessions for _ in range(2)]
    running = [
        subprocess.Popen(
            [str(SCRIPT), "hook", "claude", "--store", url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=queued,
        )
        for _ in calls
    ]
    for process, session in zip(running, calls, strict=True):
        out, err = process.communicate(stop_payload(session, tmp_path / f"{session}.jsonl"), timeout=120)
        assert (process.returncode, out, err) == (0, "", "")
    drained(spool_for(url))
    for session in sessions:
        assert contents(url, session) == expected(session, 2)


def test_a_drainer_killed_midway_loses_and_duplicates_nothing(queued: dict[str, str], tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    spool = spool_for(url)
    sessions = [f"k{number}" for number in range(30)]
    with drain_lock_held(spool):
        for session in sessions:
            add_turn(tmp_path / f"{session}.jsonl", session, 0)
            assert hook(stop_payload(session, tmp_path / f"{session}.jsonl"), url, queued).returncode == 0
    assert pending(spool) == len(sessions)
    drainer = subprocess.Popen(
        [sys.executable, "-m", "palimpsest.server.cli.hook_drain", url],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=queued,
    )
    wait_until(
        lambda: True if pending(spool) < len(sessions) else None,
        DRAIN_WAIT_S,
        "the drainer never removed a payload",
        every=0.005,
    )
    # Holding the append lock stops the drainer at its next step (removing a payload it
    # stored, or taking the next): it dies there, in the middle of the queue.
    with appending(spool):
        drainer.send_signal(signal.SIGKILL)
        drainer.wait(timeout=60)
        left = pending(spool)
    assert 0 < left < len(sessions)
    assert drain(url, queued).returncode == 0
    assert pending(spool) == 0
    for session in sessions:
        assert contents(url, session) == expected(session, 1)


def test_a_session_start_sees_the_turns_queued_before_it(queued: dict[str, str], tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    spool = spool_for(url)
    transcript = tmp_path / "first.jsonl"
    with drain_lock_held(spool):
        for number in range(2):
            add_turn(transcript, "first", number)
            assert hook(stop_payload("first", transcript), url, queued).returncode == 0
    assert pending(spool) == 2 and contents(url, "first") == []
    start = hook(stop_payload("second", tmp_path / "second.jsonl", event="SessionStart"), url, queued)
    assert start.returncode == 0, start.stderr
    context = json.loads(start.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "first" in context and "prompt 0 of first" in context, context
    assert pending(spool) == 0 and contents(url, "first") == expected("first", 2)


def test_a_bad_payload_queued_is_reported_and_blocks_nothing(queued: dict[str, str], tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    spool = spool_for(url)
    transcript = tmp_path / "s1.jsonl"
    add_turn(transcript, "s1", 0)
    with drain_lock_held(spool):
        missing = hook(json.dumps({"transcript_path": str(transcript), "hook_event_name": "Stop"}), url, queued)
        assert (missing.returncode, missing.stderr) == (0, "")
        assert hook(stop_payload("s1", transcript), url, queued).returncode == 0
    assert drain(url, queued).returncode == 0
    assert contents(url, "s1") == expected("s1", 1) and pending(spool) == 0
    status = subprocess.run(
        [str(SCRIPT), "status", "--store", url, "--json"], capture_output=True, text=True, env=queued, timeout=120
    )
    report = json.loads(status.stdout)["store"]
    assert report["hooks_queued"] == 0
    assert report["hook_error"].endswith("queued claude hook dropped: hook input on stdin: missing field 'session_id'")
    table = subprocess.run([str(SCRIPT), "status", "--store", url], capture_output=True, text=True, env=queued)
    assert "last hook error:" in table.stdout and "session_id" in table.stdout


def test_stdin_that_is_not_json_is_refused_and_not_queued(queued: dict[str, str], tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    done = hook('{"session_id": ', url, queued)
    assert done.returncode == 1 and done.stderr.startswith("error: hook input on stdin is not JSON (")
    assert done.stderr.count("\n") == 1 and pending(spool_for(url)) == 0


@pytest.mark.parametrize("value", ["off", "OFF", "false", "0", "no", "on", "true", "1", "yes"])
def test_the_hook_reads_its_queue_setting_as_settings_does(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PALIMPSEST_HOOK_QUEUE", value)
    assert queue_enabled() is Settings().hook_queue
