"""``palimpsest install`` / ``uninstall`` on a throwaway HOME, in each agent's real file formats.

Every agent and scope is installed into files that already hold other servers, other
hooks and (TOML) comments, then installed again, dry-run, and uninstalled; the files
are compared byte for byte with what was there before. Installing into an empty HOME
creates the files in the exact shapes each agent reads, and uninstall removes them and
the directories it made.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
import tomlkit
from typer.testing import CliRunner

from palimpsest.server.agents.spec import Places, palimpsest_executable
from palimpsest.server.agents.wiring import Wiring
from palimpsest.server.cli.main import app

EXE = palimpsest_executable()
AGENTS = ["claude", "codex", "windsurf", "antigravity", "cursor", "gemini"]
CASES = [(agent, scope) for agent in AGENTS for scope in ("user", "project")]


def hook(agent: str) -> str:
    return shlex.join([EXE, "hook", agent])


def dumps(doc: dict[str, Any], indent: int | str = 2) -> str:
    return json.dumps(doc, indent=indent) + "\n"


CODEX_TOML = """\
# Codex settings, kept by hand
model = "gpt-5.5-codex"  # the default model
approval_policy = "on-request"

[mcp_servers.github]
command = "github-mcp"   # the GitHub tools
args = ["--stdio"]

