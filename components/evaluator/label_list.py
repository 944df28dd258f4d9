"""The scored split's likely label errors, ranked and named by CSV row: `label_issues.jsonl` and its summary.

- Classification: confident learning over the candidate's class probabilities
  (`core.label_issues.find_label_issues`, rule `noise_rate`), ranked by self-confidence (the model's
  probability of the given label), lowest first; the suggested label is the model's arg-max.
- Masks: each image's share of pixels whose given class the model confidently rejects
  (`MaskRejections`), highest first. An image is listed when its share is at least MASK_MIN_SHARE
  and MASK_MEDIAN_TIMES times the split's median share: a model disagrees with some boundary pixels
  of every mask, a mislabeled region stands out from them. Its `given` is the class with the most
  pixels predicted as another class, its `suggested` the class predicted most where another was given.

Each issue is named by the examples' row provenance (`core.example_rows`): index file, CSV row and
path. Examples written before provenance existed are listed by position only (index, row, path null).

>>> scores = Scores(num_classes=2)
>>> scores.add(np.array([0, 0, 3, 3, 1, 3]), np.zeros(6), {})       # labels 0, 0, 1, 1, 0, 1
>>> scores.add_probabilities(np.array([0, 0, 1, 1, 0, 1]),
...                          np.array([[.9, .1], [.8, .2], [.2, .8], [.1, .9], [.05, .95], [.3, .7]]))
>>> issues = find_issues("classification", scores)
>>> issues.positions.tolist(), issues.given.tolist(), issues.suggested.tolist()
([4], [0], [1])
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
from ..core.errors import ShardflowError
from ..core.example_rows import ExampleRows, NoProvenanceError, read_example_rows
from ..core.label_issues import find_label_issues
from ..core.manifest import Manifest
from .outputs import LABEL_ISSUES, LABEL_ISSUES_SHEET
from .issue_images import panels
from .plot import contact_sheet_png
from .scorer import ScoringPlan
from .slicing import Scores

RULE = "noise_rate"  # cleanlab's default, prune_by_noise_rate (core/label_issues.py)
MASK_MIN_SHARE = 0.1  # at least a tenth of the image's pixels confidently given another class,
MASK_MEDIAN_TIMES = 3.0  # and three times the split's median image
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


def find_issues(task: str, scores: Scores) -> IssueList:
    """The candidate's issues from what scoring kept (`Scores.add_probabilities`)."""
    if task == "segmentation":
        return _mask_issues(scores)
    probabilities = scores.example_probabilities()
    if probabilities is None:
        raise ShardflowError("no class probabilities were kept while scoring: cannot list label issues")
    labels = scores.example_cells().astype(np.int64) // scores.num_classes
    # A label unseen in training (the OOV id, past the served classes) has no probability to weigh: those
    # examples are counted in the report's OOV row, not judged here.
    seen = np.flatnonzero(labels < probabilities.shape[1])
    found = find_label_issues(labels[seen], probabilities[seen], rule=RULE)
    rows = seen[found.rows]
    return IssueList(rows, labels[rows], found.suggested, found.self_confidence,
                     f"confident learning ({RULE}), ranked by self-confidence, lowest first")


def _mask_issues(scores: Scores) -> IssueList:
    shares = scores.rejections.scores() if scores.rejections is not None else np.zeros(0)
    cutoff = max(MASK_MIN_SHARE, MASK_MEDIAN_TIMES * float(np.median(shares))) if len(shares) else 1.0
    listed = np.flatnonzero(shares >= cutoff)
    listed = listed[np.argsort(-shares[listed], kind="stable")]
    counts = scores.example_cells()[listed]  # int32 [K, 3, C]: true positives, false positives, false negatives
    given = counts[:, 2].argmax(axis=1) if len(listed) else np.zeros(0, np.int64)
    suggested = counts[:, 1].argmax(axis=1) if len(listed) else np.zeros(0, np.int64)
    method = (f"share of pixels whose given class is confidently rejected, listed from "
              f"{cutoff:.3f} (at least {MASK_MIN_SHARE} and {MASK_MEDIAN_TIMES:g}x the median image), highest first")
    return IssueList(listed.astype(np.int64), given.astype(np.int64), suggested.astype(np.int64),
                     shares[listed].astype(np.float64), method)


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


def label_issue_outputs(plan: ScoringPlan, scores: Scores, echo: Callable[[str], None]) -> IssueOutputs:
    """The candidate's label issues on the scored split: the ranked list, its contact sheet, its summary."""
    started = time.perf_counter()
    issues = find_issues(plan.info.task, scores)
    rows, note = example_rows(plan.examples, plan.manifest, plan.split)
    if note:
        echo(f"evaluate: {note}")
    lines = issue_lines(issues, rows, plan.split, plan.info.label_classes)
    top = lines[:SHEET_ISSUES]
    mask = plan.info.label if plan.info.task == "segmentation" else None
    shown = panels(plan.manifest, plan.files, plan.split, [line["position"] for line in top], mask)
    title = (f"{len(lines):,} likely label errors in split {plan.split!r}" +
             (f": the top {len(top)}, given → suggested" if top else ""))
    sheet = contact_sheet_png(shown, [_caption(line) for line in top], title)
    return IssueOutputs(jsonl(lines), sheet, summary(issues, plan.num_examples, note, LABEL_ISSUES, LABEL_ISSUES_SHEET,
                                                     time.perf_counter() - started))


def _caption(line: dict) -> str:
    where = (f"{storage.basename(line['index'])} row {line['row']}" if line["row"] is not None
             else f"example {line['position']}")
    return f"{line['given']} → {line['suggested']}\n{where} ({line['score']:.2f})"
