"""The HTTP server as an attacker's web page meets it (issue 30, parts 1 and 5).

Real ``palimpsest serve --transport http`` and ``palimpsest ui`` subprocesses on loopback,
probed with raw HTTP requests that set ``Host`` and ``Origin`` as a page that rebinds its
own name to 127.0.0.1 would: a foreign ``Host`` is refused (421) on every route, a
foreign ``Origin`` too (403), while loopback names, ``PALIMPSEST_ALLOWED_HOSTS`` and
clients sending no ``Origin`` are served. Also: the read-only viewer has no ``/mcp``,
every response carries the security headers, the index page shows no host or process
id, a message at the size limit gets the tool's own error over HTTP as over stdio and
in memory, and ``palimpsest ui --port N`` binds again while the last run's connection
is still in TIME_WAIT.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx2
import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport, StreamableHttpTransport
from fastmcp.exceptions import ToolError

from palimpsest.graph_schema.backends import Neo4jCredentials, open_store
from palimpsest.graph_schema.models import MAX_MESSAGE_BYTES, MaintenanceCycle, NewMessage
from palimpsest.scheduler.maintenance import make_holder
from palimpsest.server.mcp.app import build_server
from palimpsest.server.mcp.http_app import CONTENT_SECURITY_POLICY
from palimpsest.server.mcp.partitions import shared_cycle
from palimpsest.server.settings import Settings
from tests.support.transports import PALIMPSEST, START_SECONDS, free_port, server_env
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow

SECRET = "the heron gate opens at dawn"
#: Where the cycle's error happened: a thread name no viewer page may show.
ERROR_THREAD = "thread-of-the-quiet-error"
ALLOWED = "memory.example, *.corp.example,[fd00::1]"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "claude-code", "version": "1"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
#: Every kind of route: a viewer page, a page reading a partition, static, login, health, MCP.
ROUTES = ["/ui", "/ui/partition?p=claude", "/ui/static/viewer.js", "/ui/login", "/health", "/mcp", "/nowhere"]


@dataclass
class Served:
    """A running server: its base URL, port and the process id it recorded a cycle as."""

    base: str
    port: int
    holder: str
    store_url: str


async def fill(store_url: str) -> str:
    """A claude thread holding the secret, and a failed maintenance cycle run by this process."""
    store = open_store(store_url, Neo4jCredentials())
    await store.initialize()
    try:
        await store.append_messages("claude", "c1", [NewMessage(role="user", content=SECRET)])
        holder = make_holder()
        finished = datetime.now(UTC)
        await store.record_cycle(
            MaintenanceCycle(
                id="cycle-1",
                job="compaction",
                holder=holder,
                started_at=finished,
                finished_at=finished,
                errors=[f"thread {ERROR_THREAD}: the summarizer timed out", "and a second one"],
            )
        )
        return holder
    finally:
        await store.close()


def quiet_env(**extra: str) -> dict[str, str]:
    """A server's environment without an embedder: 4 MiB messages are stored, not embedded."""
    return server_env(PALIMPSEST_EMBEDDER="none", **extra)


def start(args: list[str], log: Path, **env: str) -> subprocess.Popen[bytes]:
    with log.open("w") as out:
        return subprocess.Popen([PALIMPSEST, *args], env=quiet_env(**env), stdout=out, stderr=subprocess.STDOUT)


def thread_ids(store_url: str) -> set[str]:
    """Every thread of the store, read directly."""

    async def read() -> set[str]:
        store = open_store(store_url, Neo4jCredentials())
        await store.initialize()
        try:
            return {thread.id for thread in await store.list_threads(None, limit=1000)}
        finally:
            await store.close()

    return asyncio.run(read())


def wait_healthy(process: subprocess.Popen[Any], base: str, log: Path) -> None:
    """Wait for ``/health`` to answer 200 (a guard on the start, not a timing)."""

    def healthy() -> bool | None:
        assert process.poll() is None, log.read_text()
        try:
            return httpx2.get(f"{base}/health", timeout=10).status_code == 200 or None
        except httpx2.TransportError:
            return None

    wait_until(healthy, START_SECONDS, f"nothing healthy answered at {base}")


