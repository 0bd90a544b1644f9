"""The maintenance verbs of `MemoryStore` on both stores: leases and cycle records.

Leases are what keep several server processes from running the same background job at
once, so the contract is tested the way processes use it: many separate connections
asking at the same moment (exactly one wins), time moved by hand (expiry and renewal
without sleeping), and a stranger's release changing nothing.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from palimpsest.graph_schema.backends import Neo4jCredentials, open_store
from palimpsest.graph_schema.errors import InvalidInput
from palimpsest.graph_schema.models import MaintenanceCycle
from palimpsest.graph_schema.store import MemoryStore

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    """A moment ``seconds`` after T0 on the injected clock."""
    return T0 + timedelta(seconds=seconds)


def cycle(index: int, *, job: str = "compaction", **fields: object) -> MaintenanceCycle:
    """A cycle that started ``index`` minutes after T0 and ran for ten seconds."""
    values: dict[str, object] = {
        "id": f"cyc_{index}",
        "job": job,
        "holder": f"host:{100 + index}:ab12",
        "started_at": T0 + timedelta(minutes=index),
        "finished_at": T0 + timedelta(minutes=index, seconds=10),
    }
    values.update(fields)
    return MaintenanceCycle.model_validate(values)


async def test_a_free_lease_is_taken_and_a_held_one_refused(store: MemoryStore) -> None:
    assert await store.acquire_lease("job:compaction", "alpha", 30, now=at(0)) is True
    assert await store.acquire_lease("job:compaction", "beta", 30, now=at(1)) is False
    assert await store.acquire_lease("job:compaction", "beta", 30, now=at(29.9)) is False
    # Another name is another lease.
    assert await store.acquire_lease("job:evolution", "beta", 30, now=at(1)) is True


async def test_an_expired_lease_goes_to_the_next_taker(store: MemoryStore) -> None:
    assert await store.acquire_lease("compact:ide:t-1", "alpha", 10, now=at(0))
    assert not await store.acquire_lease("compact:ide:t-1", "beta", 10, now=at(9.999))
    assert await store.acquire_lease("compact:ide:t-1", "beta", 10, now=at(10))
    # The old holder has lost it, and now waits for beta's expiry like anyone else.
    assert not await store.acquire_lease("compact:ide:t-1", "alpha", 10, now=at(11))
    assert await store.acquire_lease("compact:ide:t-1", "alpha", 10, now=at(20))


async def test_renewal_pushes_the_expiry_out(store: MemoryStore) -> None:
    assert await store.acquire_lease("job:compaction", "alpha", 10, now=at(0))
    assert await store.acquire_lease("job:compaction", "alpha", 10, now=at(8))
    assert not await store.acquire_lease("job:compaction", "beta", 10, now=at(15)), "renewal did not extend"
    assert await store.acquire_lease("job:compaction", "beta", 10, now=at(18))
    # A holder renewing after its own expiry simply takes it again when nobody else did.
    assert await store.acquire_lease("job:evolution", "alpha", 5, now=at(0))
    assert await store.acquire_lease("job:evolution", "alpha", 5, now=at(60))
    assert not await store.acquire_lease("job:evolution", "beta", 5, now=at(64))


async def test_only_the_holder_releases(store: MemoryStore) -> None:
    assert await store.acquire_lease("job:compaction", "alpha", 300, now=at(0))
    await store.release_lease("job:compaction", "beta")
    assert not await store.acquire_lease("job:compaction", "beta", 300, now=at(1)), "a stranger released it"
    await store.release_lease("job:compaction", "alpha")
    assert await store.acquire_lease("job:compaction", "beta", 300, now=at(2))
    # Releasing what nobody holds, or twice, is harmless.
    await store.release_lease("job:unknown", "alpha")
    await store.release_lease("job:compaction", "alpha")
    assert not await store.acquire_lease("job:compaction", "alpha", 300, now=at(3))


async def test_the_default_clock_is_now(store: MemoryStore) -> None:
    assert await store.acquire_lease("job:compaction", "alpha", 60)
    # An injected clock an hour later sees the real-time lease expired.
    later = datetime.now(UTC) + timedelta(hours=1)
    assert not await store.acquire_lease("job:compaction", "beta", 60)
    assert await store.acquire_lease("job:compaction", "beta", 60, now=later)
    # Naive times are read as UTC, as everywhere else.
    assert not await store.acquire_lease("job:compaction", "alpha", 60, now=later.replace(tzinfo=None))


@pytest.mark.parametrize(
    ("name", "holder", "ttl", "problem"),
    [
        ("", "alpha", 10, "lease name"),
        ("job:x", " ", 10, "lease holder"),
        ("j" * 513, "alpha", 10, "lease name"),
        ("job:x", "alpha", 0, "ttl"),
        ("job:x", "alpha", -5, "ttl"),
        ("job:x", "alpha", 86400 * 2, "ttl"),
        ("job:\ud800", "alpha", 10, "UTF-8"),
    ],
)
async def test_bad_lease_requests_are_refused_and_change_nothing(
    store: MemoryStore, name: str, holder: str, ttl: float, problem: str
) -> None:
    with pytest.raises(InvalidInput, match=problem):
        await store.acquire_lease(name, holder, ttl, now=at(0))
    assert await store.acquire_lease("job:x", "beta", 10, now=at(0))


async def test_of_many_concurrent_takers_exactly_one_wins(store_url: str) -> None:
    """Separate connections (as separate processes have) race for each of several leases."""
    takers = [open_store(store_url, Neo4jCredentials()) for _ in range(8)]
    for taker in takers:
        await taker.initialize()
    try:
        for round_ in range(5):
            name = f"job:race-{round_}"
            wins = await asyncio.gather(
                *(taker.acquire_lease(name, f"holder-{i}", 60, now=at(round_)) for i, taker in enumerate(takers))
            )
            assert sum(wins) == 1, f"round {round_}: {wins}"
            winner = wins.index(True)
            # The winner holds it for everyone: a renewal succeeds, nobody else gets in.
            assert await takers[(winner + 1) % 8].acquire_lease(name, f"holder-{winner}", 60, now=at(round_ + 1))
            others = [
                await taker.acquire_lease(name, f"holder-{i}", 60, now=at(round_ + 2))
                for i, taker in enumerate(takers)
                if i != winner
            ]
            assert not any(others)
        # Expired together, raced again: still exactly one.
        wins = await asyncio.gather(
            *(taker.acquire_lease("job:race-0", f"late-{i}", 60, now=at(1000)) for i, taker in enumerate(takers))
        )
        assert sum(wins) == 1, wins
        # Released while the others race for it: the release and the takes serialize.
        winner = wins.index(True)
        outcomes = await asyncio.gather(
            takers[winner].release_lease("job:race-0", f"late-{winner}"),
            *(taker.acquire_lease("job:race-0", f"next-{i}", 60, now=at(1001)) for i, taker in enumerate(takers)),
        )
        assert sum(1 for won in outcomes[1:] if won) <= 1, outcomes
    finally:
        for taker in takers:
            await taker.close()


async def test_cycles_round_trip_latest_first(store: MemoryStore) -> None:
    assert await store.recent_cycles(5) == []
    first = cycle(1, threads=3, summaries=17, errors=["thread t-9: store unavailable — retry later"])
    second = cycle(2, job="evolution", facts=4, steps={"facts": 4, "embeddings": 120})
    third = cycle(3)
    for record in (second, first, third):
        await store.record_cycle(record)

    assert await store.recent_cycles(10) == [third, second, first]
    assert await store.recent_cycles(2) == [third, second]
    # Recording an id again keeps the first record.
    await store.record_cycle(first.model_copy(update={"summaries": 99}))
    assert (await store.recent_cycles(10))[-1] == first


async def test_cycles_are_seen_by_every_process(store: MemoryStore, store_url: str) -> None:
    other = open_store(store_url, Neo4jCredentials())
    await other.initialize()
    try:
        await other.record_cycle(cycle(7, holder="other-host:7:ff00"))
    finally:
        await other.close()
    [seen] = await store.recent_cycles(3)
    assert (seen.id, seen.holder, seen.started_at) == ("cyc_7", "other-host:7:ff00", at(7 * 60))


async def test_recent_cycles_needs_a_positive_limit(store: MemoryStore) -> None:
    await store.record_cycle(cycle(1))
    with pytest.raises(InvalidInput, match="limit"):
        await store.recent_cycles(0)
