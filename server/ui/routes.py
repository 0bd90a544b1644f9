"""The viewer's HTTP routes under ``/ui``, added to the MCP server's own HTTP app.

Why on the MCP server: it is already the one process that holds the store, the
embedder, the tokens and the tool metrics, so the viewer shows exactly what the
tools see, behind the same tokens. Pages are rendered on the server (jinja2
templates shipped in the package) and read without any script (a small one only
loads a summary's messages in place); nothing is
fetched from any other host, so the viewer works with no network (and the Content
Security Policy of ``server/mcp/http_app.py`` allows nothing else: no inline script or
style, no framing). That module's Host/Origin guard answers before any route here.

Every route identifies the caller first (``access.identify``), then reads the
partition it names only if the caller may see it; a partition the caller may not
see answers exactly as one that does not exist. Query parameters carry the names
(``p`` partition, ``t`` thread, ``s`` summary, ``m`` message, ``page``), since thread
ids may hold any character (`server/ui/links.py`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode

from fastmcp import FastMCP
from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from palimpsest.graph_schema.errors import InvalidInput, NotFound, PalimpsestError, StoreUnavailable
from palimpsest.server.mcp.health import LiveServer
from palimpsest.server.mcp.partitions import PartitionTokenVerifier
from palimpsest.server.mcp.tools import Runtime
from palimpsest.server.retrieval.grep import MAX_QUERY_CHARS
from palimpsest.server.ui import links, views
from palimpsest.server.ui.access import TOKEN_COOKIE, Refused, Viewer, identify
from palimpsest.server.ui.dag_svg import layout
from palimpsest.server.ui.memory import project_page
from palimpsest.server.ui.search_page import MODES, parse_mode, search
from palimpsest.server.ui.sessions import SORTS, SessionCache, list_sessions, parse_list_page, parse_sort
from palimpsest.server.ui.thread_page import thread_page

HERE = Path(__file__).resolve().parent
#: The files under static/ the viewer serves, with their media types.
STATIC_FILES = {"viewer.js": "text/javascript", "viewer.css": "text/css"}

Handler = Callable[[Request, Viewer, Runtime], Awaitable[Response]]


def _environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(default=True),
        undefined=StrictUndefined,
    )
    env.globals.update(
        thread_url=links.thread_url,
        summary_url=links.summary_url,
        partition_url=links.partition_url,
        project_url=links.project_url,
        time_range=views.time_range,
        urlencode=urlencode,
        sorts=SORTS,
    )
    return env


def _partition(request: Request, viewer: Viewer) -> str:
    """The partition a request names, if the caller may see it; else it does not exist."""
    partition = request.query_params.get("p", "")
    if not partition or not viewer.may_see(partition):
        raise NotFound("partition", partition)
    return partition


async def _visible(viewer: Viewer, runtime: Runtime) -> list[str]:
    """The partitions the caller may see that hold something."""
    names = await runtime.store.partitions()
    return sorted(name for name in names if viewer.may_see(name))


def _list_urls(path: str, query: dict[str, str]) -> dict[str, str]:
    """The sessions list at each sort, its filters kept, from the first page."""
    kept = {key: value for key, value in query.items() if value and key not in ("sort", "page")}
    return {sort: f"{path}?{urlencode({**kept, 'sort': sort})}" for sort in SORTS}


def _page_url(path: str, query: dict[str, str], page: int) -> str:
    kept = {key: value for key, value in query.items() if value and key != "page"}
    return f"{path}?{urlencode({**kept, 'page': str(page)})}"


def _required(request: Request, name: str, what: str) -> str:
    value = request.query_params.get(name, "")
    if not value:
        raise InvalidInput(f"name a {what} with ?{name}=")
    return value


def register_ui(server: FastMCP, live: LiveServer, grants: dict[str, frozenset[str]] | None) -> None:
    """Add the viewer's routes to a server's HTTP app, guarded by ``grants`` (None: loopback only)."""
    verifier = PartitionTokenVerifier(grants) if grants is not None else None
    env = _environment()
    cache = SessionCache()

    def render(template: str, status: int = 200, **context: Any) -> HTMLResponse:
        context.setdefault("signed_in", verifier is not None)
        return HTMLResponse(env.get_template(template).render(**context), status_code=status)

    def error(status: int, message: str) -> HTMLResponse:
        return render("error.html", status, message=message)

    def route(path: str) -> Callable[[Handler], Handler]:
        """Register a viewer page: the caller identified, the store open, domain errors as pages."""

        def decorator(handler: Handler) -> Handler:
            async def endpoint(request: Request) -> Response:
                try:
                    viewer = await identify(request, verifier)
                except Refused as refused:
                    if refused.login:
                        back = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                        return RedirectResponse(f"/ui/login?{urlencode({'next': back})}", 303)
                    return error(403, str(refused))
                runtime = live.runtime
                if runtime is None:
                    return error(503, "the store is not open")
                try:
                    return await handler(request, viewer, runtime)
                except NotFound as exc:
                    return error(404, str(exc))
                except InvalidInput as exc:
                    return error(400, str(exc))
                except StoreUnavailable as exc:
                    return error(503, f"store unavailable: {exc}")
                except PalimpsestError as exc:
                    return error(500, str(exc))

            server.custom_route(path, methods=["GET"], include_in_schema=False)(endpoint)
            return handler

        return decorator

    @route("/ui")
    async def index(request: Request, viewer: Viewer, runtime: Runtime) -> Response:
        return render("index.html", overview=await views.overview(runtime, viewer.allowed))

    async def sessions_view(
        request: Request, runtime: Runtime, partitions: list[str], path: str, fixed: dict[str, str]
    ) -> dict[str, Any]:
        """What both session lists render: one page of sessions, the filters, the sort and page links."""
        query = {key: request.query_params.get(key, "") for key in ("agent", "project", "sort")} | fixed
        listed = await list_sessions(
            runtime.store,
            cache,
            partitions,
            project=query["project"] or None,
            sort=parse_sort(query["sort"]),
            page=parse_list_page(request.query_params.get("page")),
        )
        return {
            "listed": listed,
            "list_path": path,
            "query": query,
            "sort_urls": _list_urls(path, query),
            "page_urls": {page: _page_url(path, query, page) for page in range(1, listed.pages + 1)},
        }

    @route("/ui/sessions")
    async def sessions(request: Request, viewer: Viewer, runtime: Runtime) -> Response:
        visible = await _visible(viewer, runtime)
        agent = request.query_params.get("agent", "")
        if agent and agent not in visible:
            raise NotFound("partition", agent)
        shown = await sessions_view(request, runtime, [agent] if agent else visible, "/ui/sessions", {})
        return render("sessions.html", agents=visible, **shown)

    @route("/ui/partition")
    async def partition(request: Request, viewer: Viewer, runtime: Runtime) -> Response:
        where = _partition(request, viewer)
        page = await views.partition_page(runtime, where)
        shown = await sessions_view(request, runtime, [where], "/ui/partition", {"p": where})
        return render("partition.html", page=page, partition=where, hybrid=runtime.embedder is not None, **shown)

    @route("/ui/thread")
    async def thread(request: Request, viewer: Viewer, runtime: Runtime) -> Response:
        where = _partition(request, viewer)
        shown = await thread_page(
            runtime.store,
            cache,
            where,
            _required(request, "t", "thread"),
            page=request.query_params.get("page"),
            summary_id=request.query_params.get("s") or None,
            focus=request.query_params.get("m") or None,
        )
        return render(
            "thread.html",
            partition=where,
            shown=shown,
            session=shown.session,
            conversation=shown.conversation,
            dag=shown.dag,
            drawing=layout(shown.dag),
            box_urls=shown.summary_urls(),
            levels=shown.table_levels(),
            selected=shown.opened.node.summary.id if shown.opened else None,
            hybrid=runtime.embedder is not None,
        )

    @route("/ui/verify")
    async def verify(request: Request, viewer: Viewer, runtime: Runtime) -> Response:
        where = _partition(request, viewer)
        dag = await views.thread_dag(runtime.store, where, _required(request, "t", "thread"))
        return render(
            "verify.html",
            partition=where,
            dag=dag,
            levels=dag.levels,
            selected=None,
            hybrid=runtime.embedder is not None,
        )

    @route("/ui/summary")
    async def summary(request: Request, viewer: Viewer, runtime: Runtime) -> Response:
        where = _partition(request, viewer)
        detail = await views.summary_detail(runtime.store, where, _required(request, "s", "summary"))
        return render("summary_page.html", partition=where, detail=detail, hybrid=runtime.embedder is not None)

    @route("/ui/project")
    async def project(request: Request, viewer: Viewer, runtime: Runtime) -> Response:
        where = _partition(request, viewer)
        name = request.query_params.get("project") or None
        shown = await project_page(runtime.store, where, name, runtime.settings.startup_budget)
        return render("project.html", partition=where, shown=shown, hybrid=runtime.embedder is not None)

    @route("/ui/expand")
    async def expand(request: Request, viewer: Viewer, runtime: Runtime) -> Response:
        where = _partition(request, viewer)
        summary_id = _required(request, "s", "summary")
        page = await views.expand_messages(runtime.store, where, summary_id, request.query_params.get("cursor"))
        more = f"/ui/expand?{urlencode({'p': where, 's': summary_id, 'cursor': page.next_cursor})}"
        return render(
            "messages.html", page=page, messages=views.page_messages(page), more=more if page.next_cursor else None
        )

    @route("/ui/search")
    async def search_page(request: Request, viewer: Viewer, runtime: Runtime) -> Response:
        where = _partition(request, viewer)
        query = request.query_params.get("q", "").strip()
        mode = parse_mode(request.query_params.get("mode"))
        if len(query) > MAX_QUERY_CHARS:
            raise InvalidInput(f"a query may hold at most {MAX_QUERY_CHARS} characters")
        found = await search(runtime.store, where, query, mode, runtime.embedder) if query else None
        return render(
            "search.html",
            partition=where,
            query=query,
            mode=mode or "",
            found=found,
            modes=MODES,
            hybrid=runtime.embedder is not None,
        )

    @server.custom_route("/ui/static/{name}", methods=["GET"], include_in_schema=False)
    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC_FILES:
            return Response("not found", status_code=404, media_type="text/plain")
        return Response((HERE / "static" / name).read_bytes(), media_type=STATIC_FILES[name])

    @server.custom_route("/ui/login", methods=["GET", "POST"], include_in_schema=False)
    async def login(request: Request) -> Response:
        target = request.query_params.get("next", "/ui")
        target = target if target.startswith("/ui") else "/ui"
        if verifier is None:
            return RedirectResponse("/ui", 303)
        if request.method == "GET":
            return render("login.html", target=target, problem=None, signed_in=False)
        form = parse_qs((await request.body()).decode("utf-8", errors="replace"))
        token = form.get("token", [""])[0].strip()
        if not token or await verifier.verify_token(token) is None:
            return render("login.html", 401, target=target, problem="unknown token", signed_in=False)
        response = RedirectResponse(target, 303)
        response.set_cookie(
            TOKEN_COOKIE, token, httponly=True, samesite="strict", secure=request.url.scheme == "https", path="/ui"
        )
        return response

    @server.custom_route("/ui/logout", methods=["GET"], include_in_schema=False)
    async def logout(request: Request) -> Response:
        response = RedirectResponse("/ui/login" if verifier is not None else "/ui", 303)
        response.delete_cookie(TOKEN_COOKIE, path="/ui")
        return response
