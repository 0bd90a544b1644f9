"""The README is the user's manual: every CLI command and MCP tool must be in it.

A command or tool added without documentation fails here, as does one documented but
gone, so the README cannot drift from what the program offers.
"""

from __future__ import annotations

import re
from pathlib import Path

import typer.main
from fastmcp import Client
from typer.testing import CliRunner

from palimpsest.server.cli.main import app
from palimpsest.server.mcp.app import build_server
from palimpsest.server.settings import Settings

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")


def cli_commands() -> list[str]:
    """The names of every `palimpsest` subcommand, as typer registers them."""
    group = typer.main.get_command(app)
    return sorted(group.commands)  # type: ignore[attr-defined]


def test_readme_opens_with_the_two_commands() -> None:
    first_block = README.split("```", 2)[1]
    assert "make serve" in first_block and "make test" in first_block


def test_every_cli_command_is_documented_with_help_and_an_example() -> None:
    commands = cli_commands()
    assert {"serve", "ingest", "stats", "grep", "doctor"} <= set(commands)
    runner = CliRunner()
    for name in commands:
        assert re.search(rf"`palimpsest {name}\b", README), f"README does not document `palimpsest {name}`"
        result = runner.invoke(app, [name, "--help"])
        assert result.exit_code == 0, result.output
        assert "Example:" in result.output, f"`palimpsest {name} --help` shows no example"


async def test_every_mcp_tool_is_documented(tmp_path: Path) -> None:
    server = build_server(Settings(store=f"sqlite:///{tmp_path / 'm.db'}", scheduler=False))
    async with Client(server) as client:
        tools = await client.list_tools()
    names = sorted(tool.name for tool in tools)
    assert {"append_messages", "grep_memories", "expand_summary", "memory_stats"} <= set(names)
    for tool in tools:
        assert re.search(rf"^\| `{tool.name}` \| \S", README, re.MULTILINE), f"README's tool table lacks `{tool.name}`"
        assert tool.description, f"tool {tool.name} has no description"


def test_the_layout_section_names_every_package() -> None:
    layout = README.split("## Layout", 1)[1].split("\n## ", 1)[0]
    root = Path(__file__).resolve().parent.parent
    packages = sorted(
        init.parent.relative_to(root)
        for layer in ("graph_schema", "scheduler", "server")
        for init in (root / layer).rglob("__init__.py")
    )
    assert packages, "no package found"
    for package in packages:
        assert re.search(rf"^\s*{re.escape(package.name)}/", layout, re.MULTILINE), f"README's layout lacks {package}/"
    assert "docs/architecture.md" in layout
