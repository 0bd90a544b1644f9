"""Facts worth keeping: what changed state and how, errors with their fix, rejections, lessons; never a mere read.

Structural facts are read from sessions in Claude Code's real shapes (`tests/support/session_shapes.py`)
through the real parser; prose facts from assistant text in the shapes real replies take
(summary bullets with code spans, "I see the issue - ...", labelled points).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from palimpsest.scheduler.facts import extract_from_text, facts_in_message
from palimpsest.scheduler.shell_commands import category, effects, families, family, parse, shown
from palimpsest.scheduler.structural_facts import StructuralFact, structural_facts
from palimpsest.server.agents.codex.transcript import parse_codex
from tests.support.agent_sessions import stored
from tests.support.session_shapes import CWD, Claude, Codex, messages_of


def facts(session: Claude) -> list[StructuralFact]:
    return structural_facts(messages_of(session)).facts


@pytest.mark.parametrize(
    ("command", "kind"),
    [
        ("ls -la ~/.claude/projects/ 2>/dev/null | head -20", "read"),
        ("git status", "read"),
        ("git branch --show-current", "read"),
        ("git show origin/main:cmd/list.go | grep -B 5 Steps", "read"),
        ("gh pr view 37 --json title,body", "read"),
        ("sed -n 1,40p setup.go", "read"),
        ("find ~/.claude -name '*.json' | xargs -I{} sh -c 'echo {} && cat {}'", "read"),
        ("cd /repo && git log --oneline | head", "read"),
        ("mise run fmt && mise run lint", "check"),
        ("uv run pytest -q tests/test_api.py 2>&1 | tail -5", "check"),
        ("go test -tags=integration ./cmd/... -timeout 60s", "check"),
        ("echo '# Red' >> docs/color.md", "state"),
        ("rm -rf ~/.claude/projects/-tmp-test-repo/", "state"),
        ("git branch -m old new", "state"),
        ("sed -i 's/a/b/' config.toml", "state"),
        ("python scripts/migrate.py", "other"),
        (
            'head -5 s.jsonl | jq -c keys || head -1 s.jsonl | python3 -c "import json,sys; print(sys.stdin.read())"',
            "read",
        ),
        # A script run inline that opens a file for writing changes it (an edit done from Python when Edit failed).
        ("python3 -c \"import json; json.dump({}, open('out.json', 'w')); print('ok')\"", "state"),
        ("python3 -c \"print(open('out.json').read())\"", "read"),
        ('python -c "import app; app.reset_db()"', "other"),
        ("node -e \"console.log(require('./package.json').version)\"", "read"),
        # Listings and queries seen in Codex rollouts (EntityProcess/agentv, planetfall-seed-signalkit).
        ("git branch --contains d5897e7 --all", "read"),
        ("git branch --all --list '*pr-679*' '*promptfoo*'", "read"),
        ("git tag --list 'v4.*' --sort=-version:refname", "read"),
        ("git tag --points-at HEAD", "read"),
        ("git tag -d v1.0", "state"),
        ("npm view @acme/core dist-tags version --json", "read"),
        ("entire checkpoint explain --help", "read"),
        ("gh api repos/acme/tool/contents/package.json --jq '.content' | base64 -d | sed -n '1,40p'", "read"),
        ('bun -e "console.log(typeof Bun.semver)"', "read"),
        ("npx --yes biome check .", "check"),
        # ``rtk`` runs the command after it, its output trimmed (PackmindHub/context-evaluator checkpoints).
        ("rtk git status", "read"),
        ("rtk git log --oneline -5", "read"),
        ("rtk bun run test 2>&1 | tail -20", "check"),
        # A wrapper's own arguments are no program: a time limit, a signal, a niceness, a user.
        ("timeout 60 pytest -q", "check"),
        ("timeout -s KILL 5s tail -f app.log", "read"),
        ("nice -n 10 make test", "check"),
        ("sudo -u postgres psql -c 'select count(*) from users'", "read"),
        ("env -i pytest -q", "check"),  # env's -i takes no value
        # Loops of reads (a Codex rollout of EntityProcess/agentv reads five workflows in one).
        ("for f in publish.yml deploy.yml; do echo '---' $f; gh api repos/acme/tool/contents/$f; done", "read"),
        ("git log --merges --format=%s | grep -o '#[0-9]*' | while read pr; do gh pr view \"$pr\"; done", "read"),
        ('for f in *.orig; do rm "$f"; done', "state"),
        ("while true; do curl -s localhost:3000/health; sleep 1; done", "read"),
        # A tool asked what there is, by its subcommand (shapes: Claude Code sessions of Entire CLI users).
        ('echo "=== which entire ===" && which entire && entire version', "read"),
        ('echo "=== session list ==="; entire session list; entire checkpoint list', "read"),
        ("entire auth status", "read"),
        ("entire repo mirror get acme/app --no-pager", "read"),
        ('docker compose config 2>/dev/null | grep "name: cybervpn-" | sort -u | wc -l', "read"),
        ("npm config set registry https://npm.acme.dev", "other"),
        # GitButler's CLI (vidluther/linkblog): its status reads, its commit, push and pull request change state.
        ("but status --json -f", "read"),
        ("but commit update-feed-docs -m 'docs: update the feed tests' -p upw,yu", "state"),
        ("but pr new update-feed-docs -m 'Update the feed tests'", "state"),
        ("but commit --help 2>&1 | head -30", "read"),
        ("docker ps -a", "read"),
        # Is it still running? (a Claude Code session of a take-home dashboard polls its fetcher this way)
        ('pgrep -fa \'fetch.py\' && echo "---running---" || echo "---not running---"', "read"),
        ("rm list", "state"),
        ("kubectl get pods", "state"),
        ("entire session attach 1277548c", "other"),
        ("python manage.py show", "other"),
        # PowerShell, as Claude Code runs it on Windows: reading cmdlets, printed strings, variables set.
        ("(Get-Command scoop -ErrorAction SilentlyContinue).Source; (Get-Command winget).Source", "read"),
        ('$env:Path += ";C:\\Users\\dev\\bin"; "--- help ---"; entire --help | Select-Object -First 60', "read"),
        ('$dest = "C:\\bin"; Expand-Archive -Path $zip -DestinationPath $dest -Force', "other"),
        ("try { $r = Invoke-RestMethod https://api.github.com/repos/a/b/releases/latest } catch { }", "read"),
        # Probes that only print (Codex and Claude Code sessions of chikachow/cyspbot, Entire CLI users): ssh's
        # configuration and keys, a URL fetched, a tool's listing, a program looked up, JSON pretty-printed.
        ("ssh -G github.com", "read"),
        ("ssh-keygen -lf ~/.ssh/id_ed25519_github.pub && ssh-add -l", "read"),
        ("ssh-keygen -t ed25519 -f ~/.ssh/deploy_key", "other"),
        ("ssh -vvvT -o BatchMode=yes git@github.com", "other"),
        ("command -v entire && entire --version", "read"),
        ("entire rewind --list", "read"),
        ("gh api repos/a/b/branches/develop/protection | python3 -m json.tool", "read"),
        ("curl -fsSL https://coderabbit.ai/integrations/schema.v2.json -o /tmp/coderabbit-schema.json", "read"),
        ("curl -s -o /dev/null -w '%{http_code}' https://app.acme.dev/health", "read"),
        ('Invoke-RestMethod "http://127.0.0.1:8765/health" -Method Get', "read"),
        ("curl -X POST -d '{}' https://api.acme.dev/jobs", "other"),
        ("curl -XDELETE https://api.acme.dev/jobs/7", "other"),
        ("curl -o vendor/htmx.min.js https://unpkg.com/htmx.org", "other"),
        ("curl -O https://example.com/tool.tgz", "other"),
        ("curl -fsSL https://bun.sh/install | bash", "other"),
        ("Invoke-WebRequest https://example.com/a.zip -OutFile C:/proj/a.zip", "other"),
        ("$items = Get-ChildItem -Recurse; $items | Measure-Object", "read"),
        # Claude Code on Windows hands commands to a shell (AlexandreVassard/will-it-rain's session shape).
        ("powershell -Command \"Get-ChildItem 'c:\\Users\\dev\\app\\dist\\index.mjs'\"", "read"),
        ("powershell -Command \"Set-Location 'c:\\Users\\dev\\app'; npx vitest run --reporter=verbose\"", "check"),
        ('"C:/Program Files/Git/bin/bash.exe" -c "cd /c/Users/dev/app && npx vitest run --reporter=verbose"', "check"),
    ],
)
def test_what_kind_of_command_it_is(command: str, kind: str) -> None:
    assert category(command) == kind


@pytest.mark.parametrize(
    ("command", "named"),
    [
        ("cd /repo && npm test 2>&1 | tail -5", "npm test"),
        ("export CI=1 && source .venv/bin/activate && pytest -q", "pytest -q"),
        # PowerShell, as Claude Code runs it on Windows (keparlak/NumWordify): the PATH set up, a folder entered.
        (
            '$env:Path += ";C:\\Users\\dev\\bin"; Set-Location "C:\\Users\\dev\\my app"; entire session attach 1277',
            "entire session attach 1277",
        ),
        ("cd src; ls", "ls"),
        (
            '$env:Path += ";C:\\bin"; Set-Location "C:\\dev\\app"\n'
            "entire session attach 1277 2>&1 | Select-Object -First 40",
            "entire session attach 1277",
        ),
        ("echo done", "echo done"),
    ],
)
def test_a_command_is_named_without_the_steps_that_set_it_up(command: str, named: str) -> None:
    assert shown(command) == named


def test_state_changes_are_named_by_what_they_did() -> None:
    changed = [e.text for e in effects("rm docs/blue.md && echo x >> docs/color.md && git add -A && git branch -m a b")]
    assert changed == [
        "Deleted docs/blue.md",
        "Staged all changes (git add)",
        "Renamed branch a to b",
        "Appended to docs/color.md",
    ]
    assert effects("git status && ls") == []
    script = (
        "python3 - <<'PY'\nwith open('src/app.tsx') as f:\n    text = f.read()\nwith open('src/app.tsx', 'w') as f:\n"
    )
    assert [e.text for e in effects(script + "    f.write(text.replace('a', 'b'))\nPY")] == ["Wrote src/app.tsx"]
    assert [e.files for e in effects("mv .planning/todos/pending/x.md .planning/todos/done/")] == [
        ((".planning/todos/pending/x.md", "deleted"), (".planning/todos/done/x.md", "created"))
    ]
    assert family("go test -v -run TestX ./pkg/") == family("go test ./...") == "go test"
    assert family("mise run lint") != family("mise run test")
    assert families("mise run fmt && mise run lint") == {"mise run fmt", "mise run lint"}
    assert families("cd cli && go test ./... 2>&1 | tail -5") == {"go test"}
    # A check pointed at another package is another check: one package building says nothing of the next.
    assert family("swift build --package-path control-plane 2>&1 | tail -10") == "swift build @control-plane"
    assert family("swift build --package-path libs/scim") != family("swift build --package-path control-plane")
    assert family("pnpm --filter=web build") == family("pnpm --filter web build") == "pnpm @web"
    assert family("make -C docs html") == "make @docs" and family("pytest -p no:cacheprovider") == "pytest"
    # A package runner and xargs run the tool they name: one check whatever runs it.
    assert families("git ls-files -z | xargs -0 bunx biome check") == {"biome check"}
    assert families("npx --yes biome check src/") == families("bunx biome check --write x.ts") == {"biome check"}
    # A toolchain chosen for one run (a Codex session of jdx/communique: the default rustc too old for a dependency)
    # runs the same check: `cargo test --no-run` failing is fixed by `cargo +1.96.0 test` passing.
    assert families("cargo +1.96.0 test --no-run") == families("cargo test --no-run") == {"cargo test"}
    # Scratch files (a temporary folder, a file mktemp made) and listings change nothing.
    assert effects("mkdir -p /tmp/planetfall-shots") == []
    assert effects("git branch --contains d5897e7 --all") == effects("git tag --points-at HEAD") == []
    body = 'BODY=$(mktemp "${TMPDIR:-/tmp}/pr.XXXXXX") && cat > "$BODY" <<\'EOF\'\nSummary\nEOF\n'
    body += "gh pr create --draft --base main"
    assert [e.text for e in effects(body)] == ["Opened PR"]
    # A loop's variable names no file: "Deleted $f" would tell a later session nothing.
    assert effects('for f in *.orig; do rm "$f"; done') == effects("for f in a b; do git add $f; done") == []
    assert [e.text for e in effects("for f in a b; do echo $f; done > list.txt")] == ["Wrote list.txt"]
    # A skill's preamble keeps its state under a home dot-folder and its screenshots in a folder a variable names
    # (the shape of a gstack skill's Bash calls in Soph/energy-import-export's Claude Code session); a redirect
    # closing ``$(... 2>/dev/null)`` writes no file. Deleting under a dot-folder is still a change.
    preamble = (
        "_UPD=$(~/.claude/skills/gstack/bin/gstack-update-check 2>/dev/null || true)\n"
        'mkdir -p ~/.gstack/sessions\ntouch ~/.gstack/sessions/"$PPID"\n'
        'echo \'{"skill":"gstack"}\' >> ~/.gstack/analytics/skill-usage.jsonl 2>/dev/null || true'
    )
    assert effects(preamble) == []
    shots = 'SCRATCH=/private/tmp/claude-501/scratchpad\nmkdir -p "$SCRATCH"\n$B screenshot "$SCRATCH/top.png"'
    assert effects(shots) == []
    assert [e.text for e in effects("rm -rf ~/.cache/app/ && echo x > notes.txt")] == [
        "Deleted ~/.cache/app/",
        "Wrote notes.txt",
    ]


def test_powershell_cmdlets_that_write_are_named_by_what_they_did() -> None:
    # Codex on Windows runs PowerShell (Real-s/mini-simclr-assignment's rollouts): an edit is a Set-Content of what
    # Get-Content read, a backslash separates folders, and cmdlets and their parameters are named or positional.
    edit = (
        "(Get-Content -Encoding UTF8 code\\linear_probe.py) -replace 'a', 'b' "
        "| Set-Content -Encoding UTF8 code\\linear_probe.py"
    )
    assert category(edit) == "state"
    assert [(e.text, e.files) for e in effects(edit)] == [
        ("Wrote code/linear_probe.py", (("code/linear_probe.py", "written"),))
    ]
    assert [e.text for e in effects("New-Item -ItemType Directory -Force -Path report\\figures")] == [
        "Created directory report/figures"
    ]
    assert [e.text for e in effects('Add-Content .gitignore "data_working/"; Remove-Item -Recurse -Force build')] == [
        "Appended to .gitignore",
        "Deleted build",
    ]
    assert [e.files for e in effects("Move-Item -Path old.txt -Destination done\\")] == [
        (("old.txt", "deleted"), ("done/old.txt", "created"))
    ]
    assert [e.text for e in effects("Rename-Item -Path docs\\a.md -NewName b.md")] == ["Renamed docs/a.md to docs/b.md"]
    assert category("Get-Content code\\model.py | Select-Object -First 40") == "read"
    assert [e.text for e in effects('powershell -NoProfile -Command "Remove-Item docs\\a.md"')] == ["Deleted docs/a.md"]
    assert [e.text for e in effects("bash -lc 'echo ok > status.txt'")] == ["Wrote status.txt"]
    # A hyphenated header in a bash line is no cmdlet: its escapes stay escapes.
    assert parse('curl -H "Content-Type: application/json" -d "{\\"a\\": 1}" https://x').commands == [
        ["curl", "-H", "Content-Type: application/json", "-d", '{"a": 1}', "https://x"]
    ]


def test_no_fact_of_a_read_only_command_and_a_state_change_by_its_effect(tmp_path: Path) -> None:
    s = Claude(tmp_path, "aaaa-reads")
    s.ask("Clean up the test sessions")
    s.bash("ls -la ~/.claude/projects/-tmp-test-repo/", "total 8")
    s.bash("cat ~/.claude/projects/-tmp-test-repo/a.jsonl | head -5", '{"type":"human"}')
    s.bash("git status", "On branch main")
    s.bash("ls missing/", "ls: missing/: No such file or directory", error=True)
    s.bash('rm -rf ~/.claude/projects/-tmp-test-repo/ && echo "Cleaned up"', "Cleaned up")
    texts = [fact.text for fact in facts(s)]
    assert texts == ["Deleted ~/.claude/projects/-tmp-test-repo/"]


def test_a_check_keeps_one_current_outcome_and_says_what_fixed_it(tmp_path: Path) -> None:
    s = Claude(tmp_path, "bbbb-check")
    s.ask("Make the resume tests pass")
    s.bash(
        "go test -v -run TestResume_User ./cmd/cli/integration_test/",
        "Exit code 1\n--- FAIL: TestResume_User",
        error=True,
    )
    s.tool("Edit", {"file_path": f"{CWD}/cmd/cli/resume.go", "old_string": "a", "new_string": "b"}, "updated")
    s.bash("go test ./cmd/cli/integration_test/", "ok  \tcli/integration_test\t37.7s")
    found = facts(s)
    checks = [fact for fact in found if fact.kind == "command"]
    assert {fact.subject for fact in checks} == {"command:go test"}
    assert checks[-1].text == (
        "`go test ./cmd/cli/integration_test/` passed (ok) after failing with: --- FAIL: TestResume_User; "
        f"fixed by editing {CWD}/cmd/cli/resume.go"
    )


def test_a_command_stopped_by_its_own_limit_or_kill_did_not_fail(tmp_path: Path) -> None:
    """A dev server sampled for ten seconds ends with ``timeout``'s 124; a port read then killed with SIGTERM's 143
    (Claude Code reports both "Exit code N", marked as errors); the read is no fact at all. A check that hits its
    limit hung: still a failure."""
    s = Claude(tmp_path, "stop-own")
    s.ask("Check that the dev server starts")
    served = "Exit code 124\n> app@1.0.0 dev\n> vite\n  Local:   http://localhost:5173/"
    s.bash("timeout 10 npm run dev", served, error=True)
    s.bash("cat /dev/ttyUSB0 & sleep 5; kill $!", "Exit code 143\nboot: ok", error=True)
    s.bash("timeout 60 pytest -q", "Exit code 124\ntests/test_api.py::test_slow", error=True)
    texts = [fact.text for fact in facts(s)]
    assert texts == [
        "`timeout 10 npm run dev` ran until the limit or kill it was given stopped it "
        "(exit 124, serving http://localhost:5173/)",
        "`timeout 60 pytest -q` failed (exit 124): tests/test_api.py::test_slow",
    ]


def test_a_tool_error_is_kept_with_the_input_that_fixed_it(tmp_path: Path) -> None:
    s = Claude(tmp_path, "cccc-fix")
    s.ask("Use the code-simplifier plugin on this branch")
    error = "Agent type 'code-simplifier' not found. Available agents: Bash, Explore, code-simplifier:code-simplifier"
    prompt = "Simplify the code added in this branch"
    s.tool("Task", {"description": "Simplify", "prompt": prompt, "subagent_type": "code-simplifier"}, error, error=True)
    s.tool(
        "Task",
        {"description": "Simplify", "prompt": prompt, "subagent_type": "code-simplifier:code-simplifier"},
        "Reduced the integration by 71 lines.",
    )
    [fact] = facts(s)
    assert (fact.kind, fact.subject) == ("lesson", "error:Task:subagent_type")
    assert fact.text == f"Task failed ({error}); it worked with subagent_type=code-simplifier:code-simplifier"


def test_a_rejected_write_is_a_decision_and_no_file_change(tmp_path: Path) -> None:
    s = Claude(tmp_path, "dddd-reject")
    s.ask("Add a standard MIT license")
    s.reject("Write", {"file_path": f"{CWD}/LICENSE", "content": "Copyright (c) 2026 Entire"}, "Entire Inc.")
    s.tool("Write", {"file_path": f"{CWD}/LICENSE", "content": "Copyright (c) 2026 Entire Inc."}, "File created")
    assert [(fact.kind, fact.text) for fact in facts(s)] == [
        ("decision", 'The user rejected Write LICENSE, saying: "Entire Inc."'),
        ("change", f"Created {CWD}/LICENSE"),
    ]


def test_a_stop_hook_that_kept_the_agent_working_is_the_projects_rule(tmp_path: Path) -> None:
    # Claude Code's line when a Stop hook blocks (DRMacIver/claude-reliability's plugin, its snapshot sessions): the
    # hook's command in brackets, then what it printed, headings first.
    s = Claude(tmp_path, "hhhh-stop-hook")
    s.ask("Add a multiply_numbers function")
    s.tool("Edit", {"file_path": f"{CWD}/src/math_utils.py", "old_string": "a", "new_string": "b"}, "updated")
    s.say("Added `multiply_numbers`.")
    s.ask(
        "Stop hook feedback:\n[${CLAUDE_PLUGIN_ROOT}/scripts/hooks/stop.sh]: # Running Quality Checks...\n\n"
        "# Uncommitted Changes Detected\n\nCannot exit with unstaged changes.\n\nBefore stopping, please:\n"
    )
    assert [(fact.kind, fact.subject, fact.text) for fact in facts(s)] == [
        ("change", f"file:{CWD}/src/math_utils.py", f"Edited {CWD}/src/math_utils.py"),
        (
            "configuration",
            "hook:stop:stop.sh",
            "A Stop hook (stop.sh) kept the agent from stopping: Cannot exit with unstaged changes.",
        ),
    ]


def test_a_call_not_permitted_ran_nothing_and_its_later_run_is_told_under_the_same_subject(tmp_path: Path) -> None:
    # Claude Code run where no one answers its permission prompt (SamuelRodriguess/acmebank-service's session).
    s = Claude(tmp_path, "dddd-not-granted")
    s.ask("fix the failing user service test")
    spec = f"{CWD}/src/user.service.spec.ts"
    edit = {"file_path": spec, "old_string": "a", "new_string": "b"}
    s.tool(
        "Edit", edit, f"Claude requested permissions to write to {spec}, but you haven't granted it yet.", error=True
    )
    s.bash("npm test", "This command requires approval", error=True)
    found = facts(s)
    assert [(fact.kind, fact.subject, fact.text) for fact in found] == [
        (
            "limitation",
            f"file:{spec}",
            "Edit user.service.spec.ts not done: not permitted (the user had not granted it)",
        ),
        ("command", "command:npm test", "`npm test` not run: not permitted (the user had not granted it)"),
    ]  # never "`npm test` failed": it never ran
    s.tool("Edit", edit, "The file has been updated.")
    s.bash("npm test", "Tests: 12 passed, 12 total")
    later = facts(s)[2:]
    assert [(fact.kind, fact.subject) for fact in later] == [
        ("change", f"file:{spec}"),
        ("command", "command:npm test"),
    ]


def test_a_commit_keeps_the_first_line_of_its_body(tmp_path: Path) -> None:
    s = Claude(tmp_path, "eeee-commit")
    s.ask("commit this")
    message = (
        "git add -A && git commit -m \"$(cat <<'EOF'\nFix resume test hanging on the prompt\n\n"
        '- Add syscall.Setsid to RunResume so huh cannot open /dev/tty\n\nCo-Authored-By: Claude\nEOF\n)"'
    )
    s.bash(message, "[fix-resume 24a8866] Fix resume test hanging on the prompt\n 1 file changed")
    texts = [fact.text for fact in facts(s)]
    assert (
        'Committed "Fix resume test hanging on the prompt" as 24a8866: '
        "Add syscall.Setsid to RunResume so huh cannot open /dev/tty"
    ) in texts


def test_prose_keeps_lessons_limits_and_named_changes_but_not_vague_ones() -> None:
    reply = (
        "I see the issue - the `io.Copy` goroutine is competing with the `respond` function for pty reads.\n\n"
        "The Linear MCP server doesn't expose an `issue` parameter on `create_document`.\n\n"
        "- ✅ Fixed potential nil pointer dereference in the OpenCode stop handler\n"
        "- **Race condition**: WaitGroup tracks goroutines before they spawn\n"
        "- [ ] Verify telemetry is disabled when settings don't exist\n\n"
        "I looked into the flow and fixed it."
    )
    assert [(fact.kind, fact.subject, fact.text) for fact in extract_from_text(reply)] == [
        ("lesson", "io.copy", reply.splitlines()[0]),
        ("limitation", "issue", "The Linear MCP server doesn't expose an `issue` parameter on `create_document`."),
        ("change", "opencode", "Fixed potential nil pointer dereference in the OpenCode stop handler"),
        ("point", "waitgroup", "Race condition: WaitGroup tracks goroutines before they spawn"),
    ]


def test_progress_narration_is_no_fact_whatever_its_apostrophe() -> None:
    # Codex narrates its work between calls, with typographic apostrophes (Codex 0.140 rollouts of
    # EntityProcess/agentv): "I’m checking ...", "I’ll ..." say what comes, not what is.
    reply = (
        "I\u2019m checking current tags and npm dist-tags now because the stale `4.39.0` pointer is suspect.\n\n"
        "Next I\u2019m pulling the `Publish` run logs via the API.\n\n"
        "I\u2019ll use the `ce-plan` skill because you asked for a concrete plan.\n\n"
        "Tags created with `GITHUB_TOKEN` do not trigger the separate `publish.yml` workflow."
    )
    assert [fact.text for fact in extract_from_text(reply)] == [
        "Tags created with `GITHUB_TOKEN` do not trigger the separate `publish.yml` workflow."
    ]


def test_a_check_says_its_counts_and_one_behind_a_filter_is_judged_by_its_output(tmp_path: Path) -> None:
    # bun's summary lines (PackmindHub/context-evaluator), pytest's (codyborders/pup-mcp); ``| tail`` hides the
    # exit status, so the output tells: an error first, or a summary counting failures.
    s = Claude(tmp_path, "t1t1-counts")
    s.ask("Make the tests pass")
    s.bash(
        "bun run test 2>&1",
        "$ bun test src/\n\n 1244 pass\n 0 fail\n 2695 expect() calls\nRan 1244 tests across 56 files.",
    )
    s.bash("python -m pytest tests/ -q 2>&1 | tail -3", "........\n202 passed in 3.10s")
    s.bash("rtk bun run lint 2>&1 | tail -20", "error: unrecognized subcommand 'bun'\n\nUsage: rtk [OPTIONS] <COMMAND>")
    s.bash("bun test src/ 2>&1 | tail -4", " 1606 pass\n 24 fail\n 16 errors\nRan 1630 tests across 96 files.")
    s.bash("pip install respx pytest-asyncio 2>&1 | tail -1", "Successfully installed respx-0.22.0")
    s.bash("bun run lint 2>&1", "$ biome check --error-on-warnings\nChecked 282 files in 156ms. No fixes applied.")
    texts = [fact.text for fact in facts(s)]
    assert texts == [
        "`bun run test` passed (ok): 1244 passed, 0 failed",
        "`python -m pytest tests/ -q` passed (ok): 202 passed",
        "`rtk bun run lint` failed (error): error: unrecognized subcommand 'bun'",
        "`bun test src/` failed (error): 1606 passed, 24 failed",
        "Added dependency respx (pip install)",
        "Added dependency pytest-asyncio (pip install)",
        # The same check run another way passes: the way that failed is named, a lesson for the next session.
        "`bun run lint` passed (ok) after `rtk bun run lint` failed with: error: unrecognized subcommand 'bun'",
    ]


def test_a_quiet_commit_is_named_by_the_log_line_after_it_and_a_server_still_running_did_not_pass(
    tmp_path: Path,
) -> None:
    # ``git commit -q ... && git log --oneline`` (Nishanth-sebastin/eagerminds-bookmarks); a dev server started in
    # the background (Claude Code's "Command running in background with ID").
    s = Claude(tmp_path, "q2q2-quiet")
    s.ask("Scaffold the app and commit")
    s.bash(
        "git commit -q -m \"$(cat <<'EOF'\nfeat: scaffold the app (Phase 1)\n\nPin the Turbopack root.\nEOF\n)\" "
        "&& git log --oneline -3",
        "54b89a5 feat: scaffold the app (Phase 1)\n7b3a10c docs: add build plan",
    )
    s.tool(
        "Bash", {"command": "npm run dev", "run_in_background": True}, "Command running in background with ID: bash_1"
    )
    texts = [fact.text for fact in facts(s)]
    assert texts == [
        'Committed "feat: scaffold the app (Phase 1)" as 54b89a5: Pin the Turbopack root.',
        "`npm run dev` started, still running when last seen",
    ]


def test_a_codex_dev_server_still_running_is_started_not_passed_and_a_poll_settles_a_check(tmp_path: Path) -> None:
    # Codex 0.140's unified exec (blackgirlbytes/planetfall-seed-signalkit, EntityProcess/agentv): a command answers
    # "Process running with session ID N"; ``npm run dev`` prints where it listens and no poll sees it exit, while
    # the ``write_stdin`` poll that sees ``bun run typecheck`` exit gives that check its outcome.
    rollout = Codex()
    rollout.message("user", "Show me level 2 in the browser")
    rollout.exec(
        "c1",
        "npm run dev -- --host 127.0.0.1",
        "VITE v5.4.21 ready\n  Local:   http://127.0.0.1:5174/",
        None,
        session=70191,
    )
    rollout.exec("c2", "bun run typecheck", "$ tsc --noEmit", None, session=9969)
    rollout.poll("c3", 9969, "Found 0 errors.", 0)
    transcript = parse_codex(rollout.write(tmp_path / "rollout.jsonl"), partition="codex")
    found = structural_facts(stored([m for batch in transcript.batches for m in batch.messages], partition="codex"))
    # Settled in the same messages, the check is told once, by its outcome.
    assert [fact.text for fact in found.facts] == [
        "`bun run typecheck` passed (exit 0)",
        "`npm run dev -- --host 127.0.0.1` started at http://127.0.0.1:5174/, still running when last seen",
    ]


def test_a_claude_background_job_is_settled_by_the_notice_or_the_poll_that_sees_it_end(tmp_path: Path) -> None:
    # Claude Code's background shell: the notice of its end (a ``<task-notification>`` user line), or a
    # ``TaskOutput`` poll's ``<status>completed</status>`` with its ``<exit_code>``, gives its outcome; a job the
    # agent stopped (``TaskStop``) has none.
    s = Claude(tmp_path, "bgbg-jobs")
    s.ask("Run the slow suites and the generator")
    tests = s.background("pytest -q tests/slow", "bk1tests")
    s.background("npm run build", "bk2build")
    s.background("python src/generate.py", "bk3gen")
    s.say("Three jobs running.")
    s.task_ended("bk1tests", tests, "completed", 'Background command "pytest -q tests/slow" completed (exit code 0)')
    s.tool(
        "TaskOutput",
        {"task_id": "bk2build"},
        "<retrieval_status>success</retrieval_status>\n\n<task_id>bk2build</task_id>\n\n<task_type>local_bash"
        "</task_type>\n\n<status>completed</status>\n\n<exit_code>2</exit_code>\n\n<output>\nerror TS2304: "
        "Cannot find name 'Moment'.\n</output>",
    )
    s.tool("TaskStop", {"task_id": "bk3gen"}, '{"message":"Successfully stopped task: bk3gen","task_id":"bk3gen"}')
    texts = [fact.text for fact in facts(s)]
    assert texts == [
        "`pytest -q tests/slow` passed (exit 0)",
        "`npm run build` failed (exit 2): error TS2304: Cannot find name 'Moment'.",
    ]


def test_a_package_that_still_fails_to_build_is_told_by_the_error_in_its_code(tmp_path: Path) -> None:
    # A monorepo's packages built one by one behind ``| tail`` (a Claude Code session of a Swift monorepo): the
    # driver's own "emit-module command failed" comes first, the compiler's located error is what went wrong, and
    # another package building afterwards does not fix this one.
    s = Claude(tmp_path, "pkpk-build")
    s.ask("Move the libraries into libs/ and point the packages at them")
    s.bash(
        "swift build --package-path control-plane 2>&1 | grep error: | head -5",
        "error: emit-module command failed with exit code 1 (use -v to see invocation)\n"
        "control-plane/Sources/App/SCIMController.swift:76:92: error: cannot find type 'SCIMAuthContext' in scope",
    )
    s.bash("swift build --package-path libs/swift-scim 2>&1 | tail -2", "[16/16] Compiling SwiftSCIM\nBuild complete!")
    texts = [fact.text for fact in facts(s)]
    assert texts[0] == (
        "`swift build --package-path control-plane` failed (exit 1): "
        "control-plane/Sources/App/SCIMController.swift:76:92: error: cannot find type 'SCIMAuthContext' in scope"
    )
    assert texts[1] == "`swift build --package-path libs/swift-scim` passed (ok)"


def test_an_edit_that_failed_and_a_script_that_wrote_the_file_instead_is_a_lesson(tmp_path: Path) -> None:
    # Claude Code's Edit cannot match a tab-indented file ("String to replace not found in file."), so the agent
    # rewrites it from an inline Python script: the next session editing that file wants to know.
    s = Claude(tmp_path, "edit-tabs")
    s.ask("Keep the repository URL on impact evaluations")
    path = f"{CWD}/src/api/routes/remediation.ts"
    edit = {
        "file_path": path,
        "old_string": "  localPath: clone.path,",
        "new_string": "  localPath: clone.path,\n  url,",
    }
    s.tool("Edit", edit, "<tool_use_error>String to replace not found in file.</tool_use_error>", error=True)
    s.bash("rtk proxy cat -A src/api/routes/remediation.ts | sed -n '610,620p'", "\t\t\tlocalPath: clone.path,$")
    script = f"python3 -c \"\ntext = open('{path}').read()\nopen('{path}', 'w').write(text.replace('a', 'b'))\n\""
    s.bash(script, "Done")
    texts = [fact.text for fact in facts(s)]
    assert texts == [
        f"Wrote {path}",
        f'Edit of {path} failed (String to replace not found in file.); it was written by `python3 -c " …` instead',
    ]


def test_calls_that_get_no_result_never_hold_the_reading_back(tmp_path: Path) -> None:
    # Codex records a ``web_search_call`` with no output item (chikachow/cyspbot's rollout searches the docs before
    # every plan), and a call the user's next prompt followed gets no result any more: neither waits.
    rollout = Codex()
    rollout.message("user", "Plan the token broker")
    search = {"type": "search", "query": "Cloud Run custom audiences"}
    rollout.add("response_item", {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": search})
    rollout.exec("c1", "git add docs/plan.md && git commit -m 'Plan the broker'", "[main 1a2b3c4] Plan the broker", 0)
    rollout.add(
        "response_item",
        {"type": "function_call", "name": "exec_command", "arguments": '{"cmd": "pytest -q"}', "call_id": "c2"},
    )
    rollout.message("user", "Also note the audience in the README")
    rollout.exec("c3", "rm docs/old.md", "", 0)
    transcript = parse_codex(rollout.write(tmp_path / "rollout.jsonl"), partition="codex")
    found = structural_facts(stored([m for batch in transcript.batches for m in batch.messages], partition="codex"))
    assert found.settled == len([m for batch in transcript.batches for m in batch.messages])
    assert [fact.text for fact in found.facts] == [
        "Staged docs/plan.md (git add)",
        'Committed "Plan the broker" as 1a2b3c4',
        "Deleted docs/old.md",
    ]


def test_a_plans_findings_are_facts_and_its_steps_are_not(tmp_path: Path) -> None:
    # Claude Code plan mode (FSM1/cipher-box's session shape): the plan's "Context" says what was found, its
    # "Changes" what is to be done. Rejected or not, the finding stays true; a step is no fact.
    s = Claude(tmp_path, "pf01-plan")
    s.ask("Why does mv fail on the SMB backend?")
    plan = (
        "# Fix rename on SMB\n\n## Context\n\nOur `access()` callback compares `req.uid()` against `attr.uid` — "
        "under SMB these can differ because FUSE-T's SMB server proxies the request.\n\n## Changes\n\n"
        "### 1. Simplify `access()`\n\nFixed the check so that `access()` returns OK for every caller.\n"
    )
    s.reject("ExitPlanMode", {"plan": plan}, "Not yet.")
    found = [fact.text for message in messages_of(s) for fact in facts_in_message(message)]
    assert found == [
        "Our `access()` callback compares `req.uid()` against `attr.uid` — under SMB these can differ because "
        "FUSE-T's SMB server proxies the request."
    ]


def test_api_writes_settings_removed_and_database_queries_are_read_by_what_they_do() -> None:
    # Codex sessions on chikachow/cyspbot: stale deployments deleted with `gh api -X DELETE` in a loop, a repository's
    # credential helper removed with `git config --unset-all`; a Claude Code session reads chat.db with sqlite3.
    loop = "for id in 4947711493 4940358692; do gh api -X DELETE repos/o/r/deployments/$id --silent; done"
    assert category(loop) == "state"
    assert [e.text for e in effects(loop)] == ["Sent DELETE repos/o/r/deployments/… (gh api)"]
    assert [e.text for e in effects("gh api repos/o/r/issues -f title=Bug")] == ["Sent POST repos/o/r/issues (gh api)"]
    assert category("gh api repos/o/r/deployments --paginate") == category("gh api -X GET repos/o/r") == "read"
    unset = "git config --local --unset-all credential.https://github.com.helper"
    assert category(unset) == "state"
    assert [e.text for e in effects(unset)] == ["Unset credential.https://github.com.helper (git config)"]
    assert [e.text for e in effects("git config --global core.autocrlf input")] == ["Set core.autocrlf to input"]
    assert category("git config --get-all credential.helper") == "read"
    assert category('sqlite3 ~/Library/Messages/chat.db "SELECT h.id FROM handle h WHERE deleted = 0;"') == "read"
    assert category("psql -c 'select count(*) from users'") == category("sqlite3 app.db .schema") == "read"
    assert category('sqlite3 app.db "DELETE FROM jobs"') == category('sqlite3 app.db "SELECT 1; DROP TABLE t"')
    assert category('sqlite3 app.db "DELETE FROM jobs"') != "read"


def test_a_script_quoted_over_several_lines_is_read_whole() -> None:
    # Claude Code's Bash calls pipe a transcript into `python3 -c "` with the script on the lines after it
    # (stat-guy/imessage-mail's session shape): the script only prints, so the command only reads.
    reads = 'tail -c 50000 ~/.claude/projects/p/s.jsonl | python3 -c "\nimport sys, json\nfor line in sys.stdin:\n'
    reads += "    print(json.loads(line).get('type'))\n\""
    assert category(reads) == "read"
    writes = "python3 -c \"\nopen('notes.txt', 'w').write('x')\n\" && git add notes.txt"
    assert [e.text for e in effects(writes)] == ["Staged notes.txt (git add)", "Wrote notes.txt"]