[profiles.fast]
model = "gpt-5.5-mini"
"""

CLAUDE_SETTINGS = {
    "permissions": {"allow": ["Bash(make test)"]},
    "hooks": {
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send 'turn done'"}]}],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit-bash"}]}],
    },
}
GROUPED_HOOKS = {
    "hooks": {
        "Stop": [{"hooks": [{"type": "command", "command": "say done", "timeout": 5}]}],
        "PostToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "lint-it"}]}],
    }
}
OTHER_SERVERS = {"mcpServers": {"github": {"command": "github-mcp", "args": ["--stdio"], "env": {"TOKEN": "x"}}}}

#: Files each (agent, scope) finds before install: other servers, hooks, comments, odd indents.
SEEDS: dict[tuple[str, str], dict[str, str]] = {
    ("claude", "user"): {
        "home/.claude.json": dumps(
            {"numStartups": 42, "projects": {"/src/app": {"allowedTools": []}}, **OTHER_SERVERS}
        ),
        "home/.claude/settings.json": dumps(CLAUDE_SETTINGS),
    },
    ("claude", "project"): {
        "project/.mcp.json": dumps({"mcpServers": {"db": {"type": "stdio", "command": "db-mcp", "args": []}}}),
        "project/.claude/settings.json": dumps(CLAUDE_SETTINGS, indent=4),
    },
    ("codex", "user"): {
        "home/.codex/config.toml": CODEX_TOML,
        "home/.codex/hooks.json": dumps(GROUPED_HOOKS),
    },
    ("codex", "project"): {
        "project/.codex/config.toml": CODEX_TOML,
        "project/.codex/hooks.json": dumps(GROUPED_HOOKS),
    },
    ("windsurf", "user"): {
        "home/.codeium/windsurf/mcp_config.json": dumps(
            {"mcpServers": {"remote": {"serverUrl": "https://example.com/mcp", "headers": {"A": "b"}}}}
        ),
        "home/.codeium/windsurf/hooks.json": dumps(
            {"hooks": {"pre_user_prompt": [{"command": "audit.sh", "show_output": True}]}}
        ),
    },
    ("windsurf", "project"): {
        "project/.windsurf/hooks.json": dumps({"hooks": {"post_write_code": [{"command": "fmt.sh"}]}}),
    },
    ("antigravity", "user"): {
        "home/.gemini/config/mcp_config.json": dumps(OTHER_SERVERS),
        "home/.gemini/config/hooks.json": dumps(
            {
                "my-linter-hook": {
                    "PostToolUse": [
                        {
                            "matcher": "run_command",
                            "hooks": [{"type": "command", "command": "./lint.sh", "timeout": 10}],
                        }
                    ]
                },
                "reminder": {"enabled": False, "Stop": [{"type": "command", "command": "./remind.sh"}]},
            }
        ),
    },
    ("antigravity", "project"): {
        "project/.agents/mcp_config.json": dumps(OTHER_SERVERS, indent="\t"),
    },
    ("cursor", "user"): {
        "home/.cursor/mcp.json": dumps(OTHER_SERVERS, indent="\t"),
        "home/.cursor/hooks.json": dumps(
            {"version": 1, "hooks": {"afterFileEdit": [{"command": "./fmt.sh"}], "stop": [{"command": "./bell.sh"}]}}
        ),
    },
    ("cursor", "project"): {
        "project/.cursor/mcp.json": dumps(OTHER_SERVERS),
    },
    ("gemini", "user"): {  # the keys Gemini CLI writes itself (auth, theme), a server and a hook of the user's
        "home/.gemini/settings.json": dumps(
            {
                "security": {"auth": {"selectedType": "oauth-personal"}},
                "ui": {"theme": "GitHub"},
                "general": {"preferredEditor": "vim", "checkpointing": {"enabled": True}},
                **OTHER_SERVERS,
                "hooks": {
                    "BeforeTool": [
                        {
                            "matcher": "run_shell_command",
                            "hooks": [{"name": "audit", "type": "command", "command": "./audit.sh", "timeout": 5000}],
                        }
                    ],
                    "SessionStart": [{"matcher": "startup", "hooks": [{"type": "command", "command": "./hello.sh"}]}],
                },
                "hooksConfig": {"enabled": True},
            }
        ),
    },
    ("gemini", "project"): {
        "project/.gemini/settings.json": dumps({"context": {"fileName": ["AGENTS.md", "GEMINI.md"]}}, indent="\t"),
    },
}


def server(agent: str) -> dict[str, Any]:
    entry: dict[str, Any] = {"command": EXE, "args": ["serve", "--partition", agent]}
    return {"type": "stdio", **entry} if agent == "claude" else entry


def grouped(agent: str, *events: str) -> dict[str, Any]:
    return {"hooks": {event: [{"hooks": [{"type": "command", "command": hook(agent)}]}] for event in events}}


CURSOR_EVENTS = (
    "sessionStart",
    "beforeSubmitPrompt",
    "afterAgentThought",
    "afterAgentResponse",
    "postToolUse",
    "postToolUseFailure",
    "subagentStop",
)
GEMINI_HOOK = {"hooks": [{"type": "command", "command": hook("gemini"), "name": "palimpsest"}]}
GEMINI_SETTINGS = {
    "mcpServers": {"palimpsest": server("gemini")},
    "hooks": {event: [GEMINI_HOOK] for event in ("SessionStart", "AfterAgent", "PreCompress", "SessionEnd")},
}


#: What install writes into an empty HOME and project: every file, exactly.
CREATED: dict[tuple[str, str], dict[str, Any]] = {
    ("claude", "user"): {
        "home/.claude.json": {"mcpServers": {"palimpsest": server("claude")}},
        "home/.claude/settings.json": grouped("claude", "SessionStart", "Stop", "PreCompact", "SessionEnd"),
    },
    ("claude", "project"): {
        "project/.mcp.json": {"mcpServers": {"palimpsest": server("claude")}},
        "project/.claude/settings.json": grouped("claude", "SessionStart", "Stop", "PreCompact", "SessionEnd"),
    },
    ("codex", "user"): {
        "home/.codex/config.toml": {"mcp_servers": {"palimpsest": server("codex")}},
        "home/.codex/hooks.json": grouped("codex", "SessionStart", "Stop", "PreCompact"),
    },
    ("codex", "project"): {
        "project/.codex/config.toml": {"mcp_servers": {"palimpsest": server("codex")}},
        "project/.codex/hooks.json": grouped("codex", "SessionStart", "Stop", "PreCompact"),
    },
    ("windsurf", "user"): {
        "home/.codeium/windsurf/mcp_config.json": {"mcpServers": {"palimpsest": server("windsurf")}},
        "home/.codeium/windsurf/hooks.json": {
            "hooks": {
                event: [{"command": hook("windsurf"), "show_output": False}]
                for event in ("post_cascade_response_with_transcript",)
            }
        },
    },
    ("windsurf", "project"): {
        "project/.windsurf/hooks.json": {
            "hooks": {
                event: [{"command": hook("windsurf"), "show_output": False}]
                for event in ("post_cascade_response_with_transcript",)
            }
        },
    },
    ("antigravity", "user"): {
        "home/.gemini/config/mcp_config.json": {"mcpServers": {"palimpsest": server("antigravity")}},
        "home/.gemini/config/hooks.json": {
            "palimpsest": {
                event: [{"type": "command", "command": hook("antigravity")}] for event in ("Stop", "PreInvocation")
            }
        },
    },
    ("antigravity", "project"): {
        "project/.agents/mcp_config.json": {"mcpServers": {"palimpsest": server("antigravity")}},
        "project/.agents/hooks.json": {
            "palimpsest": {
                event: [{"type": "command", "command": hook("antigravity")}] for event in ("Stop", "PreInvocation")
            }
        },
    },
    ("cursor", "user"): {
        "home/.cursor/mcp.json": {"mcpServers": {"palimpsest": server("cursor")}},
        "home/.cursor/hooks.json": {
            "version": 1,
            "hooks": {event: [{"command": hook("cursor")}] for event in CURSOR_EVENTS},
        },
    },
    ("cursor", "project"): {
        "project/.cursor/mcp.json": {"mcpServers": {"palimpsest": server("cursor")}},
        "project/.cursor/hooks.json": {
            "version": 1,
            "hooks": {event: [{"command": hook("cursor")}] for event in CURSOR_EVENTS},
        },
    },
}


CREATED[("gemini", "user")] = {"home/.gemini/settings.json": GEMINI_SETTINGS}
CREATED[("gemini", "project")] = {"project/.gemini/settings.json": GEMINI_SETTINGS}


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A throwaway HOME (``home/``), data dir (``data/``) and project (``project/``), the last as cwd."""
    for name in ("home", "data", "project"):
        (tmp_path / name).mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    monkeypatch.chdir(tmp_path / "project")
    return tmp_path


