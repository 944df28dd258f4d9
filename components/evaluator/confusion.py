"""The Evaluator's scoring of a confusion-matrix task (class labels, masks): what both kinds' `evaluate` runs.

    fields = evaluate_confusion(run, task)   # task: group_report(tally, class_names), score_text(overall)
    fields["sections"]["overall"], fields["files"][PLOT]   # a tasks.base.TaskEvaluation's fields

Every example goes once through every model (`scorer.score`, per-example confusion cells); the candidate's
probabilities give the likely label errors (label_list.py); each model's report is `report.model_report` with
the task's own report of one group; the intervals are the bootstrap over examples (intervals.py). The files:
the confusion matrix (its title the task's `score_text`), the reliability diagram where the report has a
calibration, and the label issues. The task supplies only what differs; this module names no kind, and
imports no task module: the tasks import it (`run` is a tasks.base.EvaluationRun), never the reverse.
"""
from __future__ import annotations

import time
from typing import Any, Protocol

import numpy as np

from ..core import storage
from .intervals import bootstrap_intervals, slice_intervals
from .label_list import SHEET_ISSUES, IssueOutputs, label_issue_outputs
from .outputs import LABEL_ISSUES, LABEL_ISSUES_SHEET, PLOT, RELIABILITY_PLOT
from .plot import confusion_matrix_png, reliability_png
from .report import deltas, model_report
from .scorer import ConfusionCounts, ScoreResult, score
from .slicing import Scores, Tally


class ConfusionTask(ConfusionCounts, Protocol):
    """What a confusion-matrix task adds: its labels' class ids and batch counts (scorer.ConfusionCounts), its
    report of one group of examples, its plot title's scores, its part of the bootstrap (intervals.py) and of the
    label issue list (label_list.py)."""

    def group_report(self, tally: Tally, class_names: list[str]) -> dict[str, Any]: ...

    def score_text(self, overall: dict[str, Any]) -> str: ...

    def find_label_issues(self, scores: Scores) -> Any: ...

    def issue_overlay(self, info: Any) -> str | None: ...

    def bootstrap_arrays(self, data: dict[str, np.ndarray], num_classes: int) -> dict[str, np.ndarray]: ...

    def bootstrap_metrics(self, indices: np.ndarray, weights: np.ndarray, data: dict[str, np.ndarray],
                          num_classes: int) -> dict[str, np.ndarray]: ...


def _example_arrays(scores: Scores) -> dict[str, Any]:
    return {"cells": scores.example_cells(), "losses": scores.example_losses(),
            "confidences": scores.example_confidences()}


def _intervals(run: Any, task: ConfusionTask, result: ScoreResult) -> dict[str, Any] | None:
    """The 95% bootstrap intervals of every overall metric, and of the paired differences; None with 0 resamples."""
    config = run.config
    if config.bootstrap_resamples == 0:
        return None
    started = time.perf_counter()
    baseline = result.scores.get("baseline")
    classes, scores = len(run.plan.info.label_classes), result.scores["candidate"]
    arrays = (_example_arrays(scores), _example_arrays(baseline) if baseline is not None else None)
    draws = (config.bootstrap_resamples, config.bootstrap_seed)
    intervals = bootstrap_intervals(task, classes, *arrays, *draws)
    intervals["slices"] = {column: slice_intervals(task, classes, scores.example_slices(column)[1],
                                                   scores.example_slices(column)[0], *arrays, *draws)
                           for column in config.slice_by}
    return {**intervals, "seconds": round(time.perf_counter() - started, 3)}


def _sections(run: Any, task: ConfusionTask, result: ScoreResult, issues: IssueOutputs
              ) -> dict[str, Any]:
    info = run.plan.info
    report = model_report(task.group_report, result.scores["candidate"], info.label_classes, info.label_vocabulary)
    baseline = (model_report(task.group_report, result.scores["baseline"], info.label_classes,
                             info.label_vocabulary) if "baseline" in result.scores else None)
    return {**report, "baseline": baseline, "deltas": deltas(report, baseline) if baseline else None,
            "intervals": _intervals(run, task, result), "label_issues": issues.summary}


def _files(run: Any, task: ConfusionTask, sections: dict[str, Any], issues: IssueOutputs
           ) -> dict[str, bytes]:
    """The confusion matrix, the label issues and (with a calibration) the reliability diagram, by output name."""
    model, split = storage.basename(run.config.model), run.config.split
    class_names = list(run.plan.info.label_classes)
    title = f"{model} on {split} ({sections['num_examples']:,} examples): {task.score_text(sections['overall'])}"
    shown = [i for i, name in enumerate(class_names) if name not in sections["hidden_classes"]]
    confusion = np.asarray(sections["confusion_matrix"])[np.ix_(shown, shown)]  # hidden rows/columns are all 0
    files = {PLOT: confusion_matrix_png(confusion, [class_names[i] for i in shown], title),
             LABEL_ISSUES: issues.lines, LABEL_ISSUES_SHEET: issues.sheet}
    if sections.get("calibration"):
        bins = sections["calibration"]["bins"]
        files[RELIABILITY_PLOT] = reliability_png(
            bins, f"{model} on {split}: ECE {sections['calibration']['ece']:.3f} ({len(bins)} bins)")
    return files


def evaluate_confusion(run: Any, task: ConfusionTask) -> dict[str, Any]:
    """Scores the split through the models; the task's sections, files and printed lines, as the fields of a
    `tasks.base.TaskEvaluation`."""
    result = score(run.plan, run.models, run.batch_size, task, run.echo)
    issues = label_issue_outputs(run.plan, task, result.scores["candidate"], run.echo)
    sections = _sections(run, task, result, issues)
    intervals = sections["intervals"]
    per_second = round(result.examples / result.seconds, 1) if result.seconds else None
    where = storage.join(run.config.output, LABEL_ISSUES)
    note = (f"evaluate: {issues.summary['count']:,} likely label errors in split {run.config.split!r}, ranked by row "
            f"in {where} (the top {SHEET_ISSUES}: {LABEL_ISSUES_SHEET})")
    return {"sections": sections, "files": _files(run, task, sections, issues), "examples": result.examples,
            "seconds": result.seconds,
            "timing": {"intervals_seconds": intervals["seconds"] if intervals else None,
                       "label_issues_seconds": issues.summary["seconds"]},
            "summary": f"{result.examples:,} examples in {result.seconds:.1f} s ({per_second:,.0f}/s)",
            "notes": (note,)}
