"""The package's import graph has no cycle: every `import` in components/ (`shardflow`) and pipelines/
(`shardflow.pipelines`), at top level and inside functions, parsed with ast.

An edge A → B means module A imports B (explicitly, or B is a package that importing a module of
it initialises first). A cycle would make import order matter, and a module half-initialised when
its partner needs it; the old ones were pipelines.cli ↔ compiler ↔ pipeline (over a shared constant)
and shardflow.cli → pipelines → step_bodies → shardflow.cli.
"""
from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE_DIRS = {"shardflow": REPO / "components", "shardflow.pipelines": REPO / "pipelines"}


def package_modules() -> dict[str, Path]:
    """Module name → source file, for every module of the package (packages by their __init__.py)."""
    found = {}
    for package, root in PACKAGE_DIRS.items():
        for path in sorted(root.rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join([package, *parts])] = path
    return found


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imported_names(module: str, source: str, is_package: bool, modules: set[str]) -> set[str]:
    """The package's modules an import statement anywhere in `source` loads or reads from."""
    names = set()
    for node in ast.walk(ast.parse(source)):  # walk: function-level imports count as well
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(module, is_package, node)
            for alias in node.names:  # a submodule itself, else an attribute of `base`
                names.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
    return names & modules


def import_graph() -> dict[str, set[str]]:
    modules = package_modules()
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        edges = set()
        for name in imported_names(module, path.read_text(), path.name == "__init__.py", set(modules)):
            edges.add(name)
            parts = name.split(".")
            # Importing a.b.c first runs a and a.b; a package this module lives in is already running.
            edges |= {".".join(parts[:i]) for i in range(1, len(parts))
                      if not module.startswith(".".join(parts[:i]) + ".")}
        graph[module] = edges - {module}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as [a, b, ..., a], or None."""
    state: dict[str, str] = {}  # "open" while on the current path, "done" after
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == "open":
                return path[path.index(target):] + [target]
            if target not in state and (cycle := visit(target)):
                return cycle
        state[node] = "done"
        path.pop()
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)):
            return cycle
    return None


def test_the_package_has_no_import_cycle() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " → ".join(cycle or [])


def test_the_graph_sees_top_level_and_function_level_imports() -> None:
    graph = import_graph()
    assert "shardflow.pipelines.cli" in graph["shardflow.pipelines.commands"]    # top level, relative
    assert not any(name.startswith("shardflow.pipelines") for name in graph["shardflow.cli"])  # an entry point
    assert "shardflow.pipelines.compiler" in graph["shardflow.pipelines.cli"]    # inside compile_main
    assert "shardflow.pipelines.compiler" in graph["shardflow.pipelines.schedule"]  # inside a function, absolute
    assert "shardflow.pipelines.step_bodies" in graph["shardflow.pipelines.components"]  # inside each component
    assert "shardflow.core.errors" in graph["shardflow.pipelines.params"]        # `from ..core.errors import`
    assert "shardflow.commands" in graph["shardflow.pipelines.step_bodies"]  # each step's command
    assert "shardflow.cli" not in graph["shardflow.pipelines.step_bodies"]


def test_the_old_cycles_would_be_caught() -> None:
    graph = import_graph()
    graph["shardflow.pipelines.step_bodies"].add("shardflow.cli")  # step_bodies calling shardflow.cli.main again
    graph["shardflow.cli"].add("shardflow.pipelines.commands")  # and the command importing pipelines' commands
    cycle = find_cycle(graph)
    assert cycle and "shardflow.cli" in cycle and "shardflow.pipelines.step_bodies" in cycle
    source = "def f():\n    from .cli import DEFAULT_IMAGE\n"  # pipeline.py importing a constant from cli.py
    assert imported_names("shardflow.pipelines.pipeline", source, False, set(graph)) == {"shardflow.pipelines.cli"}
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_pipelines_import_their_package_relatively() -> None:
    """One import style in pipelines/: relative. components.py is the exception the KFP SDK imposes: its
    function bodies run alone in a step's container, so they import `shardflow.…` absolutely."""
    absolute = []
    for path in sorted((REPO / "pipelines").glob("*.py")):
        if path.name == "components.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("shardflow"):
                absolute.append(f"{path.name}:{node.lineno} from {node.module}")
    assert absolute == []  # (`import shardflow` to find the package's files, as local_cache does, is not a style)
