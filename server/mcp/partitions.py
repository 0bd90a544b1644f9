"""Which partition (IDE) a call reads and writes, and which partitions a bearer token may touch.

A partition keeps one IDE's memory apart from another's (invariant 7 of docs/architecture.md). A stdio
server is started by one IDE, so its partition comes from ``--partition`` /
``PALIMPSEST_PARTITION`` or else from the name the MCP client gives at initialize. An
HTTP server is shared, so when a tokens file is configured each bearer token is bound to
the partitions it may touch, and a call naming any other partition is refused.

The tokens file is JSON or TOML, one entry a token::

    "s3cret-windsurf" = ["windsurf"]
    "s3cret-admin" = ["claude", "windsurf", "codex"]
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from pathlib import Path
from typing import Annotated

from fastmcp.server.auth import AccessToken, TokenVerifier
from pydantic import Field, TypeAdapter, ValidationError

from palimpsest.graph_schema.errors import InvalidInput, PalimpsestError
from palimpsest.graph_schema.models import MAX_NAME_CHARS, MaintenanceCycle

#: The partition of a client whose name names no known IDE.
DEFAULT_PARTITION = "default"

#: First word of an MCP client's name -> the partition of that IDE.
KNOWN_CLIENTS: dict[str, str] = {
    "claude": "claude",
    "windsurf": "windsurf",
    "codex": "codex",
    "antigravity": "antigravity",
    "gemini": "gemini",
}

#: Key of the access-token claim that lists a token's partitions.
PARTITIONS_CLAIM = "partitions"

_PartitionName = Annotated[str, Field(min_length=1, max_length=MAX_NAME_CHARS, pattern=r"\S")]
_TOKENS = TypeAdapter(dict[Annotated[str, Field(min_length=1)], Annotated[list[_PartitionName], Field(min_length=1)]])


class PartitionDenied(PalimpsestError):
    """A call named a partition its bearer token may not touch; nothing was read or written."""


def partition_for_client(client_name: str | None) -> str:
    """The partition of an MCP client, from the name it sends at initialize.

    Only the first word counts, so ``claude-code``, ``claude-ai`` and ``Claude`` all
    land in ``claude`` and ``codex-mcp-client`` in ``codex``; anything unknown (or no
    name at all) shares ``default``.
    """
    if not client_name:
        return DEFAULT_PARTITION
    first_word = re.split(r"[^a-z0-9]+", client_name.strip().lower(), maxsplit=1)[0]
    return KNOWN_CLIENTS.get(first_word, DEFAULT_PARTITION)


def resolve_partition(
    requested: str | None,
    *,
    default: str,
    allowed: frozenset[str] | None,
) -> str:
    """The partition one call works in: the one it names, else the server's.

    Args:
        requested: The ``partition`` argument of the call, if any.
        default: The server's partition (settings, else the client's name).
        allowed: The partitions the caller's token may touch; ``None`` when no token
            scheme is in force (stdio, in-memory, unauthenticated loopback HTTP).

    Raises:
        PartitionDenied: if the call names a partition outside ``allowed``, or names
            none while the server's partition is outside it and the token grants
            several.
    """
    if allowed is None:
        return requested or default
    if requested is not None:
        if requested not in allowed:
            raise PartitionDenied(
                f"this token may not touch partition {requested!r} (it may touch: {', '.join(sorted(allowed))})"
            )
        return requested
    if default in allowed:
        return default
    if len(allowed) == 1:
        return next(iter(allowed))
    raise PartitionDenied(
        f"name a partition: this token may touch {', '.join(sorted(allowed))}, not the server's {default!r}"
    )


def load_token_grants(path: Path) -> dict[str, frozenset[str]]:
    """Read a tokens file (JSON, or TOML when not JSON) into token -> allowed partitions.

    Raises:
        InvalidInput: if the file cannot be read, parsed, or is not a mapping of
            non-empty tokens to non-empty lists of partition names.
    """
    try:
        raw = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidInput(f"cannot read tokens file {str(path)!r}: {exc.strerror}") from None
    try:
        data = json.loads(raw) if path.suffix.lower() == ".json" else tomllib.loads(raw)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InvalidInput(f"tokens file {str(path)!r} is not valid JSON or TOML: {exc}") from None
    try:
        grants = _TOKENS.validate_python(data)
    except ValidationError:
        raise InvalidInput(
            f"tokens file {str(path)!r} must map each token to a non-empty list of partition names"
        ) from None
    if not grants:
        raise InvalidInput(f"tokens file {str(path)!r} holds no token")
    return {token: frozenset(partitions) for token, partitions in grants.items()}


def _fingerprint(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class PartitionTokenVerifier(TokenVerifier):
    """Accepts the bearer tokens of a tokens file and tags each with its partitions.

    Tokens are kept only as SHA-256 fingerprints, so a lookup compares digests rather
    than the secrets themselves, and the verified token carries its partitions in the
    ``partitions`` claim for the tools to enforce.
    """

    def __init__(self, grants: dict[str, frozenset[str]]) -> None:
        super().__init__()
        self._grants = {_fingerprint(token): partitions for token, partitions in grants.items()}

    async def verify_token(self, token: str) -> AccessToken | None:
        """The access token for a known bearer token, ``None`` for any other."""
        fingerprint = _fingerprint(token)
        partitions = self._grants.get(fingerprint)
        if partitions is None:
            return None
        return AccessToken(
            token=token,
            client_id=f"token-{fingerprint[:12]}",
            scopes=[],
            claims={PARTITIONS_CLAIM: sorted(partitions)},
        )


def token_partitions(token: AccessToken | None) -> frozenset[str] | None:
    """The partitions a verified token may touch; ``None`` when the call carries no token."""
    if token is None:
        return None
    return frozenset(token.claims.get(PARTITIONS_CLAIM, ()))


def shared_cycle(cycle: MaintenanceCycle) -> MaintenanceCycle:
    """A maintenance cycle as any partition may see it: what ran, never who or where.

    Cycles are store-wide (one compaction tick serves every partition), so a caller of
    one partition sees them all; what could reach into another partition or the host is
    left out. The holder's ``host:pid:random`` becomes ``process-`` and 8 hex digits of
    its hash (one process still reads as one), and the errors, which name the threads
    they happened in, become one count; the process that ran the cycle logs them in full.
    """
    errors = [f"{len(cycle.errors)} error(s), named in the log of the process that ran it"] if cycle.errors else []
    holder = "process-" + hashlib.sha256(cycle.holder.encode("utf-8")).hexdigest()[:8]
    return cycle.model_copy(update={"holder": holder, "errors": errors})