def tree(root: Path) -> dict[str, bytes | None]:
    """Every file and directory under ``home/`` and ``project/`` (directories as ``None``)."""
    found: dict[str, bytes | None] = {}
    for top in ("home", "project"):
        for path in sorted((root / top).rglob("*")):
            found[str(path.relative_to(root))] = path.read_bytes() if path.is_file() else None
    return found


def seed(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")


def palimpsest(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def load(path: Path) -> dict[str, Any]:
    text = path.read_text(encoding="utf-8")
    return tomlkit.parse(text).unwrap() if path.suffix == ".toml" else json.loads(text)


def without_ours(doc: dict[str, Any], agent: str, seeded: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with Palimpsest's server and hook entries taken out, written apart from the code under test."""
    out = json.loads(json.dumps(doc))
    for key in ("mcpServers", "mcp_servers"):
        if isinstance(out.get(key), dict):
            out[key].pop("palimpsest", None)
            if not out[key] and key not in seeded:
                del out[key]
    if agent == "antigravity" and "palimpsest" not in seeded:
        out.pop("palimpsest", None)
    hooks = out.get("hooks")
    if isinstance(hooks, dict):
        for event in list(hooks):
            kept = [entry for entry in hooks[event] if f"hook {agent}" not in json.dumps(entry)]
            if kept or event in seeded.get("hooks", {}):
                hooks[event] = kept
            else:
                del hooks[event]
        if not hooks and "hooks" not in seeded:
            del out["hooks"]
            if "version" not in seeded:
                out.pop("version", None)
    return out


@pytest.mark.parametrize(("agent", "scope"), CASES)
def test_install_merges_and_uninstall_restores_every_byte(root: Path, agent: str, scope: str) -> None:
    seed(root, SEEDS[(agent, scope)])
    before = tree(root)

    preview = palimpsest("install", agent, "--scope", scope, "--dry-run")
    assert tree(root) == before, "a dry run wrote something"
    assert not (root / "data" / "palimpsest").exists()
    for name in CREATED[(agent, scope)]:
        assert f"+++ {root / name}" in preview
    assert hook(agent) in preview, "the diff does not show the hook"

    palimpsest("install", agent, "--scope", scope)
    installed = tree(root)
    backups = root / "data/palimpsest/install/backups"
    kept = {path.read_bytes() for path in backups.iterdir()} if backups.exists() else set()
    changed = {name for name in SEEDS[(agent, scope)] if installed[name] != before[name]}
    assert {before[name] for name in changed} <= kept, "a file was changed without a backup of its bytes"
    for name, expected in CREATED[(agent, scope)].items():
        doc = load(root / name)
        seeded_text = SEEDS[(agent, scope)].get(name)
        seeded = {}
        if seeded_text:
            seeded = tomlkit.parse(seeded_text).unwrap() if name.endswith(".toml") else json.loads(seeded_text)
        assert without_ours(doc, agent, seeded) == seeded, f"{name}: entries other than Palimpsest's changed"
        for key, value in expected.items():
            if key in ("mcpServers", "mcp_servers"):
                assert doc[key]["palimpsest"] == value["palimpsest"]
            elif key == "version":
                assert doc["version"] == 1
            else:
                for event, entries in value.items():
                    assert doc[key][event][-1] == entries[0], f"{name}: {event} lacks Palimpsest's hook"
    if agent == "codex":
        text = (root / ("home" if scope == "user" else "project") / ".codex/config.toml").read_text(encoding="utf-8")
        block = f'[mcp_servers.palimpsest]\ncommand = "{EXE}"\nargs = ["serve", "--partition", "codex"]\n\n'
        assert block in text and text.replace(block, "") == CODEX_TOML, "config.toml lost a comment or moved a line"

    again = palimpsest("install", agent, "--scope", scope, "--json")
    assert tree(root) == installed, "installing twice changed a file"
    assert {item["action"] for item in json.loads(again)["agents"][0]["files"]} == {"unchanged"}

    palimpsest("uninstall", agent, "--scope", scope)
    assert tree(root) == before, "uninstall did not give back the files byte for byte"
    assert not (root / "data" / "palimpsest" / "install").exists(), "uninstall left its manifest or backups"


@pytest.mark.parametrize(("agent", "scope"), CASES)
def test_install_into_an_empty_home_creates_the_files_and_uninstall_removes_them(
    root: Path, agent: str, scope: str
) -> None:
    palimpsest("install", agent, "--scope", scope)
    created = {name for name, data in tree(root).items() if data is not None}
    assert created == set(CREATED[(agent, scope)])
    for name, expected in CREATED[(agent, scope)].items():
        assert load(root / name) == expected, f"{name} is not in the shape {agent} reads"

    out = palimpsest("uninstall", agent, "--scope", scope)
    assert tree(root) == {}, "uninstall left files or directories behind"
    assert list((root / "data").iterdir()) == [], "uninstall left its lock file or data folder behind"
    assert "note:" not in out, "uninstall printed install's note"


def test_the_windsurf_project_scope_says_the_server_is_user_wide(root: Path) -> None:
    out = palimpsest("install", "windsurf", "--scope", "project")
    assert "mcp_config.json" in out and "hooks only" in out


def test_uninstall_after_an_edit_keeps_the_edit_and_takes_out_only_palimpsest(root: Path) -> None:
    seed(root, SEEDS[("claude", "user")])
    palimpsest("install", "claude")
    settings = root / "home/.claude/settings.json"
    doc = json.loads(settings.read_text())
    doc["hooks"]["Stop"].append({"hooks": [{"type": "command", "command": "added-later"}]})
    doc["model"] = "opus"
    settings.write_text(json.dumps(doc, indent=2) + "\n")

    out = palimpsest("uninstall", "claude")
    assert "unwire" in out and "restore" in out
    after = json.loads(settings.read_text())
    expected = json.loads(SEEDS[("claude", "user")]["home/.claude/settings.json"])
    expected["hooks"]["Stop"].append({"hooks": [{"type": "command", "command": "added-later"}]})
    expected["model"] = "opus"
    assert after == expected
    assert (root / "home/.claude.json").read_text() == SEEDS[("claude", "user")]["home/.claude.json"]


def test_a_second_install_after_an_edit_never_restores_over_the_edit(root: Path) -> None:
    seed(root, SEEDS[("cursor", "user")])
    palimpsest("install", "cursor")
    mcp = root / "home/.cursor/mcp.json"
    doc = json.loads(mcp.read_text())
    doc["mcpServers"]["added"] = {"command": "added"}
    mcp.write_text(json.dumps(doc, indent=2) + "\n")
    palimpsest("install", "cursor", "--store", "sqlite:////tmp/other.db")
    assert json.loads(mcp.read_text())["mcpServers"]["palimpsest"]["args"][-2:] == [
        "--store",
        "sqlite:////tmp/other.db",
    ]

    palimpsest("uninstall", "cursor")
    assert json.loads(mcp.read_text())["mcpServers"] == {**OTHER_SERVERS["mcpServers"], "added": {"command": "added"}}
    assert (root / "home/.cursor/hooks.json").read_text() == SEEDS[("cursor", "user")]["home/.cursor/hooks.json"]


def test_a_changed_store_updates_the_entries_and_uninstall_still_restores_exactly(root: Path) -> None:
    seed(root, SEEDS[("codex", "user")])
    before = tree(root)
    palimpsest("install", "codex")
    palimpsest("install", "codex", "--store", "bolt://127.0.0.1:7687")
    hooks = load(root / "home/.codex/hooks.json")["hooks"]["Stop"]
    assert [h["command"] for group in hooks for h in group["hooks"]] == [
        "say done",
        f"{hook('codex')} --store bolt://127.0.0.1:7687",
    ]
    assert load(root / "home/.codex/config.toml")["mcp_servers"]["palimpsest"]["args"][-1] == "bolt://127.0.0.1:7687"
    palimpsest("uninstall", "codex")
    assert tree(root) == before


def test_an_entry_from_an_older_installation_is_replaced_not_duplicated(root: Path) -> None:
    old = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "/old/venv/bin/palimpsest hook claude"}]}]}}
    seed(root, {"home/.claude/settings.json": dumps(old)})
    palimpsest("install", "claude")
    stop = load(root / "home/.claude/settings.json")["hooks"]["Stop"]
    assert stop == [{"hooks": [{"type": "command", "command": hook("claude")}]}]


