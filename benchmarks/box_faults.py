"""Planted annotation faults in the demo box set, and how a list of box issues scores against them.

`plant_box_faults` copies an AutoML box CSV (demo_boxes.write_boxes' train.csv: no header, one row per box,
an image's rows adjacent) with faults in distinct images that keep at least one box: boxes removed (the
image needs two), classes swapped to another class, boxes shifted by half their width and height (away
from the edge they would cross). Rows are numbered as ExampleGen numbers them (the first line is row 1).

`score_box_issues` counts a planted fault found when an issue of its image says so: a removed box by an
`overlooked` issue whose suggested box overlaps it (IoU >= MATCH_IOU); a swapped class by a `swapped` issue
on its row; a shifted box by a `badly_located` issue on its row, or an `overlooked` one at its true place.
Precision is the share of the considered issues that find a planted fault.

>>> faults = [{"kind": "swapped", "path": "a.jpg", "row": 3, "box": [0, 0, .5, .5]}]
>>> score_box_issues([{"path": "a.jpg", "row": 3, "issue": "swapped"},
...                   {"path": "b.jpg", "row": 1, "issue": "overlooked", "suggested_box": [0, 0, .1, .1]}], faults)
{'considered': 2, 'hits': 1, 'found': 1, 'planted': 1, 'precision': 0.5, 'recall': 1.0}
"""
from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, Sequence

import numpy as np

KINDS = ("removed", "swapped", "shifted")
MATCH_IOU = 0.3  # a fold model's box of a small shape is often a few pixels off: 0.3 still names the object


def _corners(row: list[str]) -> list[float]:
    """ymin, xmin, ymax, xmax of an AutoML row (path,label,x_min,y_min,,,x_max,y_max,,)."""
    return [float(row[3]), float(row[2]), float(row[7]), float(row[6])]


def _shift(row: list[str]) -> list[str]:
    """The row's box moved by half its size on both axes, towards the side with room."""
    ymin, xmin, ymax, xmax = _corners(row)
    dy, dx = (ymax - ymin) / 2, (xmax - xmin) / 2
    dy, dx = (dy if ymax + dy <= 1 else -dy), (dx if xmax + dx <= 1 else -dx)
    moved = list(row)
    moved[2], moved[3], moved[6], moved[7] = (repr(round(v, 6)) for v in (xmin + dx, ymin + dy, xmax + dx, ymax + dy))
    return moved


def plant_box_faults(source: Path, target: Path, per_kind: int = 10, seed: int = 0) -> list[dict[str, Any]]:
    """Writes `target`, a copy of `source` with `per_kind` faults of each kind (module docstring); the faults:
    {"kind", "path", "row" (in target; None for a removed box), "box" (its true corners), "true", "given"}."""
    with open(source, newline="") as stream:
        rows = list(csv.reader(stream))
    images: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        if row[1]:
            images.setdefault(row[0], []).append(i)
    rng = np.random.default_rng(seed)
    paths = sorted(images)
    order = [paths[i] for i in rng.permutation(len(paths))]
    two = [p for p in order if len(images[p]) >= 2][:per_kind]
    rest = [p for p in order if p not in set(two)][:2 * per_kind]
    chosen = {"removed": two, "swapped": rest[:per_kind], "shifted": rest[per_kind:]}
    if any(len(v) < per_kind for v in chosen.values()):
        raise ValueError(f"{source}: too few images with boxes for {per_kind} faults of each kind")
    classes = sorted({row[1] for row in rows if row[1]})
    planted, removed = {}, set()
    for kind, picked in chosen.items():
        for path in picked:
            i = int(rng.choice(images[path]))
            true = rows[i][1]
            fault = {"kind": kind, "path": path, "box": _corners(rows[i]), "true": true, "given": true}
            if kind == "removed":
                removed.add(i)
                fault["given"] = None
            elif kind == "swapped":
                rows[i] = [rows[i][0], str(rng.choice([c for c in classes if c != true])), *rows[i][2:]]
                fault["given"] = rows[i][1]
            else:
                rows[i] = _shift(rows[i])
            planted[i] = fault
    kept = [i for i in range(len(rows)) if i not in removed]
    for number, i in enumerate(kept, 1):
        if i in planted:
            planted[i]["row"] = number
    with open(target, "w", newline="") as stream:
        csv.writer(stream).writerows(rows[i] for i in kept)
    return [{"row": None, **planted[i]} for i in sorted(planted)]


def _iou(a: Sequence[float], b: Sequence[float]) -> float:
    h = min(a[2], b[2]) - max(a[0], b[0])
    w = min(a[3], b[3]) - max(a[1], b[1])
    if h <= 0 or w <= 0:
        return 0.0
    inter = h * w
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def finds(issue: dict[str, Any], fault: dict[str, Any]) -> bool:
    """Whether `issue` (a line of label_issues.jsonl) finds the planted `fault`."""
    if issue["path"] != fault["path"]:
        return False
    at_object = issue["issue"] == "overlooked" and _iou(issue["suggested_box"], fault["box"]) >= MATCH_IOU
    if fault["kind"] == "removed":
        return at_object
    if fault["kind"] == "swapped":
        return issue["issue"] == "swapped" and issue["row"] == fault["row"]
    return (issue["issue"] == "badly_located" and issue["row"] == fault["row"]) or at_object


def score_box_issues(issues: Sequence[dict[str, Any]], faults: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Precision of `issues` (all considered) and recall of `faults`."""
    hits = [any(finds(issue, fault) for fault in faults) for issue in issues]
    found = [any(finds(issue, fault) for issue in issues) for fault in faults]
    return {"considered": len(issues), "hits": sum(hits), "found": sum(found), "planted": len(faults),
            "precision": round(sum(hits) / max(len(issues), 1), 4), "recall": round(sum(found) / max(len(faults), 1), 4)}


def recall_by_kind(issues: Sequence[dict[str, Any]], faults: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Per planted kind, the share found."""
    return {kind: round(float(np.mean([any(finds(i, f) for i in issues) for f in faults if f["kind"] == kind])), 4)
            for kind in KINDS if any(f["kind"] == kind for f in faults)}
