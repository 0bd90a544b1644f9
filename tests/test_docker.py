"""The image and the compose file, checked without a container engine (these machines have none).

What can be checked here is: the compose file against the Compose specification's
models (compose-pydantic, generated from the spec's JSON schema, unknown keys refused)
and the deployment it must describe; the Dockerfile's instructions; and the image's
own command, ENTRYPOINT then CMD, run directly as a process, answering ``/health``,
logging JSON lines, and passing the image's HEALTHCHECK command. Building the image
and running the containers is not done here (docs/operations.md).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx2
import yaml
from compose_pydantic import ComposeSpecification

from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parent.parent
DOCKER = ROOT / "docker"
PALIMPSEST = str(Path(sys.executable).parent / "palimpsest")
#: Seconds the server may take to answer (a guard on the wait).
START_SECONDS = 60


def dockerfile() -> list[tuple[str, str]]:
    """The Dockerfile's instructions as (KEYWORD, arguments), continuation lines joined."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for line in (DOCKER / "Dockerfile").read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        pending += stripped.removesuffix("\\").strip() + " "
        if not stripped.endswith("\\"):
            keyword, _, arguments = pending.strip().partition(" ")
            instructions.append((keyword.upper(), arguments.strip()))
            pending = ""
    return instructions


def one(keyword: str) -> str:
    [arguments] = [arguments for found, arguments in dockerfile() if found == keyword]
    return arguments


def env_file(name: str) -> dict[str, str]:
    lines = (DOCKER / name).read_text(encoding="utf-8").splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def test_the_compose_file_follows_the_compose_specification() -> None:
    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text(encoding="utf-8"))
    ComposeSpecification.model_validate(compose)
    neo4j, server = compose["services"]["neo4j"], compose["services"]["palimpsest"]
    assert neo4j["image"] == "neo4j:5.26-community"
    assert neo4j["volumes"] == ["neo4j-data:/data"] and "neo4j-data" in compose["volumes"]
    assert "cypher-shell" in " ".join(neo4j["healthcheck"]["test"])
    assert server["depends_on"] == {"neo4j": {"condition": "service_healthy"}}
    assert (DOCKER / server["build"]["context"]).resolve() == ROOT
    assert (ROOT / server["build"]["dockerfile"]).resolve() == DOCKER / "Dockerfile"
    assert server["environment"]["PALIMPSEST_STORE"] == "bolt://neo4j:7687"
    tokens_path = server["environment"]["PALIMPSEST_TOKENS_FILE"]
    assert f"./tokens.json:{tokens_path}:ro" in server["volumes"]
    assert server["ports"] == ["8765:8765"]


def test_credentials_come_from_env_files_whose_examples_agree() -> None:
    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text(encoding="utf-8"))
    assert compose["services"]["neo4j"]["env_file"] == ["neo4j.env"]
    assert compose["services"]["palimpsest"]["env_file"] == ["palimpsest.env"]
    assert "PASSWORD" not in json.dumps(compose["services"]["palimpsest"]["environment"])
    neo4j, server = env_file("neo4j.env.example"), env_file("palimpsest.env.example")
    assert neo4j["NEO4J_AUTH"] == f"{server['NEO4J_USER']}/{server['NEO4J_PASSWORD']}"


def test_the_dockerfile_builds_a_slim_non_root_http_image() -> None:
    instructions = dockerfile()
    keywords = [keyword for keyword, _ in instructions]
    assert one("FROM") == "python:3.11-slim"
    user = one("USER")
    assert user not in ("root", "0") and keywords.index("USER") < keywords.index("ENTRYPOINT")
    for keyword, arguments in instructions:
        if keyword == "COPY":
            *sources, _ = arguments.split()
            assert all((ROOT / source).exists() for source in sources), arguments
    command = json.loads(one("ENTRYPOINT")) + json.loads(one("CMD"))
    assert command[:2] == ["palimpsest", "serve"] and command[command.index("--transport") + 1] == "http"
    assert one("EXPOSE") == command[command.index("--port") + 1]
    assert "/health" in one("HEALTHCHECK")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_image_command_serves_health_logs_json_and_passes_the_healthcheck(tmp_path: Path) -> None:
    """ENTRYPOINT + CMD run as a process, on a free port instead of 8765, with a tokens file as compose mounts."""
    command = json.loads(one("ENTRYPOINT")) + json.loads(one("CMD"))
    port = str(free_port())
    command[0] = PALIMPSEST
    command[command.index("--port") + 1] = port
    tokens = tmp_path / "tokens.json"
    tokens.write_text('{"tok": ["claude"]}', encoding="utf-8")
    env = {key: value for key, value in os.environ.items() if not key.startswith("PALIMPSEST_")}
    env.update(PALIMPSEST_STORE=f"sqlite:///{tmp_path / 'memory.db'}", PALIMPSEST_TOKENS_FILE=str(tokens))
    healthcheck = json.loads(one("HEALTHCHECK").split("CMD", 1)[1])
    healthcheck[0] = sys.executable
    healthcheck = [part.replace(":8765/", f":{port}/") for part in healthcheck]
    stderr = (tmp_path / "stderr.log").open("w")
    server = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=stderr)
    try:

        def answered() -> httpx2.Response | None:
            try:
                return httpx2.get(f"http://127.0.0.1:{port}/health", timeout=10)
            except httpx2.TransportError:
                assert server.poll() is None, (tmp_path / "stderr.log").read_text()
                return None

        health = wait_until(answered, START_SECONDS, "the server never answered /health")
        assert health.status_code == 200 and health.json()["scheduler"] == "running"
        assert subprocess.run(healthcheck, env=env, timeout=60).returncode == 0
    finally:
        server.terminate()
        server.wait(timeout=30)
        stderr.close()
    assert subprocess.run(healthcheck, env=env, timeout=60, stderr=subprocess.DEVNULL).returncode != 0
    lines = [json.loads(line) for line in (tmp_path / "stderr.log").read_text().splitlines() if line.strip()]
    assert lines and all({"time", "level", "logger", "message"} <= set(line) for line in lines)
    loggers = {line["logger"] for line in lines}
    assert "palimpsest.server" in loggers and any(name.startswith("uvicorn") for name in loggers), loggers