def test_a_hook_on_an_event_no_longer_used_is_taken_out(root: Path) -> None:
    old = {"palimpsest": {"PostInvocation": [{"type": "command", "command": "/old/bin/palimpsest hook antigravity"}]}}
    seed(root, {"home/.gemini/config/hooks.json": dumps(old)})
    palimpsest("install", "antigravity")
    assert (
        load(root / "home/.gemini/config/hooks.json")
        == CREATED[("antigravity", "user")]["home/.gemini/config/hooks.json"]
    )


def test_reinstalling_cursor_upgrades_an_older_hooks_json_without_duplicates(root: Path) -> None:
    old_events = ("sessionStart", "beforeSubmitPrompt", "afterAgentResponse", "afterAgentThought", "stop")
    old = {
        "version": 1,
        "hooks": {
            **{event: [{"command": "/old/venv/bin/palimpsest hook cursor"}] for event in old_events},
            "afterFileEdit": [{"command": "./fmt.sh"}],
        },
    }
    seed(root, {"home/.cursor/hooks.json": dumps(old)})
    palimpsest("install", "cursor")
    hooks = load(root / "home/.cursor/hooks.json")["hooks"]
    assert hooks == {
        "afterFileEdit": [{"command": "./fmt.sh"}],
        **{event: [{"command": hook("cursor")}] for event in CURSOR_EVENTS},
    }
    palimpsest("install", "cursor")
    assert load(root / "home/.cursor/hooks.json")["hooks"] == hooks


