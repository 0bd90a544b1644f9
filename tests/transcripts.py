"""Deterministic, realistic coding-agent transcripts for the compaction tests.

Compaction is only exercised honestly on content that looks like what agents write:
user requests, assistant turns that call tools, tool results with the same
``tool_call_id``, file paths and error messages. Seeded, so a failure reproduces.
"""

from __future__ import annotations

import random

from palimpsest.graph_schema.models import NewMessage, Role

_FILES = [
    "src/auth/jwt.py",
    "src/api/routes.py",
    "src/db/migrations/0007_tokens.sql",
    "tests/test_refresh.py",
    "pyproject.toml",
    "README.md",
    "src/cache/redis_client.py",
]
_ASKS = [
    "The refresh endpoint returns 401 after the token rotates. Can you find out why?",
    "Please add a regression test for the expired-token path.",
    "Rename `issue_token` to `mint_access_token` everywhere and keep the old name as an alias.",
    "Why does the migration fail on Postgres 16 but not on SQLite?",
    "Let's cache the JWKS response for five minutes; make sure tests still pass.",
    "Run the test suite and tell me what is still red.",
]
_THOUGHTS = [
    "I'll read {file} first to see how the token is validated.",
    "The failure comes from {file}: the clock skew check uses naive datetimes.",
    "Decision: keep refresh tokens opaque and store their hash in the `tokens` table.",
    "That approach failed because the fixture reuses a revoked token; trying a fresh one.",
    "Next step: patch {file} and rerun `pytest -k refresh`.",
    "Done. {file} now compares aware datetimes and the new test covers expiry.",
]
_RESULTS = [
    'def verify(token: str) -> Claims:\n    claims = jwt.decode(token, key, algorithms=["RS256"])\n'
    "    if claims.exp < datetime.utcnow():\n        raise Expired(claims.sub)\n    return claims\n",
    "FAILED tests/test_refresh.py::test_rotated_token - AssertionError: 401 != 200\n1 failed, 41 passed in 3.21s",
    'ERROR: relation "tokens" does not exist\nLINE 1: INSERT INTO tokens (hash, sub, exp) VALUES ($1, $2, $3)',
    "42 passed in 2.87s",
    "$ git diff --stat\n src/auth/jwt.py | 6 +++---\n tests/test_refresh.py | 18 ++++++++++++++++++\n",
]


def transcript(count: int, *, seed: int = 7, prefix: str = "m") -> list[NewMessage]:
    """``count`` messages of a plausible agent session, tool calls paired with results.

    Args:
        count: How many messages.
        seed: Seeds the choice of sentences, so a run is reproducible.
        prefix: Prefix of each ``message_id`` (``{prefix}{index}``), so appends are idempotent.
    """
    rng = random.Random(seed)
    messages: list[NewMessage] = []
    call = 0
    while len(messages) < count:
        file = rng.choice(_FILES)
        step = rng.randrange(4)
        if step == 0:
            messages.append(NewMessage(role=Role.user, content=rng.choice(_ASKS)))
        elif step in (1, 2) and len(messages) + 1 < count:
            call += 1
            call_id = f"call_{call}"
            messages.append(
                NewMessage(
                    role=Role.assistant,
                    content=f"Reading {file}.\n" + rng.choice(_THOUGHTS).format(file=file),
                    tool_call_id=call_id,
                    metadata={"tool": "read_file", "path": file},
                )
            )
            messages.append(NewMessage(role=Role.tool, content=rng.choice(_RESULTS), tool_call_id=call_id))
        else:
            lines = [rng.choice(_THOUGHTS).format(file=rng.choice(_FILES)) for _ in range(rng.randint(1, 4))]
            messages.append(NewMessage(role=Role.assistant, content="\n".join(lines)))
    return [message.model_copy(update={"message_id": f"{prefix}{index}"}) for index, message in enumerate(messages)]
