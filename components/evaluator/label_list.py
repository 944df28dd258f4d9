"""The scored split's likely label errors, ranked and named by CSV row: `label_issues.jsonl` and its summary.

The model's task finds them (`task.find_label_issues(scores)`, an `IssueList`: labels by confident learning,
masks by their share of confidently rejected pixels: tasks/<kind>/label_issues.py) and names the feature drawn
over each picture (`task.issue_overlay(info)`: a mask, or none); this module ranks, names and draws them.

Each issue is named by the examples' row provenance (`core.example_rows`): index file, CSV row and
path. Examples written before provenance existed are listed by position only (index, row, path null).

>>> issues = IssueList(np.array([4]), np.array([0]), np.array([1]), np.array([0.05]), "confident learning")
>>> issue_lines(issues, None, "eval", ["cat", "dog"])[0]
{'rank': 1, 'split': 'eval', 'index': None, 'row': None, 'path': None, 'position': 4, 'given': 'cat', \
'given_id': 0, 'suggested': 'dog', 'suggested_id': 1, 'score': 0.05}
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..core import storage
from ..core.example_rows import ExampleRows, NoProvenanceError, read_example_rows
from ..core.manifest import Manifest
from .outputs import LABEL_ISSUES, LABEL_ISSUES_SHEET
from .issue_images import panels
from .plot import contact_sheet_png
from .scorer import ScoringPlan
from .slicing import Scores

SHEET_ISSUES = 16  # the contact sheet's top issues


@dataclass(frozen=True)
class IssueList:
    """Likely label errors, most likely first; positions are the examples' places in split order."""

    positions: np.ndarray  # int64 [K]
    given: np.ndarray  # int64 [K] class ids
    suggested: np.ndarray  # int64 [K] class ids
    scores: np.ndarray  # float64 [K]: self-confidence (classes) or rejected-pixel share (masks)
    method: str

    def __len__(self) -> int:
        return len(self.positions)


def example_rows(examples: str, manifest: Manifest, split: str) -> tuple[ExampleRows | None, str | None]:
    """The split's row provenance, or None and the reason (examples older than provenance)."""
    try:
        return read_example_rows(examples, manifest, split), None
    except NoProvenanceError as err:
        return None, f"issues are listed by position only (index, row and path null): {err}"


def issue_lines(issues: IssueList, rows: ExampleRows | None, split: str, class_names: list[str]) -> list[dict]:
    """One JSON object per issue, ranked: where it is (split, index, row, path, position), what it says."""
    described = rows.describe(issues.positions) if rows is not None else [
        {"split": split, "index": None, "row": None, "path": None} for _ in range(len(issues))]
    lines = []
    for rank, (where, position, given, suggested, score) in enumerate(zip(
            described, issues.positions.tolist(), issues.given.tolist(), issues.suggested.tolist(),
            issues.scores.tolist()), 1):
        lines.append({"rank": rank, **where, "position": position,
                      "given": class_names[given], "given_id": given,
                      "suggested": class_names[suggested], "suggested_id": suggested, "score": round(score, 6)})
    return lines


def jsonl(lines: list[dict]) -> bytes:
    return "".join(json.dumps(line) + "\n" for line in lines).encode("utf-8")


def summary(issues: IssueList, examples: int, note: str | None, file: str, sheet: str, seconds: float
            ) -> dict[str, Any]:
    """What metrics.json says of the list."""
    return {"count": len(issues), "share": round(len(issues) / examples, 6) if examples else 0.0,
            "file": file, "sheet": sheet, "method": issues.method, "rows_named": note is None, "note": note,
            "seconds": round(seconds, 3)}


@dataclass(frozen=True)
class IssueOutputs:
    lines: bytes  # label_issues.jsonl
    sheet: bytes  # label_issues.png
    summary: dict[str, Any]  # metrics.json's "label_issues"


def label_issue_outputs(plan: ScoringPlan, task: Any, scores: Scores, echo: Callable[[str], None]) -> IssueOutputs:
    """The candidate's label issues on the scored split (`task`: the model's, tasks.task_for(info.task)): the
    ranked list, its contact sheet, its summary."""
    started = time.perf_counter()
    issues = task.find_label_issues(scores)
    rows, note = example_rows(plan.examples, plan.manifest, plan.split)
    if note:
        echo(f"evaluate: {note}")
    lines = issue_lines(issues, rows, plan.split, plan.info.label_classes)
    top = lines[:SHEET_ISSUES]
    shown = panels(plan.manifest, plan.files, plan.split, [line["position"] for line in top],
                   task.issue_overlay(plan.info))
    title = (f"{len(lines):,} likely label errors in split {plan.split!r}" +
             (f": the top {len(top)}, given → suggested" if top else ""))
    sheet = contact_sheet_png(shown, [_caption(line) for line in top], title)
    return IssueOutputs(jsonl(lines), sheet, summary(issues, plan.num_examples, note, LABEL_ISSUES, LABEL_ISSUES_SHEET,
                                                     time.perf_counter() - started))


def _caption(line: dict) -> str:
    where = (f"{storage.basename(line['index'])} row {line['row']}" if line["row"] is not None
             else f"example {line['position']}")
    return f"{line['given']} → {line['suggested']}\n{where} ({line['score']:.2f})"