def stop(process: subprocess.Popen[Any]) -> None:
    process.terminate()
    process.wait(timeout=30)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """``palimpsest serve --transport http`` on loopback, no tokens, with ``PALIMPSEST_ALLOWED_HOSTS``."""
    root = tmp_path_factory.mktemp("served")
    store_url = f"sqlite:///{root / 'm.db'}"
    holder = asyncio.run(fill(store_url))
    port = free_port()
    log = root / "server.log"
    process = start(
        ["serve", "--transport", "http", "--port", str(port), "--store", store_url],
        log,
        PALIMPSEST_ALLOWED_HOSTS=ALLOWED,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(process, base, log)
        yield Served(base, port, holder, store_url)
    finally:
        stop(process)


@pytest.fixture(scope="module")
def viewer(served: Served, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """``palimpsest ui`` on the same store."""
    log = tmp_path_factory.mktemp("viewer") / "ui.log"
    with log.open("w") as errors:
        process = subprocess.Popen(
            [PALIMPSEST, "ui", "--store", served.store_url, "--json"],
            env=quiet_env(),
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
        )
    try:
        assert process.stdout is not None
        base = json.loads(process.stdout.readline())["url"].removesuffix("/ui")
        wait_healthy(process, base, log)
        yield Served(base, int(base.rsplit(":", 1)[1]), served.holder, served.store_url)
    finally:
        stop(process)


def get(site: Served, path: str, **headers: str) -> httpx2.Response:
    return httpx2.get(f"{site.base}{path}", headers=headers, timeout=30)


def post_mcp(site: Served, body: dict[str, Any], **headers: str) -> httpx2.Response:
    return httpx2.post(f"{site.base}/mcp", json=body, headers={**MCP_HEADERS, **headers}, timeout=30)


@pytest.mark.parametrize("route", ROUTES)
def test_a_foreign_host_is_refused_on_every_route(served: Served, route: str) -> None:
    for host in (f"attacker.example:{served.port}", "attacker.example", "corp.example", "127.0.0.1.nip.io"):
        refused = get(served, route, Host=host)
        assert (refused.status_code, refused.text) == (421, "Misdirected Request"), host


def test_a_page_rebound_to_loopback_can_neither_open_a_session_nor_append(served: Served) -> None:
    foreign = {"Host": f"attacker.example:{served.port}"}
    refused = post_mcp(served, INITIALIZE, **foreign)
    assert refused.status_code == 421 and "mcp-session-id" not in refused.headers
    # Even with a session a loopback client opened, the page's requests are refused.
    opened = post_mcp(served, INITIALIZE)
    assert opened.status_code == 200, opened.text
    session = {"Mcp-Session-Id": opened.headers["mcp-session-id"]}
    assert post_mcp(served, {"jsonrpc": "2.0", "method": "notifications/initialized"}, **session).status_code == 202
    append = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {
            "name": "append_messages",
            "arguments": {"thread_id": "planted", "messages": [{"role": "user", "content": "x"}]},
        },
    }
    assert post_mcp(served, append, **session, **foreign).status_code == 421
    assert post_mcp(served, append, **session, Origin="http://attacker.example").status_code == 403
    assert thread_ids(served.store_url) == {"c1"}


@pytest.mark.parametrize("route", ROUTES)
def test_a_foreign_origin_is_refused_on_every_route(served: Served, route: str) -> None:
    for origin in ("http://attacker.example", f"http://attacker.example:{served.port}", "null", "https://corp.example"):
        refused = get(served, route, Origin=origin)
        assert (refused.status_code, refused.text) == (403, "Forbidden Origin"), origin
    allowed_host = get(served, route, Host="memory.example", Origin="http://attacker.example")
    assert allowed_host.status_code == 403


def test_loopback_names_and_clients_without_origin_are_served(served: Served) -> None:
    port = served.port
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "localhost", "LOCALHOST:1"):
        page = get(served, "/ui", Host=host)
        assert page.status_code == 200 and 'data-partition="claude"' in page.text, host
    for origin in (f"http://127.0.0.1:{port}", f"http://localhost:{port}", f"http://[::1]:{port}"):
        assert get(served, "/ui", Origin=origin).status_code == 200, origin
    assert get(served, "/health", Host=f"localhost:{port}", Origin=f"http://localhost:{port}").status_code == 200


