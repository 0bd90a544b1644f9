"""The README and the guides in docs/ are the user's manual: what the program offers must be in them.

A command, tool or setting added without documentation fails here, as does one
documented but gone, so the manual cannot drift from the program. The README stays
short enough to read in minutes and points to every guide; every relative link
between them resolves, to a file and to a heading.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer.main
from fastmcp import Client
from pydantic import AliasChoices, BaseModel, Field
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, SettingsConfigDict
from typer.testing import CliRunner

from palimpsest.server.agents.registry import NAMES
from palimpsest.server.cli.main import app
from palimpsest.server.mcp.app import build_server
from palimpsest.server.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README_PATH = ROOT / "README.md"
README = README_PATH.read_text(encoding="utf-8")
GUIDES = sorted(DOCS.glob("*.md"))
MANUAL = "\n".join([README, *(guide.read_text(encoding="utf-8") for guide in GUIDES)])
#: The README is the page read first, in minutes; everything longer lives in a guide.
README_MAX_LINES = 300
#: ``[text](target)`` and ``![alt](target)``: a target up to its first space or ``)``.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)[^)]*\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def cli_commands() -> list[str]:
    """The names of every `palimpsest` subcommand, as typer registers them."""
    group = typer.main.get_command(app)
    return sorted(group.commands)  # type: ignore[attr-defined]


def field_variables(field: FieldInfo, name: str, prefix: str, delimiter: str | None) -> list[str]:
    """The variable a field is documented as: its own name if it has one, else prefix + name.

    A nested group of settings (a model-typed field) is read variable by variable when
    the class sets ``env_nested_delimiter``, so each of its fields is one variable.
    """
    annotation = field.annotation
    if delimiter and isinstance(annotation, type) and issubclass(annotation, BaseModel):
        group = f"{prefix}{name.upper()}{delimiter}"
        return [
            variable
            for sub_name, sub_field in annotation.model_fields.items()
            for variable in field_variables(sub_field, sub_name, group, delimiter)
        ]
    alias = field.validation_alias
    own = [choice for choice in (alias.choices if isinstance(alias, AliasChoices) else []) if str(choice).isupper()]
    return [str(own[0])] if own else [f"{prefix}{name.upper()}"]


def settings_variables(settings: type[BaseSettings]) -> list[str]:
    """Every environment variable a settings class reads, one per field, as documented."""
    prefix = settings.model_config.get("env_prefix") or ""
    delimiter = settings.model_config.get("env_nested_delimiter")
    return sorted(
        variable
        for name, field in settings.model_fields.items()
        for variable in field_variables(field, name, prefix, delimiter)
    )


def outside_code(text: str) -> str:
    """``text`` without its fenced code blocks, whose ``#`` lines and brackets are not markdown."""
    return FENCE.sub("", text)


