"""The hook's own entry (``palimpsest.server.cli.hook_command``) stays in step with the typer CLI.

A plain ``palimpsest hook AGENT`` call parses its flags with argparse and reads its
settings without pydantic-settings, to start fast; these tests keep both the same as
what the typer command and ``Settings`` would do, so the fast path never means something else.
"""

from __future__ import annotations

import pytest
import typer
from pydantic import ValidationError

from palimpsest.server.agents.registry import NAMES
from palimpsest.server.cli.feed import hook_app
from palimpsest.server.cli.hook_command import FLAGS, HookCall, parse_hook_call
from palimpsest.server.settings import Settings
from palimpsest.server.store_settings import StoreSettings, invalid_configuration

VARIABLES = ("PALIMPSEST_", "NEO4J_", "palimpsest_", "neo4j_", "Palimpsest_")


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    import os

    for name in list(os.environ):
        if name.startswith(VARIABLES):
            monkeypatch.delenv(name)
    return monkeypatch


def test_the_fast_parser_knows_exactly_the_typer_commands_flags() -> None:
    group = typer.main.get_group(hook_app)
    assert sorted(group.commands) == sorted(NAMES)
    fast = sorted(FLAGS)
    for name, command in group.commands.items():
        typed = sorted(option for param in command.params for option in param.opts if option.startswith("--"))
        assert typed == fast, name
        takes = {option: not param.is_flag for param in command.params for option in param.opts if option in FLAGS}
        assert takes == FLAGS, name


@pytest.mark.parametrize(
    ("args", "call"),
    [
        (["claude"], HookCall(agent="claude")),
        (["codex", "--json"], HookCall(agent="codex", json=True)),
        (["cursor", "--store=sqlite:///m.db", "--partition", "team"], HookCall("cursor", "team", "sqlite:///m.db")),
        (["windsurf", "--partition=a b"], HookCall(agent="windsurf", partition="a b")),
        (["claude", "--store", "x.db", "--store=y.db", "--json"], HookCall("claude", None, "y.db", json=True)),
    ],
)
def test_a_plain_hook_call_parses_without_typer(args: list[str], call: HookCall) -> None:
    assert parse_hook_call(args) == call


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--help"],
        ["claude", "--help"],
        ["vim"],
        ["claude", "--from-a-newer-version"],
        ["claude", "--part", "x"],
        ["claude", "--store"],
        ["claude", "extra"],
        ["claude", "--store", "--json"],
        ["claude", "--json=yes"],
        ["claude", "-j"],
    ],
)
def test_help_and_usage_errors_are_left_to_typer(args: list[str]) -> None:
    assert parse_hook_call(args) is None


@pytest.mark.parametrize(
    "environment",
    [
        {},
        {"PALIMPSEST_STORE": "sqlite:///tmp/a.db", "PALIMPSEST_PARTITION": "team", "PALIMPSEST_STARTUP_BUDGET": "900"},
        {"palimpsest_store": "bolt://127.0.0.1:7687", "NEO4J_USER": "ada", "NEO4J_PASSWORD": "s3cret"},
        {"Neo4j_Database": "memory", "PALIMPSEST_NEO4J_USER": "not-this-one", "PALIMPSEST_COMPACTION_THRESHOLD": "5"},
        {"XDG_DATA_HOME": "/srv/data"},
    ],
)
def test_store_settings_read_the_environment_as_settings_do(
    clean_env: pytest.MonkeyPatch, environment: dict[str, str]
) -> None:
    for name, value in environment.items():
        clean_env.setenv(name, value)
    fields = set(StoreSettings.model_fields)
    assert StoreSettings.from_environment().model_dump(mode="json") == Settings().model_dump(
        mode="json", include=fields
    )
    overrides = {"store": "sqlite:///flag.db", "partition": "flagged"}
    assert StoreSettings.from_environment(**overrides).model_dump(include=fields) == Settings(**overrides).model_dump(
        include=fields
    )


def test_an_invalid_variable_is_the_same_sentence_on_both_paths(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("PALIMPSEST_STARTUP_BUDGET", "-5")
    sentences = []
    for read in (StoreSettings.from_environment, Settings):
        with pytest.raises(ValidationError) as caught:
            read()
        sentences.append(invalid_configuration(caught.value))
    assert sentences[0] == sentences[1]
    assert sentences[0] == "invalid configuration: startup_budget: Input should be greater than or equal to 0"
