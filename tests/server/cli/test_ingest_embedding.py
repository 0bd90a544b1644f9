"""``palimpsest ingest`` leaves embedding to the server and maintenance unless ``--embed`` asks for it.

Why: loading an embedding model to embed a few lines costs more than the ingest itself,
and the server's backfill and ``palimpsest maintain`` embed what is missing anyway. The
embedder here is an OpenAI-compatible endpoint on a closed loopback port (the suite's
default): any attempt to embed is seen in what the command says, none reaches a model.
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from palimpsest.server.cli.main import app


def transcript(folder: Path) -> Path:
    path = folder / "chat.jsonl"
    lines = [{"thread_id": "t1", "role": "user", "content": "Rotate the refresh tokens every 15 minutes."}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def test_ingest_embeds_nothing_unless_asked(tmp_path: Path) -> None:
    env = {"PALIMPSEST_STORE": f"sqlite:///{tmp_path / 'm.db'}", "PALIMPSEST_EMBEDDER": "openai:text-embedding-3-small"}
    plain = CliRunner().invoke(app, ["ingest", str(transcript(tmp_path))], env=env)
    assert plain.exit_code == 0, plain.output
    assert "embed" not in plain.stderr and "1" in plain.stdout
    asked = CliRunner().invoke(app, ["ingest", str(transcript(tmp_path)), "--embed"], env=env)
    assert asked.exit_code == 1 and "the embeddings call failed (openai:text-embedding-3-small)" in asked.output
