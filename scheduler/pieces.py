"""A long text cut into overlapping windows, each embedded as its own vector (a piece).

An embedder reads only the start of a text (all-MiniLM-L6-v2: 256 word pieces, 500 to
1,000 characters), so a line deep in a long message or tool output never met a question
about it. Each window of ``EMBED_PIECE_CHARS`` characters, overlapping the one before
by ``EMBED_PIECE_OVERLAP``, becomes one vector of the node; a search finds the node
by its best piece (`palimpsest.graph_schema.store.MemoryStore.vector_search`). A text
that fits one window, the vast majority of messages, gets the one vector it always got.

The windows are sized for the built-in model, the default. An embedder that reads more
(an OpenAI-compatible endpoint reads 8,191 tokens) gets the same windows: more vectors
than it needs, each still of its window's meaning, and the text's characters sent once
and a third again (the overlaps), so an endpoint that bills by token costs a third more.
"""

from __future__ import annotations

from palimpsest.graph_schema.models import EMBED_PIECE_CHARS, EMBED_PIECE_OVERLAP, MAX_EMBED_CHARS, MAX_EMBED_PIECES


def pieces(text: str) -> list[str]:
    """The windows of ``text`` (cut at ``MAX_EMBED_CHARS``) in order; the text itself when it fits one.

    Windows start every ``EMBED_PIECE_CHARS - EMBED_PIECE_OVERLAP`` characters; the last
    one ends at the text's end (so it is a whole window, not a short tail), and there
    are never more than ``MAX_EMBED_PIECES``.
    """
    text = text[:MAX_EMBED_CHARS]
    if len(text) <= EMBED_PIECE_CHARS:
        return [text]
    stride = EMBED_PIECE_CHARS - EMBED_PIECE_OVERLAP
    starts = list(range(0, len(text) - EMBED_PIECE_CHARS, stride))[: MAX_EMBED_PIECES - 1]
    starts.append(len(text) - EMBED_PIECE_CHARS)
    return [text[start : start + EMBED_PIECE_CHARS] for start in starts]
