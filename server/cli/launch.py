"""The ``palimpsest`` console script: the whole CLI, or only the hook group when an agent calls.

An agent runs ``palimpsest hook AGENT`` after every turn, so its process start is paid
all day. Building the full app imports every command module (the DAG viewer, search,
set-up, portability) and has typer assemble all of them; the hook needs none of that.
So ``hook`` runs the hook group alone, the same typer commands with the same options
and help, and every other command runs the full app.
"""

from __future__ import annotations

import sys


def main() -> None:
    """Run ``palimpsest``: the hook group alone for ``palimpsest hook ...``, else the full app."""
    if sys.argv[1:2] == ["hook"]:
        from palimpsest.server.cli.feed import hook_app

        hook_app(args=sys.argv[2:], prog_name="palimpsest hook")
    else:
        from palimpsest.server.cli.main import app

        app()
