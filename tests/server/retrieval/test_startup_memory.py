"""Where things stand at session start, and facts by default, on Claude Code-shaped sessions.

Each session is written as Claude Code writes its transcript (lines of type ``user`` /
``assistant`` with ``uuid``, ``parentUuid``, ``sessionId``, ``cwd``, ``gitBranch``,
``timestamp``; ``tool_use`` blocks answered by ``tool_result`` blocks; ``TodoWrite``
calls carrying the whole list; a turn that never reached the model as an assistant line
with ``model: "<synthetic>"`` and ``isApiErrorMessage: true``): the shapes of the real
session published in fasthooks' ``specs/data/sample_main_transcript.jsonl``
(pypi-data/pypi-mirror-400) and marot/spotter's ``test/fixtures/transcripts/``. Each is
stored through ``palimpsest hook claude``, compacted and maintained through the CLI, and
the next session's ``SessionStart`` answer is read as the agent gets it.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from palimpsest.graph_schema.backends import open_store
from palimpsest.graph_schema.models import Fact
from palimpsest.server.cli.main import app
from palimpsest.server.retrieval.startup import WorkingTree, project_memory, working_tree

CWD = "/home/grace/src/ledger"


class Session:
    """A Claude Code transcript being written line by line."""

    def __init__(self, folder: Path, session: str, *, day: str = "2025-06-14", branch: str = "main", cwd: str = CWD):
        self.path = folder / f"{session}.jsonl"
        self.session, self.day, self.branch, self.cwd = session, day, branch, cwd
        self.parent: str | None = None
        self.count = 0

    def _line(self, kind: str, content: Any, **extra: Any) -> None:
        self.count += 1
        uuid = f"{self.session[:8]}-{self.count:04d}"
        message: dict[str, Any] = {"role": kind, "content": content}
        if kind == "assistant":
            model = extra.pop("model", "claude-sonnet-4-20250514")
            message = {"id": f"msg_{uuid}", "type": "message", "model": model, **message}
        record = {
            "parentUuid": self.parent,
            "isSidechain": False,
            "userType": "external",
            "cwd": self.cwd,
            "sessionId": self.session,
            "version": "2.0.76",
            "gitBranch": self.branch,
            "type": kind,
            "message": message,
            "uuid": uuid,
            "timestamp": f"{self.day}T10:{self.count // 60:02d}:{self.count % 60:02d}.000Z",
            **extra,
        }
        self.parent = uuid
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")

    def ask(self, text: str) -> None:
        self._line("user", text)

    def say(self, text: str, **extra: Any) -> None:
        self._line("assistant", [{"type": "text", "text": text}], **extra)

    def tool(self, name: str, args: dict[str, Any], result: str, *, error: bool = False) -> None:
        call = f"toolu_{self.session[:4]}{self.count:04d}"
        self._line("assistant", [{"type": "tool_use", "id": call, "name": name, "input": args}])
        block: dict[str, Any] = {"tool_use_id": call, "type": "tool_result", "content": result}
        if error:
            block["is_error"] = True
        self._line("user", [block])

    def todos(self, items: list[tuple[str, str]]) -> None:
        todos = [{"content": text, "status": status, "activeForm": text} for text, status in items]
        self.tool("TodoWrite", {"todos": todos}, "Todos have been modified successfully.")

    def store(self, url: str) -> None:
        stdin = {
            "session_id": self.session,
            "transcript_path": str(self.path),
            "cwd": self.cwd,
            "hook_event_name": "Stop",
        }
        result = CliRunner().invoke(app, ["hook", "claude", "--store", url], input=json.dumps(stdin))
        assert result.exit_code == 0, result.output


def cli(url: str, *args: str, **env: str) -> str:
    result = CliRunner().invoke(app, [*args, "--store", url], env={"PALIMPSEST_STORE": None, **env})
    assert result.exit_code == 0, result.output
    return result.stdout


def memory(url: str, session: str = "new-session", cwd: str = CWD, **env: str) -> str:
    stdin = {"session_id": session, "transcript_path": f"/nowhere/{session}.jsonl", "cwd": cwd}
    stdin |= {"hook_event_name": "SessionStart", "source": "startup"}
    result = CliRunner().invoke(
        app, ["hook", "claude", "--store", url], input=json.dumps(stdin), env={"PALIMPSEST_STORE": None, **env}
    )
    assert result.exit_code == 0, result.output
    text: str = json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"]
    return text


def ci_session(folder: Path, session: str = "aaaa1111-ci") -> Session:
    """A session that sets up CI, meets type errors, fixes them, and ends with every todo done."""
    s = Session(folder, session)
    s.ask("Set up CI for the converter and make type checking pass")
    s.todos([("Add a CI workflow", "in_progress"), ("Fix type checking issues in converter.py", "pending")])
    s.tool(
        "Write", {"file_path": f"{CWD}/.github/workflows/ci.yml", "content": "on: push"}, "File created successfully"
    )
    s.tool("Bash", {"command": "uv add --dev mypy"}, "Resolved 12 packages\nInstalled 1 package")
    s.tool(
        "Bash",
        {"command": "mypy src"},
        "Exit code 1\nsrc/converter.py:12: error: Incompatible return value type\nFound 17 errors in 1 file",
        error=True,
    )
    s.say("The converter uses a dict where mypy expects a Mapping; fixing the annotations.")
    s.todos([("Add a CI workflow", "completed"), ("Fix type checking issues in converter.py", "in_progress")])
    s.tool(
        "Edit",
        {"file_path": f"{CWD}/src/converter.py", "old_string": "a", "new_string": "b"},
        "The file has been updated.",
    )
    s.tool("Bash", {"command": "mypy src"}, "Success: no issues found in 4 source files")
    s.tool(
        "Bash",
        {"command": 'git commit -am "Type-check the converter in CI"'},
        "[main 3f2a9c1] Type-check the converter in CI\n 2 files changed",
    )
    for index in range(14):  # a long tail after the last checkpoint
        s.tool("Read", {"file_path": f"{CWD}/src/module_{index}.py"}, f"def f{index}(): ...")
    s.todos([("Add a CI workflow", "completed"), ("Fix type checking issues in converter.py", "completed")])
    s.say("Fixed all the type issues in converter.py. Type checking passes (0 errors) and CI runs mypy on every push.")
    return s


def test_how_the_last_session_ended_and_nothing_it_finished_is_open(store_url: str, tmp_path: Path) -> None:
    s = ci_session(tmp_path)
    s.store(store_url)
    cli(store_url, "compact", s.session, "--force", "--partition", "claude", PALIMPSEST_KEEP_RECENT="3")
    text = memory(store_url)
    block = text.split(f"### {s.session}", 1)[1].split("\n### ", 1)[0]
    # When it happened: the transcript's own times, not when it was stored.
    assert block.startswith(" (2025-06-14 10:00–10:")
    assert "- Asked:\n  1. Set up CI for the converter and make type checking pass\n" in block
    assert "- Ended: completed. Fixed all the type issues in converter.py. Type checking passes (0 errors)" in block
    # The last todo list says both are done; mypy failed, then passed: nothing is open.
    assert "- Still open: nothing\n" in block
    assert "Fix type checking issues in converter.py" not in block.split("- Ended:")[0]
    assert (
        '- Did: created .github/workflows/ci.yml; edited src/converter.py; committed "Type-check the converter in CI" '
        "(3f2a9c1)"
    ) in block
    assert "Stands for " in text and " tokens of history in 1 session, 2025-06-14 to 2025-06-14.\n" in text


def test_open_steps_are_the_last_todo_state_and_failures_that_never_passed(store_url: str, tmp_path: Path) -> None:
    s = Session(tmp_path, "bbbb2222-open")
    s.ask("Migrate the ledger to Postgres")
    s.todos([("Write the migration", "completed"), ("Run the test suite on Postgres", "pending")])
    s.tool(
        "Bash", {"command": "pytest -q"}, "Exit code 1\nE   psycopg.OperationalError: connection refused", error=True
    )
    # Redone under another program: not open.
    s.tool("Bash", {"command": "python manage.py check"}, "Exit code 127\npython: command not found", error=True)
    s.tool("Bash", {"command": "python3 manage.py check"}, "System check identified no issues (0 silenced).")
    s.say("The database is not running here, so the suite cannot run yet.")
    s.store(store_url)
    block = memory(store_url).split("### bbbb2222-open", 1)[1]
    assert "- Ended: failed: `pytest -q` still failing. The database is not running here" in block
    assert (
        "- Still open:\n  - `pytest -q` still failing: E psycopg.OperationalError: connection refused\n"
        "  - todo: Run the test suite on Postgres\n"
    ) in block
    assert "Write the migration" not in block and "manage.py" not in block.split("- Still open:")[1]
    # A later session of the project finishes both: the older session has nothing open any more.
    later = Session(tmp_path, "cccc3333-later", day="2025-06-15")
    later.ask("Start Postgres and run the suite")
    later.tool("Bash", {"command": "pytest -q"}, "42 passed in 2.10s")
    later.todos([("Run the test suite on Postgres", "completed")])
    later.say("Postgres is up and the suite passes.")
    later.store(store_url)
    text = memory(store_url)
    assert text.index("### cccc3333-later") < text.index("### bbbb2222-open")
    older = text.split("### bbbb2222-open", 1)[1]
    assert "- Still open: nothing\n" in older


def test_work_one_session_left_out_of_git_is_settled_by_a_later_commit_and_push(store_url: str, tmp_path: Path) -> None:
    s = Session(tmp_path, "eeee5555-edits")
    s.ask("Add the CSV export and commit it; push only when I say so")
    s.tool("Edit", {"file_path": f"{CWD}/ledger/export.py", "old_string": "a", "new_string": "b"}, "ok")
    s.tool("Bash", {"command": "git commit -am 'Add the CSV export'"}, "[main 1a2b3c4] Add the CSV export")
    s.tool("Edit", {"file_path": f"{CWD}/README.md", "old_string": "a", "new_string": "b"}, "ok")
    s.say("Committed as `1a2b3c4` and noted the export in the README.")
    s.store(store_url)
    block = memory(store_url).split("### eeee5555-edits", 1)[1]
    assert (
        "- Still open:\n  - uncommitted changes (after the last commit): README.md\n"
        "  - committed, not pushed: 1a2b3c4\n"
    ) in block
    later = Session(tmp_path, "ffff6666-push", day="2025-06-15")
    later.ask("Commit the README and push")
    later.tool("Bash", {"command": "git commit -am 'Document the export'"}, "[main 5d6e7f8] Document the export")
    later.tool(
        "Bash", {"command": "git push origin main"}, "To github.com:acme/ledger.git\n   9f0e1d2..5d6e7f8  main -> main"
    )
    later.say("Pushed.")
    later.store(store_url)
    older = memory(store_url).split("### eeee5555-edits", 1)[1]
    assert "- Still open: nothing\n" in older


def test_sessions_that_are_no_work_are_left_out_but_kept(store_url: str, tmp_path: Path) -> None:
    real = Session(tmp_path, "dddd4444-real")
    real.ask("Add a CSV export")
    real.say("Added `export_csv` to the ledger API.")
    real.store(store_url)
    offline = Session(tmp_path, "eeee5555-offline", day="2025-06-16")
    offline.ask("Refactor the parser")
    offline.say("Not logged in · Please run /login", model="<synthetic>", isApiErrorMessage=True)
    offline.store(store_url)
    injected = Session(tmp_path, "ffff6666-meta", day="2025-06-17")
    injected._line(
        "user", "Caveat: The messages below were generated by the user while running local commands.", isMeta=True
    )
    injected.store(store_url)
    text = memory(store_url)
    assert "### dddd4444-real" in text and "Add a CSV export" in text
    assert "eeee5555-offline" not in text and "Refactor the parser" not in text and "Not logged in" not in text
    assert "ffff6666-meta" not in text
    assert "in 1 session, 2025-06-14 to 2025-06-14; 2 sessions with no work left out.\n" in text
    # Kept in the store, marked.
    out = json.loads(cli(store_url, "grep", "logged", "--partition", "claude", "--json"))
    [hit] = out["hits"]
    assert hit["thread_id"] == "eeee5555-offline"


def test_same_branch_then_files_at_hand_then_newest(store_url: str, tmp_path: Path) -> None:
    repo = tmp_path / "ledger"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.email=t@example.org", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q", "-b", "feature-x"], check=True)
    (repo / "notes.md").write_text("x\n")
    (repo / "parser.py").write_text("x\n")
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "start"], check=True)
    (repo / "parser.py").write_text("y\n")
    assert working_tree(str(repo)) == WorkingTree(str(repo), "feature-x", ("parser.py",))
    cwd = str(repo)
    newest = Session(tmp_path, "s-newest", day="2025-06-20", branch="main", cwd=cwd)
    on_branch = Session(tmp_path, "s-branch", day="2025-06-10", branch="feature-x", cwd=cwd)
    at_hand = Session(tmp_path, "s-at-hand", day="2025-06-12", branch="main", cwd=cwd)
    for session in (newest, on_branch, at_hand):
        session.ask(f"Work in {session.session}")
        target = "parser.py" if session is at_hand else "notes.md"
        session.tool("Edit", {"file_path": f"{cwd}/{target}", "old_string": "x", "new_string": "y"}, "updated")
        session.say("Done with this part.")
        session.store(store_url)
    text = memory(store_url, cwd=cwd)
    order = [text.index(f"### {name}") for name in ("s-branch", "s-at-hand", "s-newest")]
    assert order == sorted(order)
    assert memory(store_url, cwd=cwd) == text  # byte-stable
    assert memory(store_url, cwd=cwd, PALIMPSEST_STARTUP_BUDGET="0") == ""


def test_budget_keeps_whole_sessions(store_url: str, tmp_path: Path) -> None:
    for day in range(1, 9):
        s = Session(tmp_path, f"day-{day:02d}", day=f"2025-07-{day:02d}")
        s.ask(f"Task number {day}: " + "make the importer faster " * 5)
        s.say("Profiled and cached the schema lookups. " * 4)
        s.store(store_url)

    async def build(budget: int) -> str:
        store = open_store(store_url)
        await store.initialize()
        try:
            return await project_memory(store, partition="claude", project="ledger", budget_tokens=budget)
        finally:
            await store.close()

    small, large = asyncio.run(build(300)), asyncio.run(build(1500))
    assert len(small) < len(large) and small.count("### ") < large.count("### ")
    for text in (small, large):
        for block in text.split("### ")[1:]:
            assert "- Still open:" in block  # whole or left out
    assert asyncio.run(build(0)) == ""


def facts_of(url: str) -> list[Fact]:
    async def read() -> list[Fact]:
        store = open_store(url)
        await store.initialize()
        try:
            return await store.list_facts("claude", current_only=False, limit=1000)
        finally:
            await store.close()

    return asyncio.run(read())


JSON_OR_FRAGMENT = re.compile(r'^\w+ \{|^[\[{]|"\w+":')


def test_facts_by_default_from_structure_and_prose_never_from_tool_json(store_url: str, tmp_path: Path) -> None:
    s = ci_session(tmp_path)
    s.tool("Bash", {"command": "git config core.autocrlf input"}, "")
    s.say("Decision: the converter uses typed Mappings everywhere, so mypy runs in strict mode.")
    s.store(store_url)
    cli(store_url, "maintain", "--once")
    facts = facts_of(store_url)
    assert facts and not [fact.text for fact in facts if JSON_OR_FRAGMENT.search(fact.text)]
    current = {fact.text for fact in facts if fact.valid_until is None}
    superseded = {fact.text for fact in facts if fact.valid_until is not None}
    assert f"Created {CWD}/.github/workflows/ci.yml" in current
    assert f"Edited {CWD}/src/converter.py" in current
    assert "Added dependency mypy (uv add)" in current
    assert 'Committed "Type-check the converter in CI" as 3f2a9c1' in current
    assert "Set core.autocrlf to input" in current
    # The pass supersedes the failure, and says what failed and what fixed it.
    assert "`mypy src` failed (exit 1): src/converter.py:12: error: Incompatible return value type" in superseded
    assert (
        "`mypy src` passed (ok) after failing with: src/converter.py:12: error: Incompatible return value type; "
        f"fixed by editing {CWD}/src/converter.py"
    ) in current
    assert "Decision: the converter uses typed Mappings everywhere, so mypy runs in strict mode." in current
    # recall and the session-start memory use them.
    recalled = json.loads(cli(store_url, "recall", "mypy", "--partition", "claude", "--json"))
    assert any("mypy" in fact["text"] for fact in recalled["facts"])
    assert "  - Added dependency mypy (uv add) (msg_" in memory(store_url)


def test_facts_off_everywhere_or_for_one_thread(store_url: str, tmp_path: Path) -> None:
    first = ci_session(tmp_path, "off-1111")
    first.store(store_url)
    cli(store_url, "maintain", "--once", PALIMPSEST_FACTS="off")
    assert facts_of(store_url) == []
    cli(store_url, "kg", "off", "--thread", first.session, "--partition", "claude")
    second = ci_session(tmp_path, "on-2222")
    second.store(store_url)
    cli(store_url, "maintain", "--once")
    threads = {fact.thread_id for fact in facts_of(store_url)}
    assert threads == {second.session}


@pytest.mark.parametrize("split", [5, 6])
def test_a_call_whose_result_comes_later_is_read_with_it(tmp_path: Path, split: int) -> None:
    """Extraction stops before a call still without its result, and reads it again once the result is stored."""
    url = f"sqlite:///{tmp_path / 'm.db'}"
    s = Session(tmp_path, "late-result")
    s.ask("Run the tests")
    s.tool("Bash", {"command": "pytest -q"}, "Exit code 1\nFAILED tests/test_a.py::test_x", error=True)
    s.tool("Bash", {"command": "pytest -q"}, "3 passed in 0.1s")
    lines = s.path.read_text().splitlines(keepends=True)
    s.path.write_text("".join(lines[:split]))
    s.store(url)
    cli(url, "maintain", "--once")
    s.path.write_text("".join(lines))
    s.store(url)
    cli(url, "maintain", "--once")
    texts = sorted((fact.valid_until is None, fact.text) for fact in facts_of(url))
    assert texts == [
        (False, "`pytest -q` failed (exit 1): FAILED tests/test_a.py::test_x"),
        (True, "`pytest -q` passed (ok): 3 passed after failing with: FAILED tests/test_a.py::test_x"),
    ]


def test_a_codex_session_is_read_past_its_injected_context(store_url: str) -> None:
    """Codex's injected context is no request, its plan is read in its last state, its shell output is JSON.

    Shapes: Codex rollouts as `server/agents/codex/transcript.py` stores them (``function_call`` as
    ``name {arguments}`` with metadata ``kind: tool_use`` and ``tool_name``; the output a
    ``tool`` message ``{"output", "metadata": {"exit_code"}}``; ``<environment_context>``
    and AGENTS.md instructions marked ``injected``), ``update_plan``'s ``plan`` of
    ``step`` / ``status``.
    """
    from datetime import UTC, datetime

    from palimpsest.graph_schema.models import NewMessage, Role

    steps: list[tuple[Role, str, str | None, dict[str, Any]]] = []

    def call(call_id: str, name: str, args: dict[str, Any]) -> None:
        steps.append((Role.assistant, f"{name} {json.dumps(args)}", call_id, {"kind": "tool_use", "tool_name": name}))

    def output(call_id: str, text: str, code: int) -> None:
        body = json.dumps({"output": text, "metadata": {"exit_code": code, "duration_seconds": 0.4}})
        steps.append((Role.tool, body, call_id, {"kind": "tool_result"}))

    steps.append((Role.system, "# AGENTS.md instructions for /srv/ledger", None, {"injected": True}))
    steps.append(
        (Role.user, "<environment_context>\n  <cwd>/srv/ledger</cwd>\n</environment_context>", None, {"injected": True})
    )
    steps.append((Role.user, "Make the importer skip blank rows", None, {}))
    call("c1", "update_plan", {"plan": [{"step": "Skip blank rows", "status": "in_progress"}]})
    call("c2", "shell", {"command": ["bash", "-lc", "pytest -q tests/test_importer.py"]})
    output("c2", "1 failed, 8 passed", 1)
    call("c3", "shell", {"command": ["bash", "-lc", "pytest -q tests/test_importer.py"]})
    output("c3", "9 passed in 0.3s", 0)
    call("c4", "update_plan", {"plan": [{"step": "Skip blank rows", "status": "completed"}]})
    steps.append((Role.assistant, "The importer now skips blank rows; all 9 importer tests pass.", None, {}))
    messages = [
        NewMessage(
            role=role,
            content=content,
            tool_call_id=call_id,
            metadata={"source": "codex", **metadata},
            message_id=f"line-{index}",
            created_at=datetime(2025, 9, 3, 8, index, tzinfo=UTC),
        )
        for index, (role, content, call_id, metadata) in enumerate(steps)
    ]

    async def run() -> str:
        store = open_store(store_url)
        await store.initialize()
        try:
            await store.append_messages("codex", "rollout-1", messages, project="ledger")
            return await project_memory(store, partition="codex", project="ledger", budget_tokens=1500)
        finally:
            await store.close()

    text = asyncio.run(run())
    assert "### rollout-1 (2025-09-03 08:02–08:09 UTC, 10 messages;" in text
    assert "- Asked:\n  1. Make the importer skip blank rows\n" in text
    assert "environment_context" not in text and "AGENTS.md" not in text
    assert "- Ended: completed. The importer now skips blank rows; all 9 importer tests pass.\n" in text
    assert "- Did: checks: `pytest -q tests/test_importer.py` passed\n" in text
    assert "- Still open: nothing\n" in text


def test_structural_facts_of_dependencies_settings_and_commits_that_did_not_happen(
    store_url: str, tmp_path: Path
) -> None:
    s = Session(tmp_path, "deps-1111")
    s.ask("Add the HTTP client and the test runner")
    s.tool(
        "Bash", {"command": 'pip install "fastapi>=0.110" httpx'}, "Successfully installed fastapi-0.110.0 httpx-0.27.0"
    )
    s.tool("Bash", {"command": "npm install --save-dev vitest && npm test"}, "added 1 package\n3 passed")
    s.tool("Bash", {"command": "export DATABASE_URL=postgres://localhost/ledger"}, "")
    s.tool(
        "Bash",
        {"command": 'git commit -m "Nothing here"'},
        "Exit code 1\nnothing to commit, working tree clean",
        error=True,
    )
    s._line(
        "assistant",
        [
            {
                "type": "thinking",
                "thinking": "The API uses FastAPI with httpx as its client library.",
                "signature": "c2ln",
            }
        ],
    )
    s.say('Bash {"command": "grep -rn uses config.py", "description": "Find what the config uses"}')
    s.store(store_url)
    cli(store_url, "maintain", "--once")
    texts = {fact.text for fact in facts_of(store_url)}
    assert {
        "Added dependency fastapi>=0.110 (pip install)",
        "Added dependency httpx (pip install)",
        "Added dependency vitest (npm install)",
        "Set DATABASE_URL to postgres://localhost/ledger",
    } <= texts
    assert not [text for text in texts if text.startswith("Committed")]
    assert '`git commit -m "Nothing here"` failed (exit 1): nothing to commit, working tree clean' in texts
    # Neither thinking nor a reply that reads like a tool call is prose to extract.
    assert not [text for text in texts if "FastAPI with httpx" in text or JSON_OR_FRAGMENT.search(text)]
