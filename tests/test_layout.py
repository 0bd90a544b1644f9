"""The layout check: no import circle, no citation outside the repository, no private API drift.

- No two modules of ``graph_schema``, ``scheduler`` and ``server`` import each other
  through any chain, a function-level import included (a circle loads half a module and
  fails on a name only in some import orders).
- No file cites a design document outside the repository: docs live in ``docs/`` and
  ``README.md``.
- The stdio transport (``server/mcp/stdio.py``) calls FastMCP's private
  ``_lifespan_manager`` and ``_mcp_server``; ``pyproject.toml`` pins fastmcp to the
  minor release they are tested with, and this test fails when either name moves.
- SQLite keeps no index no query uses: ``embeddings_by_partition`` is dropped from a
  file that has it, and the queries that read ``embeddings`` by range use the
  ``(model, pk)`` index.
"""

from __future__ import annotations

import ast
import inspect
import re
import sqlite3
import subprocess
from pathlib import Path

from fastmcp import FastMCP

from palimpsest.graph_schema.backends import open_store
from palimpsest.graph_schema.sqlite import queries as q
from palimpsest.server.agents.registry import NAMES, entry_named

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("graph_schema", "scheduler", "server")


def module_imports() -> dict[str, set[str]]:
    """Each module of the packages, with the modules of the packages it imports anywhere in it."""
    files: dict[str, Path] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            files["palimpsest." + ".".join(parts)] = path
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                # A name that is a submodule is an edge to it; any other, to the module named.
                targets = [
                    f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in files else node.module
                    for alias in node.names
                ]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            for target in targets:
                if target in files and target != name:
                    graph[name].add(target)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_module_imports_itself_through_others() -> None:
    graph = module_imports()
    assert "palimpsest.graph_schema.credentials" in graph["palimpsest.graph_schema.neo4j.base"]
    assert circles(graph) == []


def test_the_circle_finder_finds_a_circle() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_file_cites_a_document_outside_the_repository() -> None:
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    outside = re.compile(r"\.\./shared/[\w/.-]*\.md|\b(?:SPEC|DESIGN|STYLE)\.md")
    cited = []
    for name in tracked.split():
        path = ROOT / name
        if path.suffix in {".png", ".jpg", ".gz"} or not path.is_file() or name == "tests/test_layout.py":
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if outside.search(line):
                cited.append(f"{name}:{number}: {line.strip()}")
    assert cited == []


def test_the_private_fastmcp_names_the_stdio_transport_uses_are_there() -> None:
    stdio = (ROOT / "server/mcp/stdio.py").read_text(encoding="utf-8")
    assert "server._lifespan_manager()" in stdio and "server._mcp_server" in stdio
    server = FastMCP("layout-check")
    assert inspect.signature(server._lifespan_manager).parameters == {}
    manager = server._lifespan_manager()
    assert hasattr(manager, "__aenter__") and hasattr(manager, "__aexit__")
    low_level = server._mcp_server
    assert inspect.iscoroutinefunction(low_level.run)
    assert list(inspect.signature(low_level.run).parameters)[:2] == ["read_stream", "write_stream"]
    assert callable(low_level.create_initialization_options)


def test_pyproject_pins_fastmcp_to_one_minor_release() -> None:
    pinned = re.search(r'"fastmcp>=(\d+)\.(\d+)\.\d+,<(\d+)\.(\d+)"', (ROOT / "pyproject.toml").read_text())
    assert pinned is not None
    major, minor, next_major, next_minor = map(int, pinned.groups())
    assert (next_major, next_minor) == (major, minor + 1)


async def test_an_unused_index_is_dropped_and_vector_reads_use_the_model_index(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    store = open_store(f"sqlite:///{path}")
    await store.initialize()
    await store.close()
    with sqlite3.connect(path) as conn:  # a file written before the index was dropped
        conn.execute("CREATE INDEX embeddings_by_partition ON embeddings (partition, model, pk)")
    store = open_store(f"sqlite:///{path}")
    await store.initialize()
    await store.close()
    with sqlite3.connect(path) as conn:
        indexes = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert "embeddings_by_model" in indexes and "embeddings_by_partition" not in indexes
        for query, params in [
            (q.EMBEDDING_ROWS, {"model": "m", "after": 0}),
            (q.EMBEDDING_UP_TO, {"model": "m", "pk": 10}),
        ]:
            plan = " ".join(row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {query}", params))
            assert "embeddings_by_model" in plan, plan


def test_every_agent_is_one_folder_and_one_registry_line() -> None:
    folders = sorted(path.parent.name for path in (ROOT / "server/agents").glob("*/__init__.py"))
    assert folders == sorted(NAMES)
    for name in NAMES:
        folder = ROOT / "server/agents" / name
        assert (folder / "hook.py").is_file() and (folder / "wiring.py").is_file(), name
        assert isinstance(entry_named(name).hook_help, str)
        # A hook runs on every turn and passes through this package: it imports nothing.
        tree = ast.parse((folder / "__init__.py").read_text(encoding="utf-8"))
        imports = [node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)]
        assert [ast.unparse(node) for node in imports] == ["from __future__ import annotations"], name


def test_only_the_registry_reaches_into_an_agent_folder() -> None:
    prefixes = tuple(f"palimpsest.server.agents.{name}" for name in NAMES)
    reaching = []
    for module, targets in module_imports().items():
        for target in targets:
            owner = next((prefix for prefix in prefixes if target == prefix or target.startswith(prefix + ".")), None)
            if owner is None or module == owner or module.startswith(owner + "."):
                continue
            reaching.append(f"{module} -> {target}")
    assert reaching == []
