"""Who is looking: the viewer's side of the bearer tokens and partitions that guard MCP.

The viewer obeys the same rules as the tools (invariant 7 of docs/architecture.md):
with a tokens file, a caller sees only its token's partitions, and a partition it
may not see looks exactly like one that does not exist; without a tokens file the
server listens on loopback only, and the viewer also refuses any caller that is not
on this machine. A browser cannot add an ``Authorization`` header to a link, so the
token may also come from a cookie that the login form sets (HttpOnly, SameSite=Strict,
so another site can neither read it nor send it).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from starlette.requests import Request

from palimpsest.server.mcp.partitions import PartitionTokenVerifier, token_partitions

#: The cookie holding a browser's bearer token.
TOKEN_COOKIE = "palimpsest_token"


@dataclass(frozen=True)
class Viewer:
    """A caller allowed in: the partitions it may see (None: every one, tokens are off)."""

    allowed: frozenset[str] | None

    def may_see(self, partition: str) -> bool:
        """Whether this caller may read ``partition``."""
        return self.allowed is None or partition in self.allowed


class Refused(Exception):
    """The caller may not use the viewer; ``login`` says whether a token could let it in."""

    def __init__(self, reason: str, *, login: bool) -> None:
        super().__init__(reason)
        self.login = login


def bearer_token(request: Request) -> str | None:
    """The token of a request: its ``Authorization: Bearer`` header, else the login cookie."""
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return request.cookies.get(TOKEN_COOKIE) or None


def client_is_local(request: Request) -> bool:
    """Whether the request comes from this machine."""
    if request.client is None:
        return False
    try:
        return ipaddress.ip_address(request.client.host).is_loopback
    except ValueError:
        return False


async def identify(request: Request, verifier: PartitionTokenVerifier | None) -> Viewer:
    """The caller of a request, or ``Refused``.

    Raises:
        Refused: no tokens file and a caller from another machine, or a tokens file and
            no known token.
    """
    if verifier is None:
        if not client_is_local(request):
            raise Refused("this viewer serves only this machine (no tokens file is configured)", login=False)
        return Viewer(allowed=None)
    token = bearer_token(request)
    access = await verifier.verify_token(token) if token else None
    if access is None:
        raise Refused("a bearer token is required", login=True)
    return Viewer(allowed=token_partitions(access))
