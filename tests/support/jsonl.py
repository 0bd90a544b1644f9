"""Palimpsest JSONL lines written to files, shared by every test that ingests a conversation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def line(thread_id: str = "t1", role: str = "user", content: str = "hello", **extra: Any) -> dict[str, Any]:
    """One JSONL record."""
    return {"thread_id": thread_id, "role": role, "content": content, **extra}


def write_jsonl(path: Path, records: list[dict[str, Any] | str | bytes]) -> Path:
    """A JSONL file: dicts are dumped, str and bytes lines written as given."""
    with path.open("wb") as handle:
        for record in records:
            if isinstance(record, bytes):
                handle.write(record + b"\n")
            elif isinstance(record, str):
                handle.write(record.encode("utf-8") + b"\n")
            else:
                handle.write(json.dumps(record, ensure_ascii=False).encode("utf-8") + b"\n")
    return path


def conversation() -> list[dict[str, Any]]:
    """Two threads interleaved, a tool call, identical lines, timestamps and metadata."""
    return [
        line("alpha", "system", "You are a coding agent.", created_at="2024-05-01T10:00:00Z", project="api"),
        line("alpha", "user", "Add JWT auth to the API", created_at="2024-05-01T10:00:01Z"),
        line("beta", "user", "Why does the build fail?", message_id="b-1"),
        line("alpha", "assistant", "Reading auth.py", tool_call_id="call-1", metadata={"model": "x"}),
        line("alpha", "tool", "def login(): ...", tool_call_id="call-1"),
        line("beta", "assistant", "ok"),
        line("beta", "assistant", "ok"),
        line("alpha", "assistant", "Done: tokens now refresh every 15 minutes."),
    ]


GOOD = [line(content=f"message {i}") for i in range(6)]