def anchors(text: str) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces to hyphens."""
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6} (.+)$", outside_code(text), re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(slug)
    return found


def test_readme_opens_with_the_two_commands() -> None:
    first_block = README.split("```", 2)[1]
    assert "make serve" in first_block and "make test" in first_block


def test_the_readme_is_short_and_links_every_guide() -> None:
    lines = README.count("\n") + (not README.endswith("\n"))
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines, over {README_MAX_LINES}: move text into docs/"
    assert {"agents.md", "configuration.md", "operations.md", "architecture.md"} <= {guide.name for guide in GUIDES}
    targets = {target.split("#", 1)[0] for target in LINK.findall(outside_code(README))}
    for guide in GUIDES:
        assert f"docs/{guide.name}" in targets, f"README.md links no docs/{guide.name}"


def test_every_guide_opens_with_what_it_is_for() -> None:
    for guide in GUIDES:
        text = guide.read_text(encoding="utf-8")
        title, rest = text.split("\n", 1)
        assert title.startswith("# "), f"{guide.name} does not open with a title"
        first = rest.strip().split("\n\n", 1)[0]
        assert not first.startswith(("#", "|", "```", "-")), f"{guide.name} opens with no paragraph"
        assert len(first.split()) >= 20, f"{guide.name}'s first paragraph does not say what the page is for"


def test_every_relative_link_resolves_to_a_file_and_a_heading() -> None:
    broken = []
    for page in [README_PATH, *GUIDES]:
        for target in LINK.findall(outside_code(page.read_text(encoding="utf-8"))):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):
                continue  # an absolute URL (https:, mailto:) is not ours to check
            path, _, fragment = target.partition("#")
            resolved = (page.parent / path).resolve() if path else page
            if not resolved.is_file():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif fragment and resolved.suffix == ".md" and fragment not in anchors(resolved.read_text("utf-8")):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert broken == []


def test_every_cli_command_is_documented_with_help_and_an_example() -> None:
    commands = cli_commands()
    assert {"serve", "ingest", "stats", "grep", "doctor"} <= set(commands)
    runner = CliRunner()
    for name in commands:
        assert re.search(rf"`palimpsest {name}\b", MANUAL), f"neither README nor docs/ documents `palimpsest {name}`"
        result = runner.invoke(app, [name, "--help"])
        assert result.exit_code == 0, result.output
        assert "Example:" in result.output, f"`palimpsest {name} --help` shows no example"


def test_the_readme_shows_how_to_install_every_agent() -> None:
    assert set(NAMES) == {"claude", "codex", "windsurf", "antigravity", "cursor", "gemini"}
    for agent in NAMES:
        assert re.search(rf"^palimpsest install {agent}\b", README, re.MULTILINE), f"README lacks `install {agent}`"


async def test_every_mcp_tool_is_documented(tmp_path: Path) -> None:
    server = build_server(Settings(store=f"sqlite:///{tmp_path / 'm.db'}", scheduler=False))
    async with Client(server) as client:
        tools = await client.list_tools()
    names = sorted(tool.name for tool in tools)
    assert {"append_messages", "grep_memories", "expand_summary", "memory_stats"} <= set(names)
    for tool in tools:
        assert re.search(rf"^\| `{tool.name}` \| \S", MANUAL, re.MULTILINE), (
            f"no tool table has a row for `{tool.name}`"
        )
        assert tool.description, f"tool {tool.name} has no description"


def test_every_setting_is_in_the_configuration_guide() -> None:
    variables = settings_variables(Settings)
    assert {"PALIMPSEST_STORE", "NEO4J_PASSWORD", "KG_EVOLUTION_INTERVAL", "PALIMPSEST_TOKENS_FILE"} <= set(variables)
    configuration = (DOCS / "configuration.md").read_text(encoding="utf-8")
    for variable in variables:
        assert re.search(rf"`{variable}`", configuration), f"docs/configuration.md does not document `{variable}`"


class _Group(BaseModel):
    size: int = 1


class _Sample(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SAMPLE_", env_nested_delimiter="__")

    plain: int = 1
    renamed: int = Field(1, validation_alias=AliasChoices("OTHER_NAME", "renamed"))
    group: _Group = _Group()


def test_the_documented_names_are_the_ones_pydantic_settings_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    assert settings_variables(_Sample) == ["OTHER_NAME", "SAMPLE_GROUP__SIZE", "SAMPLE_PLAIN"]
    for variable in settings_variables(_Sample):
        monkeypatch.setenv(variable, "7")
    assert _Sample().model_dump() == {"plain": 7, "renamed": 7, "group": {"size": 7}}


def test_the_layout_section_names_every_package() -> None:
    architecture = (DOCS / "architecture.md").read_text(encoding="utf-8")
    layout = architecture.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    packages = sorted(
        init.parent.relative_to(ROOT)
        for layer in ("graph_schema", "scheduler", "server")
        for init in (ROOT / layer).rglob("__init__.py")
    )
    assert packages, "no package found"
    for package in packages:
        assert re.search(rf"^\s*{re.escape(package.name)}/", layout, re.MULTILINE), f"the layout lacks {package}/"
