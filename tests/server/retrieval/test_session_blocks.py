"""Which facts a start-of-session block keeps first: what they teach, not that a tool ran."""

from __future__ import annotations

from datetime import UTC, datetime

from palimpsest.graph_schema.models import Fact, Thread
from palimpsest.scheduler.session_reading import Ask
from palimpsest.server.retrieval.session_blocks import (
    FACTS_FIRST,
    block_items,
    fact_score,
    joined_dependencies,
    shown_fact,
)
from palimpsest.server.retrieval.standing import Standing


def fact(text: str, kind: str, subject: str, source: str = "msg_1") -> Fact:
    return Fact(
        id=subject, partition="claude", text=text, kind=kind, subject=subject, created_at=datetime.now(UTC),
        source_message_ids=[source],
    )  # fmt: skip


def test_a_tool_that_only_ran_ranks_below_what_a_session_found_and_a_read_is_never_shown() -> None:
    # Shapes of a Claude Code session on Windows (keparlak/NumWordify): Entire CLI commands that only ran.
    ran = fact("`entire auth contexts` passed (ok)", "command", "command:entire auth contexts")
    tested = fact("`go test ./...` passed (exit 0)", "command", "command:go test")
    found = fact("The repo lives only on the `aws-ap-south-1` cluster; the token is from `us`.", "point", "cluster")
    fixed = fact(
        "`npm run build` passed after failing with: Cannot find module 'zod'", "command", "command:npm run build"
    )
    assert fact_score(ran) < fact_score(found) < fact_score(fixed)
    assert fact_score(ran) < fact_score(tested)
    assert not shown_fact(fact("`entire session list` passed (ok)", "command", "command:entire session list"))
    assert shown_fact(ran)


def test_the_packages_one_install_added_take_one_line() -> None:
    # A Claude Code session of a take-home dashboard: one `pip install streamlit pandas plotly` gave a line each.
    added = [fact(f"Added dependency {name} (pip install)", "dependency", f"dependency:{name}") for name in
             ("streamlit", "pandas", "plotly")]  # fmt: skip
    later = fact("Added dependency httpx (pip install)", "dependency", "dependency:httpx", source="msg_2")
    npm = fact("Added dependency zod (npm install)", "dependency", "dependency:zod", source="msg_2")
    lines = [text for _fact, text in joined_dependencies([*added, later, npm])]
    assert lines == [
        "Added dependencies streamlit, pandas, plotly (pip install)",
        "Added dependency httpx (pip install)",
        "Added dependency zod (npm install)",
    ]


def test_a_long_session_keeps_its_best_facts_before_its_older_requests_and_the_rest_after() -> None:
    lessons = [
        fact(f"The `worker_{n}` queue drops jobs because its lease is 30s.", "lesson", f"f{n}", source=f"msg_{n}")
        for n in range(FACTS_FIRST + 2)
    ]
    now = datetime.now(UTC)
    standing = Standing(Thread(id="t", partition="claude", created_at=now, updated_at=now))
    items, _brief, _full = block_items(standing, lessons, pointer="### t\n")
    ranks = [item.rank for item in items if item.part == 5 and not item.label]
    older_request = 3.4  # what `block_items` gives a request before the latest five
    assert all(rank < older_request for rank in ranks[:FACTS_FIRST])
    assert all(rank > older_request for rank in ranks[FACTS_FIRST:])


def test_a_request_in_few_words_leaves_out_how_it_opens() -> None:
    # Requests of a long Claude Code session of the development set (entireio/cli): a courtesy first, then the work.
    now = datetime.now(UTC)
    standing = Standing(Thread(id="t", partition="claude", created_at=now, updated_at=now))
    said = [
        "ok, can you check if we got the right amount of lines? I put everything into one commit and the count is 627",
        "can you remove the not so useful checkpoint_tests again",
        "let's implement this",
        "I think by file is to much",
    ]
    standing.asks = [Ask(text, f"msg_{n}", n) for n, text in enumerate(said)]
    items, _brief, _full = block_items(standing, [], pointer="### t\n")
    short = [item.text for item in items if item.part == 1 and not item.label and not item.upgrade]
    assert short == [
        "  1. check if we got the right amount of lines? I put everything into one commit and…\n",
        "  2. remove the not so useful checkpoint_tests again\n",
        "  3. let's implement this\n",  # two words would be left: kept whole
        "  4. I think by file is to much\n",
    ]


def test_a_check_that_only_passed_is_not_told_twice() -> None:
    # A Gemini CLI session (AnthonyontheHub/TP-Tutor): the "Did" line's checks, then the same passes as facts.
    now = datetime.now(UTC)
    standing = Standing(Thread(id="t", partition="gemini", created_at=now, updated_at=now))
    standing.did = ["edited linaService.ts", "checks: `npm run lint` passed, `npx tsc` passed"]
    facts = [
        fact("`npm run lint` passed (ok)", "command", "command:npm run lint"),
        fact("`npm run build` passed (ok)", "command", "command:npm run build"),
        fact("`npx tsc` passed (ok) after failing with: TS2305", "command", "command:npx tsc"),
    ]
    items, _brief, _full = block_items(standing, facts, pointer="### t\n")
    shown = [item.text for item in items if item.part == 5 and not item.label]
    assert shown == [
        "  - `npm run build` passed (ok) (msg_1)\n",
        "  - `npx tsc` passed (ok) after failing with: TS2305 (msg_1)\n",
    ]
