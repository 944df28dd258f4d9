"""The arrows docs/architecture.md forbids, enforced on the import graph (parsed with ast, nothing imported).

The graph is tests/architecture/test_kfp_imports.py's (`package_modules`, `import_graph`, `imported_names`, `find_cycle`:
every import, top level and inside functions), extended to `shardflow.tfx` (tfx_adapter/, parsed only:
importing it needs tfx). Each rule is a function returning its offenders as "importer → imported":

1. `core_offenders`: shardflow.core imports nothing of shardflow outside the core, and neither kfp nor tfx.
2. `component_offenders`: a component imports another component only along ALLOWED, which has no cycle.
3. `pipelines_offenders`: only pipelines/ imports shardflow.pipelines (its commands reach the `shardflow`
   command through an entry point: pipelines/commands.py);
   only pipelines/ imports kfp.
4. `tfx_offenders`: only tfx_adapter/ imports tfx or shardflow.tfx; it reaches the components through
   example_gen's package and cli only.
5. `cycle_offenders`: no import cycle, the TFX adapter included.
6. `wiring_offenders`: pipelines/ never imports a component's executor; components.py (the KFP components)
   reaches shardflow only through shardflow.pipelines; pipeline.py only through shardflow.pipelines and
   components' config constants.
7. `shipped_offenders`: the package and the adapter import neither testkit nor benchmarks (not in the image);
   testkit, shared by tests and benchmarks, imports neither benchmarks nor tests/ (`kit_leaf_offenders`).

`test_a_planted_bad_arrow_is_caught` plants one offending edge per rule in a copy of the real graph.

The rule that reads calls, not imports (only the stream module reads or shuffles records), is test_stream_owner.py's.
"""
from __future__ import annotations

import ast
from functools import lru_cache
from typing import Callable
from unittest import mock

import pytest

import test_kfp_imports as graph_tools  # the import graph's builder: reused, not copied

REPO = graph_tools.REPO
CORE, PIPELINES, ADAPTER = "shardflow.core", "shardflow.pipelines", "shardflow.tfx"
COMMAND = "shardflow.cli"
KFP, TFX = {"kfp", "kfp_server_api"}, {"tfx"}  # top-level names; tfx_bsl (Transform's Arrow coders) is not tfx
NOT_SHIPPED = {"testkit", "benchmarks"}  # top-level names of test and benchmark code: not in the image (k8s/Dockerfile)
COMPONENTS = frozenset(path.name for path in (REPO / "components").iterdir()  # core/ and tasks/ are layers
                       if (path / "__init__.py").is_file() and path.name not in ("core", "tasks"))
# The only imports from one component into another: (importer, imported). Each builds on the other.
ALLOWED = frozenset({
    ("predict", "example_gen"),  # rows read, checked and encoded exactly as ExampleGen does: no ingest/predict skew
    ("predict", "evaluator"),  # the model loaded as the Evaluator loads it
    ("predict", "pusher"),  # a serving directory resolved through the Pusher's CURRENT.json
    ("infra_validator", "evaluator"),  # the Evaluator's output names: its verdict, metrics and canaries
    ("pusher", "evaluator"),  # the Evaluator's verdict markers and metrics file
    ("pusher", "infra_validator"),  # the infra verdict's marker names and the warm-up file's place
    ("tuner", "trainer"),  # a trial is a Trainer run: its config, its --train-args parser, its run()
    ("label_finder", "trainer"),  # a fold model is a Trainer run: its config, its flags, its task, its run()
    ("label_finder", "predict"),
    ("label_finder", "evaluator"),  # a box issue's picture drawn and its pixels fetched as the Evaluator's issue images
    ("label_finder", "example_gen"),  # each box's own row: the box index read again by ExampleGen's reader
    ("deployer", "pusher"),  # KServe follows CURRENT.json: read, moved and its storage URI taken as the Pusher does
    # promote / rollback --inference-service move the registry alias with the pointer, as the registry sync does
    ("deployer", "tracking"),
    ("tracking", "pusher"),  # the registry follows the serving directory's CURRENT.json, read as the Pusher reads it  # a fold's held-out rows are predicted by predict's run() on its examples
})

Graph = dict[str, set[str]]
Rule = Callable[[Graph, Graph], list[str]]


def third_party(source: str) -> set[str]:
    """Top-level names of the absolute imports anywhere in `source` (`tfx`, `kfp`, `numpy`; not shardflow)."""
    roots = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots - {"shardflow"}


