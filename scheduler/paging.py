"""Walking a store's listing of what upkeep still has to do, a page at a time, by id.

The store lists the nodes an upkeep step has yet to handle (`MemoryStore.missing_embeddings`,
`MemoryStore.missing_search_texts`) after a cursor, the last id seen, so a step walks
the store once instead of rescanning it from the start after every batch; the walk,
and the count a progress bar needs first, are the same for every such listing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Protocol, TypeVar


class HasId(Protocol):
    """A listed node: its id is the cursor for the next page."""

    @property
    def id(self) -> str: ...


Item = TypeVar("Item", bound=HasId)
#: Reads the page after a cursor (None: from the start); an empty page ends the walk.
PageReader = Callable[[str | None], Awaitable[Sequence[Item]]]


async def walk(read: PageReader[Item]) -> AsyncIterator[Sequence[Item]]:
    """Each page in id order; the next is read after the caller is done with this one."""
    cursor: str | None = None
    while page := await read(cursor):
        yield page
        cursor = page[-1].id


async def count(read: PageReader[Item]) -> int:
    """How many nodes the listing holds now (one walk, nothing kept but the count)."""
    return sum([len(page) async for page in walk(read)])
