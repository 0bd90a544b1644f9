"""What Claude Code and Codex write themselves, late transcripts, and where a hook keeps its read positions.

Built on the shapes of real captures (`tests.support.agent_captures`, each shape's source named
there): a Claude Code turn that never reached the model is kept but marked, and never
presented as the session's work; so are the messages Codex injects; a hook for a session
whose transcript was never written (Claude Code's ``SessionEnd`` on ``claude mcp list``)
exits 0 and prints nothing; a transcript written after ``Stop`` is caught up by the
detached follow-up, or by the conversation's next hook call, and replaying adds nothing.
Read positions live in their own place on both stores, positions older stores kept in
message metadata move there on open, a file rewritten to the same size is read again from
the start, and an export carries no local path.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from palimpsest.graph_schema.backends import open_store
from palimpsest.graph_schema.models import Message, NewMessage, ReadPosition, Role
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.server.cli.hook_follow_up import waits
from palimpsest.server.cli.main import app
from palimpsest.server.retrieval.startup import project_memory
from tests.support.agent_captures import (
    AGENTS_MD,
    CLAUDE_SESSION,
    CODEX_ANSWER,
    CODEX_MARKS,
    CODEX_PROMPT,
    CODEX_SESSION,
    ENVIRONMENT,
    WORKSPACE,
    claude_record,
    claude_session_with_failed_turns,
    codex_rollout_with_injections,
)
from tests.support.hooks import CLEAN_ENV, hook, silent, stored, thread_ids
from tests.support.transcripts import append_jsonl
from tests.support.waiting import wait_until

PALIMPSEST = Path(sys.executable).parent / "palimpsest"


def claude_payload(transcript: Path, event: str = "Stop", session: str = CLAUDE_SESSION) -> dict[str, Any]:
    """What Claude Code writes on a hook's stdin."""
    return {
        "session_id": session,
        "transcript_path": str(transcript),
        "cwd": WORKSPACE,
        "permission_mode": "default",
        "hook_event_name": event,
    }


async def with_store(store_url: str, work: Any) -> Any:
    store = open_store(store_url)
    await store.initialize()
    try:
        return await work(store)
    finally:
        await store.close()


def memory_of(store_url: str, partition: str, project: str) -> str:
    """The start-of-session memory a new session of the project gets."""

    async def work(store: MemoryStore) -> str:
        return await project_memory(store, partition=partition, project=project, budget_tokens=1500)

    return str(asyncio.run(with_store(store_url, work)))


# -- Claude Code: a turn that never reached the model ------------------------------------------


def test_a_turn_that_never_reached_the_model_is_kept_marked_and_never_the_sessions_work(
    store_url: str, tmp_path: Path
) -> None:
    transcript = append_jsonl(tmp_path / f"{CLAUDE_SESSION}.jsonl", claude_session_with_failed_turns())
    silent(hook("claude", claude_payload(transcript), store_url))
    messages = stored(store_url, "claude", CLAUDE_SESSION)
    assert [(m.role.value, m.metadata.get("synthetic", False)) for m in messages] == [
        ("user", False),
        ("assistant", True),
        ("user", False),
        ("assistant", True),
        ("user", False),
        ("assistant", False),
    ]
    failed = [m for m in messages if m.metadata.get("synthetic")]
    assert [(m.metadata["error"], m.metadata["api_error_status"], m.metadata["model"]) for m in failed] == [
        ("authentication_failed", 401, "<synthetic>"),
        ("rate_limit", 429, "<synthetic>"),
    ]
    assert failed[0].content.startswith("Please run /login · API Error: 401")
    # A session of failed turns alone is no work at all.
    only_failed = [
        {**line, "sessionId": "0f0e0d0c-0b0a-4909-8807-060504030201"} for line in claude_session_with_failed_turns()[:2]
    ]
    other = append_jsonl(tmp_path / "0f0e0d0c.jsonl", only_failed)
    silent(hook("claude", claude_payload(other, session="0f0e0d0c-0b0a-4909-8807-060504030201"), store_url))

    memory = memory_of(store_url, "claude", "billing-api")
    assert "- Asked:\n  1. Why does the refresh test fail?\n" in memory  # asked three times: one request
    assert "rotate() drops the token's audience" in memory
    assert "API Error" not in memory and "/login" not in memory and "0f0e0d0c" not in memory


