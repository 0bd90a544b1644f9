"""The distribution as users get it: one import name, layers that import one way, no cycle.

The wheel is built from this checkout and installed into a fresh virtual environment
(its third-party dependencies come from the test environment through a path file, so
no network is needed and the editable install of the checkout is not visible); from
there `palimpsest --help` and an MCP handshake with `palimpsest serve` must work.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport

from palimpsest.scheduler import model_files

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("graph_schema", "scheduler", "server")
#: Which layers each layer may import: dependencies point one way.
ALLOWED = {"graph_schema": {"graph_schema"}, "scheduler": {"graph_schema", "scheduler"}, "server": set(LAYERS)}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    (found,) = out.glob("palimpsest_memory-*.whl")
    return found


@pytest.mark.slow
def test_the_wheel_holds_one_top_level_package_with_its_data(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/", 1)[0] for name in names}
    assert {name for name in top if not name.endswith(".dist-info")} == {"palimpsest"}
    for data in ("palimpsest/graph_schema/sqlite/schema.sql", "palimpsest/graph_schema/neo4j/schema.cypher"):
        assert data in names
    assert "palimpsest/server/cli/main.py" in names and "palimpsest/server/mcp/tools.py" in names
    # The built-in embedder's weights, which setup.py copies in at build time.
    assert {f"palimpsest/scheduler/minilm_model/{name}" for name in model_files.FILES} <= set(names)


@pytest.mark.slow
async def test_the_wheel_works_from_a_fresh_virtual_environment(wheel: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "fresh"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    # Nothing of this checkout on the path (no PYTHONPATH, not its folder as the current
    # one): else pip would take the checkout's build metadata for an installed copy.
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PALIMPSEST_", "PYTHON"))}
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "--no-deps", "--no-index", "--quiet", str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=env,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr
    fresh_site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    # A plain path line: the test environment's packages, without running its .pth files
    # (one of which would point back at this checkout).
    (fresh_site / "dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    env["PALIMPSEST_SCHEDULER"] = "off"

    where = subprocess.run(
        [
            str(python),
            "-c",
            "import importlib.util, palimpsest; "
            "print(palimpsest.__file__); "
            "print([n for n in ('server', 'graph_schema', 'scheduler') if importlib.util.find_spec(n)])",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        check=True,
    ).stdout.splitlines()
    assert where[0].startswith(str(fresh_site)), where
    assert where[1] == "[]"

    script = env_dir / "bin" / "palimpsest"
    helped = subprocess.run([str(script), "--help"], capture_output=True, text=True, cwd=tmp_path, env=env, check=False)
    assert helped.returncode == 0, helped.stderr
    assert "serve" in helped.stdout and "ingest" in helped.stdout

    store = f"sqlite:///{tmp_path / 'fresh.db'}"
    transport = StdioTransport(
        str(script), ["serve", "--store", store, "--partition", "fresh"], env=env, cwd=str(tmp_path)
    )
    async with Client(transport) as client:
        tools = {tool.name for tool in await client.list_tools()}
        stats = await client.call_tool("memory_stats", {})
    assert {"append_messages", "grep_memories", "expand_summary"} <= tools
    assert stats.structured_content is not None and stats.structured_content["messages"] == 0


def _imports(path: Path, module: str) -> set[str]:
    """The palimpsest modules a module imports at its top level or inside functions."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("palimpsest."):
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("palimpsest."))
    return found - {module}


def _modules() -> dict[str, Path]:
    modules = {}
    for layer in LAYERS:
        for path in (ROOT / layer).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = (
                ".".join(("palimpsest", *parts[:-1])) if parts[-1] == "__init__" else ".".join(("palimpsest", *parts))
            )
            modules[name] = path
    return modules


def test_layers_import_one_way() -> None:
    for module, path in _modules().items():
        layer = module.split(".")[1]
        for target in _imports(path, module):
            assert target.split(".")[1] in ALLOWED[layer], f"{module} imports {target}: {layer} may not"


def test_no_import_cycle_between_modules() -> None:
    """Module-level imports form no cycle (a package importing its own children aside)."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        targets: set[str] = set()
        for node in tree.body:  # module level only: imports inside functions run later
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("palimpsest."):
                names = {f"{node.module}.{alias.name}" for alias in node.names}
                targets |= {name for name in names if name in modules} or {node.module}
        is_package = path.name == "__init__.py"
        graph[module] = {
            target
            for target in targets
            if target in modules and target != module and not (is_package and target.startswith(module + "."))
        }
    state: dict[str, int] = {}

    def visit(module: str, trail: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph[module]):
            assert state.get(target) != 1, "import cycle: " + " -> ".join([*trail, module, target])
            if target not in state:
                visit(target, [*trail, module])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [])
