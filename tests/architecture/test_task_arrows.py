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
4. `named_kind_offenders`: the mechanics that dispatch through the registry (`NAMES_NO_KIND`: infra
   validation, predict) name no kind in their code: no identifier or string (docstrings aside) holds a kind's
   name or its own word ("detector"), so a branch on `info.task == DETECTION_TASK` or a kind's message fails here, not
   only an import of the kind's package (rule 1).
core/ importing tasks/ is test_architecture.py's core rule (core imports nothing outside core/), planted here too.
"""
from __future__ import annotations

import ast
import re

import pytest

import test_kfp_imports as graph_tools
from test_architecture import CORE, Graph, _edges, core_offenders, real, within

TASKS = "shardflow.tasks"
INTERFACE = {TASKS, f"{TASKS}.base"}
# components whose modules a kind builds on (predict: its tables and error, which a kind's prediction writer uses)
ENGINES = {"shardflow.evaluator", "shardflow.infra_validator", "shardflow.predict"}
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

# Modules (and packages) whose code names no task kind: they ask the model's task (`task_for(info.task)`).
NAMES_NO_KIND = ("shardflow.infra_validator", "shardflow.predict")
KIND_WORDS = re.compile(r"classification|segmentation|detection|detector", re.IGNORECASE)
# The Evaluator's modules cleaned so far (its scorer, label list and loaded model still name kinds: SEAMS in the docs)
NAMES_NO_KIND += tuple(f"shardflow.evaluator.{name}" for name in ("intervals", "resampled_metrics", "confusion",
                                                                   "label_list", "scorer", "loaded_model"))


def _words(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, text) of every identifier, imported name and string of `tree` but its docstrings."""
    docstrings = {id(node.value) for node in ast.walk(tree)
                  if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            texts = [a.asname or a.name for a in node.names] + [getattr(node, "module", None) or ""]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            texts = [node.value]
        else:
            texts = [getattr(node, field) for field in ("id", "attr", "name", "arg")
                     if isinstance(getattr(node, field, None), str)]
        found += [(getattr(node, "lineno", 0), text) for text in texts]
    return found


def named_kind_offenders(sources: dict[str, str]) -> list[str]:
    """"module:line names a kind: text" for each kind word in the code of a `NAMES_NO_KIND` module."""
    return sorted(f"{module}:{line} names a kind: {text[:60]}" for module, source in sources.items()
                  if any(within(module, package) for package in NAMES_NO_KIND)
                  for line, text in _words(ast.parse(source)) if KIND_WORDS.search(text))


def _sources() -> dict[str, str]:
    return {module: path.read_text() for module, path in graph_tools.package_modules().items()}


@pytest.mark.parametrize("rule", RULES)
def test_the_task_layer_has_no_forbidden_arrow(rule: str) -> None:
    offenders = RULES[rule](real()[0])
    assert offenders == [], f"forbidden imports ({rule}; see docs/architecture.md, Task kinds): {offenders}"


def test_the_mechanics_name_no_kind() -> None:
    sources = _sources()
    assert named_kind_offenders(sources) == [], "a dispatcher names a task kind (docs/architecture.md, Task kinds)"
    assert "task_for" in sources["shardflow.infra_validator.executor"]  # it dispatches: the rule has something to see
    assert "task_for" in sources["shardflow.predict.executor"] and "task_for" in sources["shardflow.predict.writers"]


def test_a_planted_kind_name_is_caught() -> None:
    sources = _sources()
    sources["shardflow.infra_validator.executor"] += "\nif info.task == DETECTION_TASK:\n    pass\n"
    sources["shardflow.infra_validator.canaries"] += '\nREASON = f"the {name} has no boxes for a Detector"\n'
    offenders = named_kind_offenders(sources)
    assert [line.split(" names a kind: ")[1] for line in offenders] == [" has no boxes for a Detector",
                                                                        "DETECTION_TASK"]
    sources["shardflow.trainer.executor"] = "import shardflow.tasks.detection\n"  # not a NAMES_NO_KIND module yet
    assert named_kind_offenders(sources) == offenders


def test_a_planted_kind_name_in_predict_is_caught() -> None:
    """predict's old branches planted back: a kind's string, a kind's served outputs, a kind's writer imported."""
    sources = _sources()
    sources["shardflow.predict.writers"] += '\nif spec.task == "segmentation":\n    pass\n'
    sources["shardflow.predict.inference"] += "\nfrom ..core.box_schema import DETECTION_OUTPUTS\n"
    sources["shardflow.predict.executor"] += "\ndef f():\n    from ..tasks.classification.predictions import SCHEMA\n"
    assert {(line.split(":")[0], line.split(" names a kind: ")[1]) for line in named_kind_offenders(sources)} == {
        ("shardflow.predict.executor", "tasks.classification.predictions"),
        ("shardflow.predict.inference", "DETECTION_OUTPUTS"), ("shardflow.predict.writers", "segmentation")}


def test_a_kind_branch_planted_back_in_the_evaluators_bootstrap_is_caught() -> None:
    """intervals.py's old dispatch, planted back: the kind's function by name and the kind as a string."""
    sources = _sources()
    sources["shardflow.evaluator.intervals"] += '\none = _classification_resamples if task == "classification" else 0\n'
    assert [line.split(" names a kind: ")[1] for line in named_kind_offenders(sources)] == [
        "_classification_resamples", "classification"]


def test_the_rules_see_the_task_layer() -> None:
    """Guards the rules against a graph without the layer: the registry, each kind, the dispatch, the seam left."""
    graph = real()[0]
    assert {f"{TASKS}.{kind}" for kind in ("classification", "segmentation", "detection")} <= graph[TASKS]
    assert TASKS in graph["shardflow.evaluator.executor"] and TASKS in graph["shardflow.evaluator.config"]
    assert "shardflow.evaluator.scorer" in graph[f"{TASKS}.detection.scoring"]  # a kind on the engine: allowed
    assert "shardflow.predict.tables" in graph[f"{TASKS}.classification.predictions"]  # on predict's: allowed
    assert SEAMS_LEFT <= {(m, t) for m, targets in graph.items() for t in targets}, "a seam closed: drop its line"


PLANTED = {
    "registry": [("shardflow.evaluator.executor", f"{TASKS}.detection.scoring"),
                 ("shardflow.predict.writers", f"{TASKS}.classification")],
    "kind": [(f"{TASKS}.segmentation.task", f"{TASKS}.classification.evaluation")],
    "layer": [(f"{TASKS}.detection.evaluation", "shardflow.evaluator.executor"),
              (f"{TASKS}.classification.task", "shardflow.trainer.task"),
              (f"{TASKS}.base", "shardflow.evaluator.scorer"),
              (f"{TASKS}.detection.predictions", "shardflow.predict.executor")],
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
