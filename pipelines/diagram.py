"""A picture of the compiled pipeline: a Mermaid flowchart drawn from the KFP IR, never by hand.

    python -m shardflow.pipelines.diagram tests/golden/pipeline.yaml     # the README's picture

Steps are the IR's tasks, arrows their `dependentTasks`; a condition (`dsl.If`) is a box named as
the pipeline names it, and the exit handler a box whose handler task runs however the steps end.

>>> ir = {"root": {"dag": {"tasks": {
...     "a": {"componentRef": {"name": "comp-a"}, "taskInfo": {"name": "a"}},
...     "if-ok": {"componentRef": {"name": "comp-condition-1"}, "taskInfo": {"name": "ok"},
...               "dependentTasks": ["a"], "triggerPolicy": {"condition": "x == true"}}}}},
...     "components": {"comp-a": {}, "comp-condition-1": {"dag": {"tasks": {
...         "b": {"componentRef": {"name": "comp-b"}, "taskInfo": {"name": "b"}}}}}}}
>>> print(mermaid(ir))
flowchart LR
  a[a]
  subgraph if_ok [if ok]
    b[b]
  end
  a --> if_ok
"""
from __future__ import annotations

import sys
from typing import Any

import yaml


def mermaid(ir: dict[str, Any]) -> str:
    """The flowchart of a compiled pipeline spec (the first document of `shardflow compile`'s YAML)."""
    lines, edges = ["flowchart LR"], []
    _dag(ir, ir["root"]["dag"], 1, lines, edges)
    return "\n".join(lines + edges)


def _dag(ir: dict[str, Any], dag: dict[str, Any], depth: int, lines: list[str], edges: list[str]) -> None:
    pad = "  " * depth
    for name, task in sorted(dag["tasks"].items(), key=lambda item: _order(ir, item)):
        node = _id(name)
        inner = ir["components"].get(task["componentRef"]["name"], {}).get("dag")
        if inner:
            lines.append(f"{pad}subgraph {node} [{_label(task)}]")
            _dag(ir, inner, depth + 1, lines, edges)
            lines.append(f"{pad}end")
        else:
            lines.append(f"{pad}{node}[{task['taskInfo']['name']}]")
        edges += [f"  {_id(before)} --> {node}" for before in sorted(task.get("dependentTasks", []))]


def _order(ir: dict[str, Any], item: tuple[str, dict[str, Any]]) -> tuple[int, str]:
    """Plain steps first, boxes after, each by name: a stable text for a stable picture."""
    name, task = item
    return (1 if ir["components"].get(task["componentRef"]["name"], {}).get("dag") else 0, name)


def _label(task: dict[str, Any]) -> str:
    name = task["taskInfo"]["name"]
    if task.get("triggerPolicy", {}).get("condition"):
        return f"if {name}"
    return "steps; record-outcome runs however they end" if name.startswith("exit-handler") else name


def _id(name: str) -> str:
    return name.replace("-", "_")


def main(argv: list[str] | None = None) -> int:
    (path,) = argv if argv is not None else sys.argv[1:]
    with open(path) as compiled:
        print(mermaid(next(yaml.safe_load_all(compiled))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