# -- Codex: what it injects ----------------------------------------------------------------------


def test_codex_injected_messages_are_kept_marked_and_left_out_of_the_start_memory(
    store_url: str, tmp_path: Path
) -> None:
    rollout = append_jsonl(tmp_path / f"rollout-2026-08-10T08-00-00-{CODEX_SESSION}.jsonl", [])
    append_jsonl(rollout, codex_rollout_with_injections())
    payload = {"session_id": CODEX_SESSION, "transcript_path": str(rollout), "cwd": "/home/dana/src/ledger"}
    silent(hook("codex", {**payload, "hook_event_name": "Stop"}, store_url))
    messages = stored(store_url, "codex", CODEX_SESSION)
    assert [(m.role.value, m.metadata.get("injected_as")) for m in messages] == CODEX_MARKS
    assert [m.metadata.get("injected", False) for m in messages] == [mark is not None for _, mark in CODEX_MARKS]
    assert messages[1].content == f"{AGENTS_MD}\n\n{ENVIRONMENT}"  # both parts kept, in one message
    assert (messages[3].content, messages[4].content) == (CODEX_PROMPT, CODEX_ANSWER)

    memory = memory_of(store_url, "codex", "ledger")
    assert f"- Asked:\n  1. {CODEX_PROMPT}\n" in memory
    for injected in ("AGENTS.md", "environment_context", "skills", "codex_internal_context", "permissions"):
        assert injected not in memory, injected


# -- a transcript never written, or written late ---------------------------------------------------


