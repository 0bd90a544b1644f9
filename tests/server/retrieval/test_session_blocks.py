"""Which facts a start-of-session block keeps first: what they teach, not that a tool ran."""

from __future__ import annotations

from datetime import UTC, datetime

from palimpsest.graph_schema.models import Fact
from palimpsest.server.retrieval.session_blocks import fact_score, shown_fact


def fact(text: str, kind: str, subject: str) -> Fact:
    return Fact(id=subject, partition="claude", text=text, kind=kind, subject=subject, created_at=datetime.now(UTC))


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