@lru_cache(maxsize=None)
def _real() -> tuple[Graph, Graph]:
    with mock.patch.dict(graph_tools.PACKAGE_DIRS, {ADAPTER: REPO / "tfx_adapter"}):
        modules, graph = graph_tools.package_modules(), graph_tools.import_graph()
    return graph, {module: third_party(path.read_text()) for module, path in modules.items()}


def real() -> tuple[Graph, Graph]:
    """(package imports, third-party imports) per module of shardflow, shardflow.pipelines and shardflow.tfx: copies."""
    graph, external = _real()
    return {m: set(t) for m, t in graph.items()}, {m: set(t) for m, t in external.items()}


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def component_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "shardflow" and parts[1] in COMPONENTS else None


def _edges(graph: Graph, keep: Callable[[str, str], bool]) -> list[str]:
    return sorted(f"{m} → {t}" for m, targets in graph.items() for t in targets if keep(m, t))


def _external(external: Graph, keep: Callable[[str], bool], names: set[str]) -> list[str]:
    return sorted(f"{m} → {name}" for m, roots in external.items() if keep(m) for name in roots & names)


def core_offenders(graph: Graph, external: Graph) -> list[str]:
    return (_edges(graph, lambda m, t: within(m, CORE) and not within(t, CORE))
            + _external(external, lambda m: within(m, CORE), KFP | TFX))


def component_offenders(graph: Graph, external: Graph) -> list[str]:
    del external

    def crosses(m: str, t: str) -> bool:
        a, b = component_of(m), component_of(t)
        return a is not None and b is not None and a != b and (a, b) not in ALLOWED
    return _edges(graph, crosses)


def pipelines_offenders(graph: Graph, external: Graph) -> list[str]:
    return (_edges(graph, lambda m, t: within(t, PIPELINES) and not within(m, PIPELINES))
            + _external(external, lambda m: not within(m, PIPELINES), KFP))


def tfx_offenders(graph: Graph, external: Graph) -> list[str]:
    adapter_may = {"shardflow", "shardflow.example_gen", "shardflow.example_gen.cli"}
    return (_external(external, lambda m: not within(m, ADAPTER), TFX)
            + _edges(graph, lambda m, t: within(t, ADAPTER) and not within(m, ADAPTER))
            + _edges(graph, lambda m, t: within(m, ADAPTER) and not (
                within(t, ADAPTER) or within(t, CORE) or t in adapter_may)))


def cycle_offenders(graph: Graph, external: Graph) -> list[str]:
    del external
    cycle = graph_tools.find_cycle(graph)
    return [" → ".join(cycle)] if cycle else []


def wiring_offenders(graph: Graph, external: Graph) -> list[str]:
    del external
    configs = {f"shardflow.{c}" for c in COMPONENTS} | {f"shardflow.{c}.config" for c in COMPONENTS}
    return (_edges(graph, lambda m, t: within(m, PIPELINES) and component_of(t) is not None
                   and t.endswith(".executor"))
            + _edges(graph, lambda m, t: m == f"{PIPELINES}.components" and not within(t, PIPELINES))
            + _edges(graph, lambda m, t: m == f"{PIPELINES}.pipeline" and not (within(t, PIPELINES) or t in configs)))


def shipped_offenders(graph: Graph, external: Graph) -> list[str]:
    del graph
    return _external(external, lambda m: True, NOT_SHIPPED)


def kit_leaf_offenders(sources: dict[str, str]) -> list[str]:
    """testkit → benchmarks, or → a module of tests/ (imported by its bare name, as the tests import them)."""
    tests = {"tests", "benchmarks"} | {path.stem for path in (REPO / "tests").rglob("*.py")}
    return sorted(f"{module} → {name}" for module, text in sources.items() for name in third_party(text) & tests)


def kit_sources() -> dict[str, str]:
    return {"testkit" + ("" if path.stem == "__init__" else f".{path.stem}"): path.read_text()
            for path in sorted((REPO / "testkit").glob("*.py"))}


RULES: dict[str, Rule] = {"core": core_offenders, "component": component_offenders,
                          "pipelines": pipelines_offenders, "tfx": tfx_offenders, "cycle": cycle_offenders,
                          "wiring": wiring_offenders, "shipped": shipped_offenders}


@pytest.mark.parametrize("rule", RULES)
def test_the_code_has_no_forbidden_arrow(rule: str) -> None:
    offenders = RULES[rule](*real())
    assert offenders == [], f"forbidden imports ({rule}; see docs/architecture.md): {offenders}"


def test_the_allowed_component_arrows_are_all_used_and_have_no_cycle() -> None:
    graph, _ = real()
    used = {(component_of(m), component_of(t)) for m, targets in graph.items() for t in targets
            if component_of(m) and component_of(t) and component_of(m) != component_of(t)}
    assert used == ALLOWED, f"unused allowances (remove them here and in docs/architecture.md): {ALLOWED - used}"
    assert graph_tools.find_cycle({a: {b for x, b in ALLOWED if x == a} for a, _ in ALLOWED}) is None