def test_the_allowed_hosts_setting_admits_its_names_in_host_and_origin(served: Served) -> None:
    for host, origin in [
        (f"memory.example:{served.port}", f"http://memory.example:{served.port}"),
        ("memory.example", "https://memory.example"),  # behind a TLS proxy
        ("viewer.corp.example", "https://viewer.corp.example:8443"),
        ("a.b.corp.example", None),
        (f"[fd00::1]:{served.port}", f"http://[fd00::1]:{served.port}"),
    ]:
        headers = {"Host": host} | ({"Origin": origin} if origin else {})
        page = get(served, "/ui/partition?p=claude", **headers)
        assert page.status_code == 200 and "c1" in page.text, headers
    # A loopback page may call a server reached by an allowed name, and the other way round.
    assert get(served, "/health", Origin="https://memory.example").status_code == 200
    opened = post_mcp(served, INITIALIZE, Host="memory.example", Origin="http://memory.example")
    assert opened.status_code == 200 and opened.headers["mcp-session-id"]


def test_the_allowed_hosts_setting_reads_a_comma_list_or_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PALIMPSEST_ALLOWED_HOSTS", " Memory.Example , *.corp.example,")
    assert Settings().allowed_hosts == ["memory.example", "*.corp.example"]
    monkeypatch.setenv("PALIMPSEST_ALLOWED_HOSTS", '["memory.example", "[FD00:0::1]", "10.1.2.3"]')
    assert Settings().allowed_hosts == ["memory.example", "fd00::1", "10.1.2.3"]


def test_a_bad_allowed_hosts_setting_is_one_line(tmp_path: Path) -> None:
    for value, said in [
        ("http://memory.example", "allowed_hosts.0: Value error, 'http://memory.example' is not a host name"),
        ("ok.example,memory.example:80", "allowed_hosts.1: Value error, 'memory.example:80' is not a host name"),
        ("*", "allowed_hosts.0: Value error, '*' is not a host name"),
        ('["memory.example"', "allowed_hosts: Value error, not a JSON list of host names"),
    ]:
        done = subprocess.run(
            [PALIMPSEST, "serve", "--transport", "http", "--store", f"sqlite:///{tmp_path / 'm.db'}"],
            env=server_env(PALIMPSEST_ALLOWED_HOSTS=value),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 1 and done.stdout == ""
        [line] = done.stderr.splitlines()
        assert line.startswith(f"error: invalid configuration: {said}"), line


def test_every_response_carries_the_security_headers(served: Served, viewer: Served) -> None:
    wanted = {
        "content-security-policy": CONTENT_SECURITY_POLICY,
        "x-content-type-options": "nosniff",
        "x-frame-options": "DENY",
        "referrer-policy": "same-origin",
    }
    assert "frame-ancestors 'none'" in CONTENT_SECURITY_POLICY and "unsafe-inline" not in CONTENT_SECURITY_POLICY
    assert "default-src 'self'" in CONTENT_SECURITY_POLICY
    for site in (served, viewer):
        responses = [get(site, route) for route in ROUTES]
        responses += [get(site, "/ui", Host="attacker.example"), get(site, "/ui", Origin="null")]
        for response in responses:
            assert {name: response.headers.get(name) for name in wanted} == wanted, response.url


def test_the_viewer_server_has_no_mcp(viewer: Served) -> None:
    assert post_mcp(viewer, INITIALIZE).status_code == 404
    assert get(viewer, "/mcp").status_code == 404
    page = get(viewer, "/ui")
    assert page.status_code == 200 and 'data-partition="claude"' in page.text
    assert get(viewer, "/ui", Host=f"attacker.example:{viewer.port}").status_code == 421
    assert get(viewer, "/ui", Origin="http://attacker.example").status_code == 403


def test_no_viewer_page_shows_a_host_or_a_process_id(served: Served, viewer: Served) -> None:
    host, pid, _ = served.holder.split(":")
    hidden = shared_cycle(
        MaintenanceCycle(
            id="c", job="compaction", holder=served.holder, started_at=datetime.now(UTC), finished_at=datetime.now(UTC)
        )
    ).holder
    for site in (served, viewer):
        page = get(site, "/ui").text
        row = page.split('<table id="cycles">', 1)[1].split("</table>", 1)[0]
        assert f"<td>{hidden}</td>" in row and "<td>2</td>" in row  # one process, two errors
        assert served.holder not in page and f"{host}:{pid}" not in page and f":{pid}:" not in page
        assert ERROR_THREAD not in page


async def test_a_message_at_the_limit_gets_the_tools_own_error_over_http(served: Served, tmp_path: Path) -> None:
    at_limit = [{"role": "user", "content": "x" * MAX_MESSAGE_BYTES}]
    # The longest JSON a message at the limit may take: every byte written as \u0001.
    escaped = [{"role": "user", "content": "\x01" * MAX_MESSAGE_BYTES}]
    over = [{"role": "user", "content": "x" * (MAX_MESSAGE_BYTES + 1)}]
    in_memory = build_server(Settings(store=f"sqlite:///{tmp_path / 'm.db'}", scheduler=False, embedder="none"))
    async with Client(in_memory) as session:
        with pytest.raises(ToolError) as expected:
            await session.call_tool("append_messages", {"thread_id": "big", "messages": over})
    assert (
        str(expected.value)
        == f"message 0 is {MAX_MESSAGE_BYTES + 1} bytes, over the limit of {MAX_MESSAGE_BYTES} bytes"
    )
    stdio = StdioTransport(PALIMPSEST, ["serve", "--store", f"sqlite:///{tmp_path / 's.db'}"], env=quiet_env())
    http = StreamableHttpTransport(f"{served.base}/mcp")
    for transport in (stdio, http):
        async with Client(transport, timeout=300) as session:
            for messages in (at_limit, escaped):
                stored = await session.call_tool("append_messages", {"thread_id": "big", "messages": messages})
                assert stored.structured_content is not None and stored.structured_content["appended"] == 1
            with pytest.raises(ToolError) as answered:
                await session.call_tool("append_messages", {"thread_id": "big", "messages": over})
        assert str(answered.value) == str(expected.value), transport


async def test_with_tokens_on_every_interface_only_allowed_hosts_are_answered(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"tok-claude": ["claude"]}), encoding="utf-8")
    port = free_port()
    log = tmp_path / "server.log"
    args = [
        "serve",
        "--transport",
        "http",
        "--host",
        "0.0.0.0",
        "--port",
        str(port),
        "--store",
        f"sqlite:///{tmp_path / 'm.db'}",
    ]
    process = start(args, log, PALIMPSEST_TOKENS_FILE=str(tokens))
    site = Served(f"http://127.0.0.1:{port}", port, "", "")
    try:
        wait_healthy(process, site.base, log)
        assert get(site, "/health", Host="0.0.0.0").status_code == 421  # the wildcard names no host
        assert get(site, "/ui", Host="memory.example").status_code == 421
        assert get(site, "/ui/login", Host=f"localhost:{port}").status_code == 200
        over = [{"role": "user", "content": "x" * (MAX_MESSAGE_BYTES + 1)}]
        async with Client(StreamableHttpTransport(f"{site.base}/mcp", auth="tok-claude"), timeout=300) as session:
            with pytest.raises(ToolError, match=f"over the limit of {MAX_MESSAGE_BYTES} bytes"):
                await session.call_tool("append_messages", {"thread_id": "big", "messages": over})
    finally:
        stop(process)
    assert "set PALIMPSEST_ALLOWED_HOSTS to the names clients use" in log.read_text()


