"""How ``bench/startup.py`` judges a memory's noise (a read-only command presented as a fact) and replays Cursor.

The benchmark needs real sessions kept outside the repository, so it is run by hand; its
judge needs none, and a judge that misreads a line misstates every table made with it.
"""

from __future__ import annotations

import pytest

from bench import startup


@pytest.mark.parametrize(
    ("command", "read_only"),
    [
        ("git status", True),
        ("git status && git diff --stat", True),
        ("cd /repo && git log --oneline | head -5", True),
        ("rtk git log --oneline -5", True),  # a wrapper that runs the command after it
        ("git status && rm -rf build", False),  # judged by each part, not by the first
        ("ls && npm install left-pad", False),
        ("bun run test 2>&1 | tail -20", False),
        ("grep -n foo a.py; sed -i 's/a/b/' a.py", False),
        # A loop of reads reads: the shell's words (while, do, done, read VAR) run nothing.
        ("git log --merges | grep -o '#[0-9]*' | sed 's/#//' | while read pr; do gh pr view \"$pr\"; done", True),
        ('for f in *.orig; do rm "$f"; done', False),
        ("if [ -f x ]; then cat x; fi", False),  # a test the judge cannot read: not counted as a read
        # A line the memory cut off: its cut last command by what is left of it.
        ("git log --oneline | while read c; do gh pr vie…", True),
        ("git status && rm -rf bu…", False),
    ],
)
def test_a_compound_command_is_read_only_when_each_part_is(command: str, read_only: bool) -> None:
    assert startup.read_only(command) is read_only


def test_noise_counts_read_only_commands_given_as_facts_and_bare_headings_as_open_items() -> None:
    memory = "\n".join(
        [
            "- Facts:",
            "  - `rtk git status` passed (ok)",
            "  - `git status && git push origin main` passed (ok)",
            "- Still open:",
            "  - Key improvements:",
            "  - ## Next steps",
            "  - #307 (D3): make `rl_validate` compare",
            "  - unfinished request: commit",
        ]
    )
    assert startup.noise(memory) == [
        "- `rtk git status` passed (ok)",
        "open item: Key improvements:",
        "open item: ## Next steps",
    ]


@pytest.mark.parametrize(
    ("content", "typed"),
    [
        ([{"type": "text", "text": "<user_query>\nfix the login test\n</user_query>"}], "fix the login test"),
        # Context Cursor writes before the query is not what the user typed, nor what its hook is given.
        (
            [
                {
                    "type": "text",
                    "text": "<attached_files>\n<file path='a.py'/>\n</attached_files>\n"
                    "<user_query>\nrename a.py\n</user_query>",
                }
            ],
            "rename a.py",
        ),
        ("plain words", "plain words"),
    ],
)
def test_a_cursor_prompt_is_what_the_user_typed(content: object, typed: str) -> None:
    assert startup.user_text(content) == typed


def test_a_finished_item_counts_as_open_only_on_a_line_that_names_no_open_item() -> None:
    gold = {
        "open": [{"text": "Push main", "match": [["1a89f6c", "push"], ["ahead", "origin/main"]]}],
        "not_open": [
            {"text": "Stage 2 committed as 1a89f6c", "match": [["1a89f6c"]]},
            {"text": "RESTORE.md written to the archive", "match": [["restore.md"]]},
        ],
    }
    lines = ["- Still open:", "  - committed, not pushed: 1a89f6c", "  - uncommitted changes: README.md, RESTORE.md"]
    assert startup.stale(gold, lines) == ["RESTORE.md written to the archive"]