def test_the_graph_covers_every_layer() -> None:
    """Guards the rules against an empty or partial graph: each layer, the adapter's function-level import too."""
    graph, external = real()
    assert {"example_gen", "transform", "trainer", "evaluator", "pusher", "infra_validator", "predict"} <= COMPONENTS
    assert "shardflow.commands" in graph[COMMAND]  # the components' commands, registered in the `shardflow` command
    for component in COMPONENTS:  # each one a config, an executor and a cli, in the commands' table
        assert {f"shardflow.{component}.{n}" for n in ("config", "executor", "cli")} <= graph.keys(), component
        assert f"shardflow.{component}.cli" in graph["shardflow.commands"], component
    assert "shardflow.core.storage" in graph["shardflow.core.output_dir"]
    assert "shardflow.example_gen" in graph["shardflow.tfx.executor"]  # `from shardflow.example_gen import run` in a function
    assert "tfx" in external["shardflow.tfx.component"] and "kfp" in external[f"{PIPELINES}.kfp_sdk"]
    assert "shardflow.example_gen.rows" in graph["shardflow.predict.sources"]  # an allowed cross-component arrow


PLANTED = {  # rule: (importer, imported) edges and (module, third-party name) imports, each forbidden
    "core": ([("shardflow.core.storage", "shardflow.example_gen.rows")], [("shardflow.core.uri", "kfp")]),
    "component": ([("shardflow.example_gen.executor", "shardflow.predict.plan")], []),
    "pipelines": ([("shardflow.trainer.executor", f"{PIPELINES}.step_bodies")], [("shardflow.trainer.export", "kfp")]),
    "tfx": ([(f"{PIPELINES}.pipeline", "shardflow.tfx.component"), ("shardflow.tfx.executor", "shardflow.trainer")],
            [("shardflow.example_gen.executor", "tfx")]),
    "cycle": ([("shardflow.core.uri", "shardflow.core.storage")], []),
    "wiring": ([(f"{PIPELINES}.step_bodies", "shardflow.trainer.executor"),
                (f"{PIPELINES}.pipeline", "shardflow.evaluator.scorer")], []),
    "shipped": ([], [("shardflow.pusher.executor", "testkit"), (f"{PIPELINES}.step_bodies", "benchmarks"),
                     ("shardflow.tfx.executor", "testkit")]),
}


@pytest.mark.parametrize("rule", RULES)
def test_a_planted_bad_arrow_is_caught(rule: str) -> None:
    graph, external = real()
    edges, imports = PLANTED[rule]
    for importer, imported in edges:
        graph[importer].add(imported)
    for module, name in imports:
        external[module].add(name)
    offenders = RULES[rule](graph, external)
    if rule == "cycle":
        assert offenders and "shardflow.core.uri" in offenders[0] and "shardflow.core.storage" in offenders[0]
        return
    assert sorted(f"{a} → {b}" for a, b in edges + imports) == sorted(offenders)


def test_testkit_imports_neither_benchmarks_nor_tests() -> None:
    sources = kit_sources()  # below: the oracle's function-level import of TF Serving's proto is read too
    assert {"testkit", "testkit.serving_oracle"} <= set(sources) and "tensorflow_serving" in third_party(
        sources["testkit.serving_oracle"])
    assert kit_leaf_offenders(sources) == [], "move what testkit needs into testkit (docs/architecture.md)"


def test_a_planted_testkit_import_is_caught() -> None:
    planted = "from benchmarks.serving_race import race\n\ndef f():\n    import helpers_s3\n"
    sources = {**kit_sources(), "testkit.planted": planted}
    assert kit_leaf_offenders(sources) == ["testkit.planted → benchmarks", "testkit.planted → helpers_s3"]


def test_planted_source_lines_become_the_arrows_the_rules_check() -> None:
    """From text to arrow: a function-level relative import, and tfx told apart from tfx_bsl."""
    graph, _ = real()
    source = "def load():\n    from ..evaluator.scorer import score\n"
    assert graph_tools.imported_names("shardflow.trainer.task", source, False, set(graph)) == {
        "shardflow.evaluator.scorer"}
    assert third_party("import tfx.v1 as tfx\nfrom tfx_bsl.public import tfxio\nfrom . import storage\n") == {
        "tfx", "tfx_bsl"}
    assert third_party("def f():\n    from kfp import dsl\n") & KFP == {"kfp"}
