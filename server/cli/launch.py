"""The ``palimpsest`` console script: the whole CLI, or only the hook group when an agent calls.

An agent runs ``palimpsest hook AGENT`` after every turn, so its process start is paid
all day. Building the full app imports every command module (the DAG viewer, search,
set-up, portability) and has typer assemble all of them; the hook needs none of that,
nor typer itself. So a plain ``hook AGENT [flags]`` call runs
``palimpsest.server.cli.hook_command`` directly; the rest of ``hook ...`` (``--help``, an
unknown agent or flag) runs the typer hook group alone, which answers it; every other
command runs the full app, but ``serve``, which runs its own command alone
(``palimpsest.server.cli.serve``) for the same reason: an agent starts one per session.
"""

from __future__ import annotations

import gc
import os
import sys


def main() -> None:
    """Run ``palimpsest``: a hook call without typer, else the hook group alone, else the full app."""
    if sys.argv[1:2] == ["hook"] and len(sys.argv) > 2:
        # A hook lives for one turn: the cycle collector would only walk, again and again,
        # the classes and schemas its imports build (a tenth of its start-up), to free nothing.
        gc.disable()
        # pydantic looks for plugins by reading every installed package's metadata (2 % of
        # a hook's start-up); a hook uses none. A value the user set stands.
        os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
        from palimpsest.server.cli.hook_command import parse_hook_call, run_hook_call

        call = parse_hook_call(sys.argv[2:])
        sys.exit(run_hook_call(call) if call is not None else run_hook_group(sys.argv[2:]))
    if sys.argv[1:2] == ["serve"]:
        # An agent starts a server for every session and waits for its initialize answer:
        # the cycle collector would walk, again and again, the classes and schemas the MCP
        # SDK builds on import (about a tenth of the start), to free nothing. `run_server` turns
        # it back on once the server is built. Only the serve command is built, not the full app.
        gc.disable()
        from palimpsest.server.cli.serve import serve_app

        serve_app(args=sys.argv[2:], prog_name="palimpsest serve")
        return
    from palimpsest.server.cli.main import app

    app()


def run_hook_group(args: list[str]) -> int:
    """Run ``palimpsest hook`` with ``args``; a usage error ends with one line and exit code 1.

    typer ends a usage error (an unknown flag, say, from a hook entry written by a newer
    version) with exit code 2, which an agent reads as "block": Claude Code's Stop hook
    would send the agent back to work on the error. A hook never blocks its agent.
    """
    import typer

    from palimpsest.server.cli.feed import hook_app

    try:
        code = hook_app(args=args, prog_name="palimpsest hook", standalone_mode=False)
    except typer.TyperException as exc:
        print(f"error: {exc.format_message()}", file=sys.stderr)
        return 1
    except typer.Abort:
        print("error: aborted", file=sys.stderr)
        return 1
    return code if isinstance(code, int) else 0