def test_gemini_is_detected_by_its_own_files_not_by_antigravitys(root: Path) -> None:
    (root / "home/.gemini/antigravity").mkdir(parents=True)
    assert "no agent found" not in palimpsest("install", "--detect", "--dry-run")
    detected = json.loads(palimpsest("install", "--detect", "--dry-run", "--json"))["agents"]
    assert [item["agent"] for item in detected] == ["antigravity"]
    (root / "home/.gemini/tmp").mkdir()
    detected = json.loads(palimpsest("install", "--detect", "--dry-run", "--json"))["agents"]
    assert [item["agent"] for item in detected] == ["antigravity", "gemini"]
    assert "trusted folders" in detected[1]["note"]


def test_codex_servers_written_inline_stay_inline(root: Path) -> None:
    text = '# mine\nmcp_servers = { github = { command = "github-mcp" } }\n'
    seed(root, {"home/.codex/config.toml": text})
    palimpsest("install", "codex")
    after = (root / "home/.codex/config.toml").read_text()
    assert after.startswith("# mine\nmcp_servers = { github = {") and after.count("\n") == 2
    assert load(root / "home/.codex/config.toml")["mcp_servers"]["palimpsest"] == server("codex")
    palimpsest("uninstall", "codex")
    assert (root / "home/.codex/config.toml").read_text() == text


