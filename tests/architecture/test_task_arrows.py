"""The task layer's arrows (docs/architecture.md, "Task kinds"), on test_architecture.py's import graph.

components/tasks/ holds one package per kind of annotation and the registry the components find them in
(issue 68). Rules, each returning its offenders as "importer → imported":

1. `registry_offenders`: outside tasks/, a module imports `shardflow.tasks` (the registry) or
   `shardflow.tasks.base` (the interface), never a kind's package; `SEAMS_LEFT` lists the arrows of code
   not moved yet, each with the seam that removes it.
2. `kind_offenders`: a kind's package imports no other kind's.
3. `layer_offenders`: tasks/ imports core/, tasks/ and the Evaluator's scoring modules (the engine a kind plugs
   into, as Ultralytics' `yolo/detect/val.py` builds on `engine/validator.py`), never a component's
   executor, config or cli (they dispatch through the registry: an arrow back would be a cycle), nor any
   other component; the registry and `base` import no component at all.
core/ importing tasks/ is test_architecture.py's core rule (core imports nothing outside core/), planted here too.
"""
from __future__ import annotations

import pytest

from test_architecture import CORE, Graph, _edges, core_offenders, real, within

TASKS = "shardflow.tasks"
INTERFACE = {TASKS, f"{TASKS}.base"}
ENGINES = {"shardflow.evaluator"}  # components whose scoring modules a kind builds on
DISPATCHERS = ("config", "executor", "cli")  # an engine's modules that import the registry
SEAMS_LEFT = frozenset({  # (importer, imported): arrows into a kind's package from code that has not moved yet
    # label_finder's box issues draw as the Evaluator draws detections (next seam: box issues into tasks/detection)
    ("shardflow.label_finder.boxes", f"{TASKS}.detection"),
    ("shardflow.label_finder.boxes", f"{TASKS}.detection.plots"),
})


def kind_of(module: str) -> str | None:
    """`shardflow.tasks.detection.scoring` → "detection"; the registry and `base` are no kind."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and within(module, TASKS) and module not in INTERFACE else None


def registry_offenders(graph: Graph) -> list[str]:
    return _edges(graph, lambda m, t: not within(m, TASKS) and within(t, TASKS) and t not in INTERFACE
                  and (m, t) not in SEAMS_LEFT)


def kind_offenders(graph: Graph) -> list[str]:
    return _edges(graph, lambda m, t: kind_of(m) is not None and kind_of(t) is not None and kind_of(m) != kind_of(t))


def _layer_allows(module: str, target: str) -> bool:
    if not within(target, "shardflow") or within(target, CORE) or within(target, TASKS):
        return True
    engine = next((e for e in ENGINES if within(target, e)), None)
    return (module not in INTERFACE and engine is not None
            and target.split(".")[-1] not in DISPATCHERS)


def layer_offenders(graph: Graph) -> list[str]:
    return _edges(graph, lambda m, t: within(m, TASKS) and not _layer_allows(m, t))


RULES = {"registry": registry_offenders, "kind": kind_offenders, "layer": layer_offenders}


@pytest.mark.parametrize("rule", RULES)
def test_the_task_layer_has_no_forbidden_arrow(rule: str) -> None:
    offenders = RULES[rule](real()[0])
    assert offenders == [], f"forbidden imports ({rule}; see docs/architecture.md, Task kinds): {offenders}"


def test_the_rules_see_the_task_layer() -> None:
    """Guards the rules against a graph without the layer: the registry, each kind, the dispatch, the seam left."""
    graph = real()[0]
    assert {f"{TASKS}.{kind}" for kind in ("classification", "segmentation", "detection")} <= graph[TASKS]
    assert TASKS in graph["shardflow.evaluator.executor"] and TASKS in graph["shardflow.evaluator.config"]
    assert "shardflow.evaluator.scorer" in graph[f"{TASKS}.detection.scoring"]  # a kind on the engine: allowed
    assert SEAMS_LEFT <= {(m, t) for m, targets in graph.items() for t in targets}, "a seam closed: drop its line"


PLANTED = {
    "registry": [("shardflow.evaluator.executor", f"{TASKS}.detection.scoring"),
                 ("shardflow.predict.writers", f"{TASKS}.classification")],
    "kind": [(f"{TASKS}.segmentation.task", f"{TASKS}.classification.evaluation")],
    "layer": [(f"{TASKS}.detection.evaluation", "shardflow.evaluator.executor"),
              (f"{TASKS}.classification.task", "shardflow.trainer.task"), (f"{TASKS}.base", "shardflow.evaluator.scorer")],
}


@pytest.mark.parametrize("rule", RULES)
def test_a_planted_bad_task_arrow_is_caught(rule: str) -> None:
    graph, _ = real()
    for importer, imported in PLANTED[rule]:
        graph.setdefault(importer, set()).add(imported)
    assert RULES[rule](graph) == sorted(f"{a} → {b}" for a, b in PLANTED[rule])


def test_core_importing_a_task_is_caught() -> None:
    graph, external = real()
    graph["shardflow.core.storage"].add(f"{TASKS}.detection.report")
    assert core_offenders(graph, external) == [f"shardflow.core.storage → {TASKS}.detection.report"]
