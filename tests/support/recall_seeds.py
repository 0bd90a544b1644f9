"""A store seeded with credential-bearing sessions, shared by the recall and context tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from palimpsest.graph_schema.identity import estimate_tokens
from palimpsest.graph_schema.models import NewMessage, NewSummary, Role
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.facts import extract_facts

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)


JWT = "The API uses JWT bearer tokens for authentication, signed with RS256."


COOKIES = "We switched auth from JWT to session cookies with SameSite=strict."


NEXTAUTH = "Authentication for the web app uses NextAuth with GitHub OAuth."


SUMMARY = "Checkpoint: the team settled API authentication on JWT bearer tokens."


def turn(source_id: str, content: str, minutes: int, role: Role = Role.assistant) -> NewMessage:
    return NewMessage(role=role, content=content, message_id=source_id, created_at=T0 + timedelta(minutes=minutes))


async def seed(store: MemoryStore) -> dict[str, str]:
    """Two projects in partition p (facts extracted, one superseded, one summary) and a partition q."""
    api = await store.append_messages(
        "p",
        "t-api",
        [
            turn("u0", "How do we authenticate API calls, and which token format do we sign?", 0, Role.user),
            turn("a1", f"{JWT}\nThe signing keys live in the vault and rotate monthly for every service.", 1),
            turn("a2", f"Done.\n{COOKIES}", 5),
            turn("a3", "The deploy pipeline is unrelated to everything above and ships containers nightly.", 6),
        ],
        project="api",
    )
    web = await store.append_messages("p", "t-web", [turn("w1", NEXTAUTH, 2)], project="web")
    await store.append_messages("q", "t-q", [turn("q1", "The q partition uses JWT authentication as well.", 3)])
    summary = await store.persist_summary(
        NewSummary(
            thread_id="t-api", partition="p", level=1, text=SUMMARY, tokens=estimate_tokens(SUMMARY),
            summarizer="test", child_ids=api.message_ids[:2],
        )
    )  # fmt: skip
    for partition, thread_id in (("p", "t-api"), ("p", "t-web"), ("q", "t-q")):
        await extract_facts(store, partition, thread_id)
    return {"a1": api.message_ids[1], "a2": api.message_ids[2], "w1": web.message_ids[0], "summary": summary.id}