def time_wait_on(port: int) -> bool | None:
    """Whether a TCP socket bound to ``port`` on this machine is in TIME_WAIT (state 06 of /proc/net/tcp)."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        if int(local.split(":")[1], 16) == port and state == "06":
            return True
    return None


def connected(port: int) -> socket.socket | None:
    """A connection to ``port`` once something listens there (``ui`` prints its address first)."""
    try:
        return socket.create_connection(("127.0.0.1", port), timeout=30)
    except ConnectionRefusedError:
        return None


def test_palimpsest_ui_binds_its_port_again_at_once(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'm.db'}"
    port = free_port()
    for run in ("first", "second"):
        process = subprocess.Popen(
            [PALIMPSEST, "ui", "--store", store, "--port", str(port), "--json"],
            env=quiet_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert process.stdout is not None and process.stderr is not None
            line = process.stdout.readline()
            assert line, f"the {run} run did not start: {process.stderr.read()}"
            assert json.loads(line)["url"] == f"http://127.0.0.1:{port}/ui"
            # The server closes the connection first, so its end stays in TIME_WAIT, on the port.
            with wait_until(lambda: connected(port), START_SECONDS, f"nothing listened on {port}") as client:
                client.sendall(f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode())
                answer = b""
                while chunk := client.recv(65536):
                    answer += chunk
            assert answer.startswith(b"HTTP/1.1 200 ") and b'"status":"healthy"' in answer
            wait_until(lambda: time_wait_on(port), START_SECONDS, f"no connection of port {port} entered TIME_WAIT")
        finally:
            stop(process)
