"""A local OpenAI-compatible chat endpoint for tests: real HTTP on 127.0.0.1, scripted answers.

Tests of the LLM summarizer run the real ``openai`` client against this server, so
request encoding, status handling, timeouts and retries are exercised for real while
nothing ever leaves the machine.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """What the endpoint answers to one request."""

    content: str | None = "## Objective\n- summarized"
    status: int = 200
    delay: float = 0.0


Responder = Callable[[dict[str, Any]], Reply]


@dataclass
class Endpoint:
    """A running endpoint: its base URL and every request body it received."""

    base_url: str
    requests: list[dict[str, Any]]


def completion_body(model: str, content: str | None) -> dict[str, Any]:
    """A chat-completions response body as OpenAI's API shapes it."""
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1767225600,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


class JsonHandler(BaseHTTPRequestHandler):
    """A request handler speaking JSON, quiet, that shrugs off clients who hung up."""

    def read_json(self) -> dict[str, Any]:
        return json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            return  # the client gave up (timeout): nothing left to answer

    def log_message(self, format: str, *args: Any) -> None:
        return


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler], name: str, stopping: threading.Event) -> Iterator[str]:
    """Run ``handler`` on a free loopback port until the block ends; yields the ``/v1`` base URL.

    ``stopping`` is set on the way out, before shutdown, so handlers held in a wait return.
    """
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name=name, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        stopping.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@contextmanager
def serve_chat(responder: Responder) -> Iterator[Endpoint]:
    """Serve ``POST /v1/chat/completions`` on a free local port until the block ends.

    Args:
        responder: Decides the reply to each request from its JSON body.

    Yields:
        The endpoint; ``base_url`` ends in ``/v1`` as the openai client expects.
    """
    requests: list[dict[str, Any]] = []
    stopping = threading.Event()

    class Handler(JsonHandler):
        def do_POST(self) -> None:
            body = self.read_json()
            requests.append({"path": self.path, "authorization": self.headers.get("Authorization"), **body})
            if self.path != "/v1/chat/completions":
                self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                return
            reply = responder(body)
            if reply.delay and stopping.wait(reply.delay):
                return
            if reply.status != 200:
                self._send(reply.status, {"error": {"message": "scripted failure", "type": "server_error"}})
            else:
                self._send(200, completion_body(body.get("model", "test"), reply.content))

    with serving(Handler, "fake-openai", stopping) as base_url:
        yield Endpoint(base_url=base_url, requests=requests)