def test_codex_home_is_where_codex_files_go(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEX_HOME", str(root / "home/elsewhere"))
    palimpsest("install", "codex")
    assert (root / "home/elsewhere/config.toml").is_file() and not (root / "home/.codex").exists()


def test_an_invalid_file_stops_install_before_anything_is_written(root: Path) -> None:
    seed(root, {"home/.claude.json": dumps(OTHER_SERVERS), "home/.claude/settings.json": '{"hooks": {"Stop": [}'})
    before = tree(root)
    result = CliRunner().invoke(app, ["install", "claude"])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        f"error: {root / 'home/.claude/settings.json'} is not valid JSON (line 1: Expecting value); "
        "fix it first, nothing was changed"
    ]
    assert tree(root) == before and not (root / "data/palimpsest/install").exists()


def test_a_non_object_where_hooks_go_is_refused(root: Path) -> None:
    seed(root, {"home/.cursor/hooks.json": '{"version": 1, "hooks": []}\n'})
    result = CliRunner().invoke(app, ["install", "cursor"])
    assert result.exit_code == 1 and "'hooks' is not an object" in result.output
    assert not (root / "home/.cursor/mcp.json").exists()


def test_detect_wires_only_the_agents_on_this_machine(root: Path) -> None:
    (root / "home/.codex").mkdir()
    (root / "home/.cursor").mkdir()
    out = json.loads(palimpsest("install", "--detect", "--json"))
    assert [item["agent"] for item in out["agents"]] == ["codex", "cursor"]
    assert (root / "home/.codex/config.toml").is_file() and (root / "home/.cursor/hooks.json").is_file()
    assert not (root / "home/.claude.json").exists()


def test_detect_with_no_agent_says_so(root: Path) -> None:
    assert "no agent found" in palimpsest("install", "--detect")


