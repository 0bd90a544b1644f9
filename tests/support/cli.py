"""Running the ``palimpsest`` CLI in-process and reading its output, shared by the CLI-level tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner, Result

from palimpsest.server.cli.main import app

#: The variables a developer's shell may set that would steer a test elsewhere.
CLEAN_ENV: dict[str, str | None] = {"PALIMPSEST_STORE": None, "PALIMPSEST_PARTITION": None}


def run_cli(*args: str | Path) -> Result:
    """Invoke the CLI in process with a clean environment."""
    return CliRunner().invoke(app, [str(arg) for arg in args], env=CLEAN_ENV)


def run_json(*args: str | Path) -> Any:
    """Invoke a command with ``--json``, check it succeeded, return the parsed stdout."""
    result = run_cli(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)
