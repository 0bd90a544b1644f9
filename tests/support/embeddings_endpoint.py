"""A local OpenAI-compatible embeddings endpoint for tests: real HTTP on 127.0.0.1.

Tests of `OpenAIEmbedder` (and of the server's background embedding) run the real
``openai`` client against it, so request encoding, batching, status handling and
ordering are exercised for real while nothing leaves the machine. Its vectors are a
deterministic bag of hashed words, so texts sharing words are near each other.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tests.support.llm_endpoint import JsonHandler, serving

#: Size of the endpoint's vectors.
DIMENSIONS = 16
_WORD = re.compile(r"\w+")


def bag_of_words(text: str, dimensions: int = DIMENSIONS) -> list[float]:
    """Each word hashed into one of ``dimensions`` buckets; never all zeros (a bias bucket)."""
    vector = [0.0] * dimensions
    vector[0] = 0.01
    for word in _WORD.findall(text.lower()):
        vector[int(hashlib.sha256(word.encode()).hexdigest(), 16) % dimensions] += 1.0
    return vector


@dataclass
class EmbeddingsEndpoint:
    """A running endpoint: its URL, what it received, and knobs a test turns.

    Attributes:
        base_url: Ends in ``/v1`` as the openai client expects.
        requests: Every request body, with the Authorization header under ``authorization``.
        status: HTTP status to answer with (200 serves vectors).
        reverse: Answer the items in reverse order (their ``index`` still right).
        drop_one: Answer one vector fewer than asked.
        gate: Requests wait for it to be set before answering (set from the start).
    """

    base_url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    status: int = 200
    reverse: bool = False
    drop_one: bool = False
    gate: threading.Event = field(default_factory=threading.Event)

    @property
    def inputs(self) -> list[list[str]]:
        """The texts of each request, in order."""
        return [request["input"] for request in self.requests]


@contextmanager
def serve_embeddings() -> Iterator[EmbeddingsEndpoint]:
    """Serve ``POST /v1/embeddings`` on a free local port until the block ends."""
    endpoint = EmbeddingsEndpoint()
    endpoint.gate.set()
    stopping = threading.Event()

    class Handler(JsonHandler):
        def do_POST(self) -> None:
            body = self.read_json()
            endpoint.requests.append({"path": self.path, "authorization": self.headers.get("Authorization"), **body})
            if self.path != "/v1/embeddings":
                self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                return
            while not endpoint.gate.wait(0.05):
                if stopping.is_set():
                    return
            if endpoint.status != 200:
                self._send(endpoint.status, {"error": {"message": "scripted failure", "type": "server_error"}})
                return
            texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
            data = [
                {"object": "embedding", "index": index, "embedding": bag_of_words(text)}
                for index, text in enumerate(texts)
            ]
            if endpoint.drop_one:
                data = data[:-1]
            if endpoint.reverse:
                data.reverse()
            self._send(200, {"object": "list", "data": data, "model": body.get("model"),
                             "usage": {"prompt_tokens": 1, "total_tokens": 1}})  # fmt: skip

    with serving(Handler, "fake-embeddings", stopping) as base_url:
        endpoint.base_url = base_url
        try:
            yield endpoint
        finally:
            endpoint.gate.set()