def test_install_needs_an_agent_or_detect(root: Path) -> None:
    for args in (["install"], ["install", "claude", "--detect"]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2 and "name one AGENT or give --detect" in result.output


def test_uninstall_without_install_changes_nothing(root: Path) -> None:
    seed(root, SEEDS[("claude", "user")])
    before = tree(root)
    assert "left nothing to undo" in palimpsest("uninstall", "claude")
    assert tree(root) == before


def test_user_and_project_installs_are_kept_apart(root: Path) -> None:
    palimpsest("install", "cursor")
    palimpsest("install", "cursor", "--scope", "project")
    palimpsest("uninstall", "cursor")
    assert not (root / "home/.cursor").exists()
    assert load(root / "project/.cursor/mcp.json") == CREATED[("cursor", "project")]["project/.cursor/mcp.json"]
    palimpsest("uninstall", "cursor", "--scope", "project")
    assert tree(root) == {}


def test_uninstall_dry_run_shows_the_diff_and_writes_nothing(root: Path) -> None:
    seed(root, SEEDS[("windsurf", "user")])
    palimpsest("install", "windsurf")
    installed = tree(root)
    out = palimpsest("uninstall", "windsurf", "--dry-run")
    assert f"--- {root / 'home/.codeium/windsurf/hooks.json'}" in out and f"-{' ' * 8}" in out
    assert tree(root) == installed
    palimpsest("uninstall", "windsurf")
    assert tree(root) != installed


def test_a_file_removed_since_install_stays_removed(root: Path) -> None:
    seed(root, SEEDS[("cursor", "user")])
    palimpsest("install", "cursor")
    (root / "home/.cursor/hooks.json").unlink()
    out = json.loads(palimpsest("uninstall", "cursor", "--json"))
    assert {item["path"]: item["action"] for item in out["agents"][0]["files"]} == {
        str(root / "home/.cursor/mcp.json"): "restore",
        str(root / "home/.cursor/hooks.json"): "gone",
    }
    assert not (root / "home/.cursor/hooks.json").exists()
    assert not (root / "data/palimpsest/install").exists()


def test_a_private_file_keeps_its_mode_and_a_symlinked_one_stays_a_link(root: Path) -> None:
    seed(root, {"home/.claude.json": dumps(OTHER_SERVERS), "dotfiles/settings.json": dumps(CLAUDE_SETTINGS)})
    (root / "home/.claude.json").chmod(0o600)
    (root / "home/.claude").mkdir()
    (root / "home/.claude/settings.json").symlink_to(root / "dotfiles/settings.json")

    palimpsest("install", "claude")
    assert (root / "home/.claude.json").stat().st_mode & 0o777 == 0o600
    assert (root / "home/.claude/settings.json").is_symlink()
    assert hook("claude") in (root / "dotfiles/settings.json").read_text()

    palimpsest("uninstall", "claude")
    assert (root / "home/.claude/settings.json").is_symlink()
    assert (root / "dotfiles/settings.json").read_text() == dumps(CLAUDE_SETTINGS)
    assert (root / "home/.claude.json").stat().st_mode & 0o777 == 0o600


def test_an_install_waits_for_one_in_progress(root: Path) -> None:
    seed(root, SEEDS[("codex", "user")])
    before = tree(root)
    env = {**os.environ, "HOME": str(root / "home"), "XDG_DATA_HOME": str(root / "data")}
    places = Places(home=root / "home", project=root / "project", environ=env)
    with Wiring(places).locked():
        child = subprocess.Popen([EXE, "install", "codex"], env=env, cwd=root / "project", stdout=subprocess.DEVNULL)
        with pytest.raises(subprocess.TimeoutExpired):
            child.wait(timeout=5)
        assert tree(root) == before, "an install wrote while another held the lock"
    assert child.wait(timeout=120) == 0
    assert tree(root) != before
    assert [
        item["agent"] for item in json.loads((root / "data/palimpsest/install/manifest.json").read_text())["installs"]
    ] == ["codex"]


def test_a_path_with_spaces_is_quoted_and_still_known_as_palimpsest() -> None:
    from palimpsest.server.agents.documents import is_palimpsest_hook
    from palimpsest.server.agents.spec import Entries

    command = Entries(executable="/Users/me/My Tools/bin/palimpsest", store="sqlite:////tmp/a b.db").hook_command(
        "cursor"
    )
    assert command == "'/Users/me/My Tools/bin/palimpsest' hook cursor --store 'sqlite:////tmp/a b.db'"
    assert is_palimpsest_hook("cursor")(command)
    assert not is_palimpsest_hook("claude")(command)
    assert not is_palimpsest_hook("cursor")("/usr/bin/other hook cursor")
    assert not is_palimpsest_hook("cursor")("palimpsest hook 'unterminated")
