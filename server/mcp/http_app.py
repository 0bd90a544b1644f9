"""The one HTTP app of a Palimpsest server, and what guards every request it answers.

`GuardedFastMCP.http_app` is FastMCP's own app (MCP at ``/mcp``, then ``/health`` and the
viewer's ``/ui`` routes) with three changes, made there so that whoever serves it
(``palimpsest serve --transport http``, ``palimpsest ui``, a test's uvicorn) serves them:

- FastMCP's Host/Origin guard, on for every route, against DNS rebinding: a web page the
  user opens can point its own name at 127.0.0.1 and so reach a loopback server, but
  its requests still name that page's host in ``Host`` (and in ``Origin``). A ``Host``
  outside the allowed hosts gets 421, an ``Origin`` outside them 403, each with a
  one-line plain body; a request without ``Origin`` (any client that is not a browser)
  passes on its ``Host``. Allowed: the loopback names (127.0.0.1, localhost, ::1, on any
  port), the address the connection arrived on, the ``--host`` the server was started
  with (unless a wildcard such as 0.0.0.0), and ``PALIMPSEST_ALLOWED_HOSTS``. An
  ``Origin`` passes when it is the request's own (scheme, ``Host``), loopback to a
  loopback ``Host``, or http(s) on an allowed host, so a TLS proxy in front still works.
- Security headers on every response (`SECURITY_HEADERS`): the viewer's pages load
  only their own script and style sheet, and no other site may frame them.
- The MCP SDK's request body limit (4 MiB, the same number as ``MAX_MESSAGE_BYTES``, so a
  message at the limit came back as HTTP 413) raised to `MAX_REQUEST_BYTES`, so the
  tool's own check answers a message over the limit with the error stdio gives.

- The app starts serving once the store has opened (or failed to): the store opens in
  the background (``app.py``) so a stdio client gets its handshake early, but a shared
  HTTP server starts once and then serves everyone, so its first viewer page and tool
  call need not wait or meet 503.

A server built with ``serves_mcp=False`` (``palimpsest ui``, the read-only viewer) has no
``/mcp`` route at all: nothing in it can write.
"""

from __future__ import annotations

import ipaddress
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from fastmcp import FastMCP
from fastmcp.server.http import StarletteWithLifespan, StreamableHTTPASGIApp
from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from palimpsest.graph_schema.models import MAX_MESSAGE_BYTES

#: The largest request body the MCP route reads. JSON writes a content byte as at most 6
#: (``\u0001``), so one message at ``MAX_MESSAGE_BYTES`` fits however its client escapes
#: it (at most 24 MiB), with room left for the envelope and other messages; plain text
#: fits 7 messages at the limit. A call holding more (``MAX_BATCH`` messages at the limit
#: would be 20 GiB) must be split: its body gets HTTP 413 before it is parsed, which keeps
#: what one request may make the server hold in memory bounded.
MAX_REQUEST_BYTES = 8 * MAX_MESSAGE_BYTES

#: The viewer's pages: their own script and style sheet only (no inline script or style:
#: the templates have none), fetches to this server only, never framed. Links carry no
#: referrer to other sites (a viewer URL names partitions and threads); ``same-origin``
#: rather than ``no-referrer``, under which a browser sends ``Origin: null`` with the
#: login form's POST, which the guard refuses as it must refuse every opaque origin.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "content-security-policy": CONTENT_SECURITY_POLICY,
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "same-origin",
}


def is_wildcard(host: str) -> bool:
    """Whether a bind address means every interface (0.0.0.0, ::), so names no host of its own."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False


def origin_patterns(hosts: Sequence[str]) -> list[str]:
    """The ``Origin`` values of pages served from ``hosts``: http or https, any port."""
    patterns = []
    for host in hosts:
        named = f"[{host}]" if ":" in host else host
        patterns += [f"http://{named}:*", f"https://{named}:*"]
    return patterns


class SecurityHeaders:
    """ASGI middleware adding `SECURITY_HEADERS` to every HTTP response, refusals included."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on; add the headers to the response as it starts."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers.setdefault(name, value)
            await send(message)

        await self.app(scope, receive, send_with_headers)


class GuardedFastMCP(FastMCP[Any]):
    """A FastMCP server whose HTTP app is always guarded (see the module docstring)."""

    def __init__(
        self,
        name: str,
        *,
        allowed_hosts: Sequence[str],
        serves_mcp: bool,
        store_settled: Callable[[], Awaitable[None]],
        **options: Any,
    ) -> None:
        """``allowed_hosts``: ``PALIMPSEST_ALLOWED_HOSTS``; ``serves_mcp`` False leaves ``/mcp`` out.

        ``store_settled`` returns once the store has opened or failed to.
        """
        super().__init__(name, **options)
        self.allowed_hosts = tuple(allowed_hosts)
        self.serves_mcp = serves_mcp
        self.store_settled = store_settled

    def http_app(self, *args: Any, **kwargs: Any) -> StarletteWithLifespan:
        """FastMCP's streamable HTTP app with the guard always on.

        Hosts the caller allows (``run`` passes the ``--host`` it binds) add to the
        configured ones; the guard itself cannot be turned off from here.
        """
        hosts = [*self.allowed_hosts, *(h for h in kwargs.pop("allowed_hosts", None) or () if not is_wildcard(h))]
        origins = [*(kwargs.pop("allowed_origins", None) or ()), *origin_patterns(hosts)]
        kwargs.update(host_origin_protection=True, allowed_hosts=hosts, allowed_origins=origins)
        app = super().http_app(*args, **kwargs)
        mcp_app = _mcp_route(app) if self.serves_mcp else None
        if mcp_app is None:
            app.router.routes = [route for route in app.router.routes if getattr(route, "path", None) != app.state.path]
        started = app.router.lifespan_context
        store_settled = self.store_settled

        @asynccontextmanager
        async def lifespan(served: Starlette) -> AsyncIterator[Any]:
            async with started(served) as state:
                if mcp_app is not None:
                    # FastMCP builds the SDK's session manager, which holds the body limit, as
                    # the lifespan starts, and passes no limit of its own: set it before the
                    # first request can arrive.
                    assert mcp_app.session_manager is not None  # made by the lifespan just entered
                    mcp_app.session_manager.asgi_app.max_body_size = MAX_REQUEST_BYTES
                await store_settled()
                yield state

        app.router.lifespan_context = lifespan
        app.add_middleware(SecurityHeaders)
        return app


def _mcp_route(app: StarletteWithLifespan) -> StreamableHTTPASGIApp:
    """The streamable HTTP app the MCP route serves.

    Raises:
        TypeError: if the MCP route is not FastMCP's streamable HTTP app (FastMCP changed).
    """
    routes = app.router.routes
    [endpoint] = [route.endpoint for route in routes if isinstance(route, Route) and route.path == app.state.path]
    # With a tokens file, FastMCP's RequireAuthMiddleware wraps the app as ``app``.
    mcp_app = getattr(endpoint, "app", endpoint)
    if not isinstance(mcp_app, StreamableHTTPASGIApp):
        raise TypeError(f"the MCP route serves {type(mcp_app).__name__}, not FastMCP's streamable HTTP app")
    return mcp_app