def real_hook(
    store_url: str, payload: dict[str, Any], *, partition: str | None = None, follow_up: str | None = None
) -> None:
    """``palimpsest hook claude`` as Claude Code runs it: a process of its own, which returns at once, silent."""
    env = {key: value for key, value in os.environ.items() if key not in CLEAN_ENV}
    if follow_up is not None:
        env["PALIMPSEST_HOOK_FOLLOW_UP"] = follow_up
    args = [str(PALIMPSEST), "hook", "claude", "--store", store_url]
    if partition is not None:
        args += ["--partition", partition]
    done = subprocess.run(args, input=json.dumps(payload), capture_output=True, text=True, env=env, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


@pytest.mark.parametrize("event", ["SessionEnd", "Stop", "PreCompact"])
def test_a_hook_for_a_transcript_never_written_exits_0_and_prints_nothing(tmp_path: Path, event: str) -> None:
    # Claude Code fires SessionEnd (and can fire Stop) on every `claude mcp list`: run as it runs it.
    url = f"sqlite:///{tmp_path / 'm.db'}"
    real_hook(url, {**claude_payload(tmp_path / "never-written.jsonl", event), "reason": "other"})
    assert thread_ids(url) == []


def follow_ups(partition: str) -> list[int]:
    """The follow-up processes a hook of ``partition`` left running."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"palimpsest.server.cli.hook_follow_up" in command and partition.encode() in command:
            found.append(int(entry.name))
    return found


def test_a_late_transcript_is_caught_up_by_the_follow_up_and_replaying_adds_nothing(
    store_url: str, tmp_path: Path
) -> None:
    partition = f"late-{uuid.uuid4().hex[:8]}"
    transcript = tmp_path / f"{CLAUDE_SESSION}.jsonl"
    lines = claude_session_with_failed_turns()[4:]  # a prompt and its answer
    contents = [line["message"]["content"][0]["text"] for line in lines]

    def count() -> int | None:
        found = [m.content for m in stored(store_url, partition, CLAUDE_SESSION)] if thread_ids(store_url) else []
        return len(found) if found == contents[: len(found)] and len(found) == len(contents) else None

    # Stop before the transcript exists: nothing to store yet, the follow-up waits for it.
    real_hook(store_url, claude_payload(transcript), partition=partition, follow_up="on")
    assert follow_ups(partition), "the Stop left no follow-up behind"
    append_jsonl(transcript, lines)
    wait_until(count, 30, "the follow-up stored the transcript written after Stop")
    wait_until(lambda: follow_ups(partition) == [] or None, 30, "the follow-up ended once caught up")

    # Stop with the prompt written, its answer not yet.
    more = [
        claude_record("user", "u9", "And the expiry check?", 180, "a3"),
        claude_record("assistant", "a9", "expires_at is compared in local time; it must be UTC.", 185, "u9"),
    ]
    append_jsonl(transcript, more[:1])
    real_hook(store_url, claude_payload(transcript), partition=partition, follow_up="on")
    append_jsonl(transcript, more[1:])
    contents += [line["message"]["content"][0]["text"] for line in more]
    wait_until(count, 30, "the follow-up stored the answer written after Stop")
    wait_until(lambda: follow_ups(partition) == [] or None, 30, "the follow-up ended once caught up")

    ids = [m.id for m in stored(store_url, partition, CLAUDE_SESSION)]
    for event in ("Stop", "SessionEnd"):
        real_hook(store_url, claude_payload(transcript, event), partition=partition, follow_up="off")
    assert [m.id for m in stored(store_url, partition, CLAUDE_SESSION)] == ids


def test_the_follow_up_looks_again_and_again_until_its_window_closes() -> None:
    assert waits(10.0) == [0.5, 1.0, 2.0, 4.0, 2.5]
    assert sum(waits(30.0)) == 30.0 and waits(30.0)[:5] == [0.5, 1.0, 2.0, 4.0, 8.0]
    assert waits(0.0) == []


def test_the_next_hook_call_stores_an_answer_written_after_stop(store_url: str, tmp_path: Path) -> None:
    transcript = tmp_path / f"{CLAUDE_SESSION}.jsonl"
    prompt, answer = claude_session_with_failed_turns()[4:]
    append_jsonl(transcript, [prompt])
    silent(hook("claude", claude_payload(transcript), store_url))
    assert [m.role for m in stored(store_url, "claude", CLAUDE_SESSION)] == [Role.user]
    append_jsonl(transcript, [answer])
    silent(hook("claude", claude_payload(transcript, "SessionEnd"), store_url))
    messages = stored(store_url, "claude", CLAUDE_SESSION)
    assert [(m.role, m.content) for m in messages][-1] == (Role.assistant, answer["message"]["content"][0]["text"])
    assert len(messages) == 2


# -- read positions ------------------------------------------------------------------------------


async def test_read_positions_are_kept_per_thread_and_file(store: MemoryStore) -> None:
    assert await store.read_positions("claude", "t-1") == []
    first = [
        ReadPosition(path="/home/a/z.jsonl", offset=120, line=3, fingerprint="1:120:ab"),
        ReadPosition(path="/home/a/a.jsonl", offset=40, line=2, fingerprint="1:40:cd"),
    ]
    await store.save_read_positions("claude", "t-1", first)  # no such thread yet: no error
    assert await store.read_positions("claude", "t-1") == sorted(first, key=lambda position: position.path)
    moved = ReadPosition(path="/home/a/z.jsonl", offset=0, line=1, fingerprint="")
    await store.save_read_positions("claude", "t-1", [moved])
    assert await store.read_positions("claude", "t-1") == [first[1], moved]
    assert await store.read_positions("codex", "t-1") == []
    assert await store.read_positions("claude", "t-2") == []


def legacy_message(index: int, cursor: dict[str, list[int]] | None) -> NewMessage:
    """A message as an older hook stored it: its read positions in metadata ``hook_cursor``."""
    metadata: dict[str, Any] = {"source": "claude-code", "kind": "text"}
    if cursor is not None:
        metadata["hook_cursor"] = cursor
    return NewMessage(role=Role.user, content=f"message {index}", message_id=f"u{index}", metadata=metadata)


async def forget_positions(store_url: str, backend: str) -> None:
    """Make the store look as an older Palimpsest left it: no place for read positions yet.

    On Neo4j that is an older schema version too: an open migrates data only when it
    applies a new schema.
    """
    if backend == "sqlite":
        conn = sqlite3.connect(store_url.removeprefix("sqlite:///"))
        try:
            conn.execute("DROP TABLE read_positions")
        finally:
            conn.close()
        return
    import neo4j

    driver = neo4j.AsyncGraphDatabase.driver(store_url, auth=None)
    try:
        await driver.execute_query(
            "MATCH (n) WHERE n:StoreMigration OR n:ReadPosition OR n:PalimpsestSchema DETACH DELETE n"
        )
    finally:
        await driver.close()


def test_positions_in_old_message_metadata_move_to_their_place_on_open(
    store_url: str, backend: str, tmp_path: Path
) -> None:
    transcript = tmp_path / f"{CLAUDE_SESSION}.jsonl"
    first, second = claude_session_with_failed_turns()[4:]
    append_jsonl(transcript, [first])
    offset = transcript.stat().st_size
    append_jsonl(transcript, [second])
    path = str(transcript)

    async def write_old_store(store: MemoryStore) -> list[Message]:
        await store.append_messages("claude", CLAUDE_SESSION, [legacy_message(0, {path: [10, 1]})])
        await store.append_messages("claude", CLAUDE_SESSION, [legacy_message(1, {path: [offset, 2]})])
        await store.append_messages("codex", "other", [legacy_message(2, {"/x/r.jsonl": [5, 2], "bad": [-1, 0]})])
        await store.append_messages("codex", "other", [legacy_message(3, None)])
        return await store.get_messages("claude", CLAUDE_SESSION) + await store.get_messages("codex", "other")

    before = asyncio.run(with_store(store_url, write_old_store))
    asyncio.run(forget_positions(store_url, backend))

    async def read_new_store(store: MemoryStore) -> tuple[list[Message], list[ReadPosition], list[ReadPosition]]:
        messages = await store.get_messages("claude", CLAUDE_SESSION) + await store.get_messages("codex", "other")
        return (
            messages,
            await store.read_positions("claude", CLAUDE_SESSION),
            await store.read_positions("codex", "other"),
        )

    after, claude, codex = asyncio.run(with_store(store_url, read_new_store))
    assert claude == [ReadPosition(path=path, offset=offset, line=2)]
    assert codex == [ReadPosition(path="/x/r.jsonl", offset=5, line=2)]
    assert [m.metadata for m in after] == [{"source": "claude-code", "kind": "text"}] * 4
    assert [(m.id, m.sha256, m.content) for m in after] == [(m.id, m.sha256, m.content) for m in before]
    # Opening again finds nothing left to move; the hook resumes from the moved position.
    assert asyncio.run(with_store(store_url, read_new_store))[1] == claude
    result = CliRunner().invoke(
        app,
        ["hook", "claude", "--store", store_url, "--json"],
        input=json.dumps(claude_payload(transcript)),
        env=CLEAN_ENV,
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["messages"] == 1  # the answer alone: the prompt's line was not read again


def test_a_file_rewritten_to_the_same_size_is_read_again_from_the_start(store_url: str, tmp_path: Path) -> None:
    transcript = tmp_path / f"{CLAUDE_SESSION}.jsonl"
    prompt, answer = claude_session_with_failed_turns()[4:]
    append_jsonl(transcript, [prompt, answer])
    silent(hook("claude", claude_payload(transcript), store_url))
    size, stamp = transcript.stat().st_size, transcript.stat().st_mtime_ns
    text = answer["message"]["content"][0]["text"]
    rewritten = {**answer, "uuid": "b3", "message": {**answer["message"], "id": "msg_b3"}}
    rewritten["message"]["content"] = [{"type": "text", "text": text.replace("drops", "skips")}]
    transcript.write_text("", encoding="utf-8")
    append_jsonl(transcript, [prompt, rewritten])
    os.utime(transcript, ns=(stamp + 5_000_000_000, stamp + 5_000_000_000))
    assert transcript.stat().st_size == size
    silent(hook("claude", claude_payload(transcript), store_url))
    contents = [m.content for m in stored(store_url, "claude", CLAUDE_SESSION)]
    assert contents == [prompt["message"]["content"][0]["text"], text, text.replace("drops", "skips")]


def test_an_export_carries_no_read_position(store_url: str, tmp_path: Path) -> None:
    transcript = append_jsonl(tmp_path / f"{CLAUDE_SESSION}.jsonl", claude_session_with_failed_turns())
    silent(hook("claude", claude_payload(transcript), store_url))
    archive = tmp_path / "memory.jsonl.gz"
    result = CliRunner().invoke(app, ["export", str(archive), "--store", store_url], env=CLEAN_ENV)
    assert result.exit_code == 0, result.output
    text = gzip.decompress(archive.read_bytes()).decode()
    assert "rotate() drops" in text
    assert str(tmp_path) not in text and "hook_cursor" not in text
