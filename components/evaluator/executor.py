"""Evaluator's `run(config)`: score a split with the model (and a baseline), write metrics, bless or not.

>>> from shardflow.evaluator import EvaluatorConfig, run                                    # doctest: +SKIP
>>> outcome = run(EvaluatorConfig(model="runs/train/model", examples="runs/examples", output="runs/eval",
...                               baseline="runs/blessed/model", thresholds=("accuracy>=0.9",),
...                               max_regressions=("accuracy=0.01",), slice_by=("site",)))  # doctest: +SKIP
>>> outcome.blessing.blessed, outcome.metrics["overall"]["accuracy"]                        # doctest: +SKIP
(True, 0.953)

Outputs in `config.output` (a local path or an s3:// / gs:// URI): metrics.json (with 95% bootstrap
intervals, intervals.py), confusion_matrix.png, reliability_diagram.png (classifiers), blessing.json,
the canaries (the first examples scored, serialized, in canaries.tfrecord, and the model's
probabilities for them in canary_predictions.npy: what infra validation replays against the served
model), the split's likely label errors (label_issues.jsonl, ranked, by CSV row; label_issues.png, the
top 16: label_list.py) and, last, BLESSED or NOT_BLESSED (one reason per line) — the completion marker
of the one output life cycle (`OutputDir`). A run first removes the markers, then
the previous run's outputs, and publishes its own before the marker: an interrupted or failed run
leaves no marker, so nobody mistakes an old or partial result for this run's verdict.
"""
from __future__ import annotations

import io
import json
import os
import time
from dataclasses import dataclass, replace
from typing import Any, Callable

import numpy as np

from .. import __version__
from ..core import storage
from ..core.batch_memory import BatchSizing, budget_bytes
from ..core.cloud_env import enable_tensorflow_filesystems
from ..core.config_record import recorded_options
from ..core.output_dir import OutputDir
from ..core.tfrecord import frame
from .blessing import Blessing, bless
from ..core.box_schema import BOXES_KEY, DETECTION_TASK
from .config import (BLESSED, BLESSING, CANARIES, CANARY_PREDICTIONS, DETECTIONS_PLOT, GATED_AGAINST, LABEL_ISSUES,
                     LABEL_ISSUES_SHEET, METRICS, NO_BASELINE, NOT_BLESSED, PLOT, PRECISION_RECALL_PLOT,
                     RELIABILITY_PLOT, EvaluatorConfig, check_metric_names)
from .detection_evaluation import detection_outcome
from .detection_report import gate_values
from .detection_scorer import score_detections
from .intervals import bootstrap_intervals, slice_intervals
from .label_list import SHEET_ISSUES, IssueOutputs, label_issue_outputs
from .loaded_model import LoadedModel, check_data_label_map, check_same_labels, load_model
from .plot import confusion_matrix_png, reliability_png
from .report import deltas, json_safe, model_report
from .scorer import ScoreResult, ScoringPlan, plan_scoring, score, size_scoring_batch
from .slicing import Scores

PUBLISHED = (METRICS, PLOT, RELIABILITY_PLOT, BLESSING, CANARIES, CANARY_PREDICTIONS, LABEL_ISSUES, LABEL_ISSUES_SHEET,
             DETECTIONS_PLOT, PRECISION_RECALL_PLOT)
# The canaries: the first examples scored, bounded in bytes whatever the split's size. The Evaluator runs on
# a rerun whose served model changed, so they may be new bytes each time: 256 224-px JPEGs would be ~5 MB, 3 %
# of a 2k-photo run.
CANARY_EXAMPLES = 256  # at most this many,
CANARY_BYTES = 1 << 20  # at most 1 MB of serialized examples (at least one example),
CANARY_PREDICTION_BYTES = 1 << 24  # and at most 16 MB of probabilities (a segmentation example has H x W x C)


def output_dir(root: str) -> OutputDir:
    """The Evaluator's output: the verdict file is the completion marker, the reports are published before it."""
    return OutputDir(root, marker=BLESSED, other_markers=(NOT_BLESSED,), owned=PUBLISHED)


@dataclass(frozen=True)
class Evaluation:
    metrics: dict[str, Any]  # as in metrics.json (NaN where the JSON has null)
    blessing: Blessing


def _invalidate(out: OutputDir) -> None:
    """After the markers (prepare): the previous run's reports too, so a failed run leaves none of them."""
    for name in PUBLISHED:
        storage.remove(storage.join(out.root, name))


def _example_arrays(scores: Scores) -> dict[str, Any]:
    return {"cells": scores.example_cells(), "losses": scores.example_losses(),
            "confidences": scores.example_confidences()}


def _intervals(config: EvaluatorConfig, candidate: LoadedModel, result: ScoreResult) -> dict[str, Any] | None:
    """The 95% bootstrap intervals of every overall metric, and of the paired differences; None with 0 resamples."""
    if config.bootstrap_resamples == 0:
        return None
    started = time.perf_counter()
    baseline = result.scores.get("baseline")
    task, classes, scores = candidate.info.task, len(candidate.info.label_classes), result.scores["candidate"]
    arrays = (_example_arrays(scores), _example_arrays(baseline) if baseline is not None else None)
    draws = (config.bootstrap_resamples, config.bootstrap_seed)
    intervals = bootstrap_intervals(task, classes, *arrays, *draws)
    intervals["slices"] = {column: slice_intervals(task, classes, scores.example_slices(column)[1],
                                                   scores.example_slices(column)[0], *arrays, *draws)
                           for column in config.slice_by}
    return {**intervals, "seconds": round(time.perf_counter() - started, 3)}


def _header(config: EvaluatorConfig, candidate: LoadedModel) -> dict[str, Any]:
    """metrics.json's first keys, the same for every task."""
    info = candidate.info
    return {
        "component": "evaluator", "shardflow_version": __version__, "task": info.task,
        "options": recorded_options(config),
        "model": config.model, "baseline_model": config.baseline, GATED_AGAINST: gated_against(config.baseline),
        "examples": config.examples,
        "split": config.split, "label": info.label, "class_names": info.label_classes,  # the confusion's ids
    }


def _timing(sizing: BatchSizing, seconds: float, examples: int, models: int, started: float,
            **parts: float | None) -> dict[str, Any]:
    return {"batch_size": sizing.batch_size, "scoring_seconds": round(seconds, 3),
            "examples_per_second": round(examples / seconds, 1) if seconds else None,
            "models": models, **parts, "total_seconds": round(time.time() - started, 3)}


def _metrics(config: EvaluatorConfig, candidate: LoadedModel, result: ScoreResult, sizing: BatchSizing,
             issues: IssueOutputs, started: float) -> dict[str, Any]:
    info = candidate.info
    report = model_report(info.task, result.scores["candidate"], info.label_classes, info.label_vocabulary)
    baseline = (model_report(info.task, result.scores["baseline"], info.label_classes, info.label_vocabulary)
                if "baseline" in result.scores else None)
    intervals = _intervals(config, candidate, result)
    return {
        **_header(config, candidate),
        **report,
        "baseline": baseline,
        "deltas": deltas(report, baseline) if baseline else None,
        "intervals": intervals,
        "label_issues": issues.summary,
        "gate": {"rule": config.gate, "regression_tolerance": config.regression_tolerance},
        "batching": sizing.to_json(),
        "timing": _timing(sizing, result.seconds, result.examples, len(result.scores), started,
                          intervals_seconds=intervals["seconds"] if intervals else None,
                          label_issues_seconds=issues.summary["seconds"]),
    }


def gated_against(baseline: str | None) -> str:
    """What the verdict was gated against, as recorded for Push: the baseline's location (a local path made
    absolute, so that it means the same from any working directory), or NO_BASELINE."""
    if baseline is None:
        return NO_BASELINE
    return baseline if storage.is_remote(baseline) else os.path.abspath(baseline)


class _CanaryRecorder:
    """The candidate's signature, keeping the first examples it scores and its probabilities for them."""

    def __init__(self, signature: Any, predictions: Callable[[dict[str, Any]], Any] | None = None) -> None:
        self.signature, self.limit, self.size = signature, CANARY_EXAMPLES, 0
        # What is kept of the outputs per example: the probabilities, or a detector's `served_detections`.
        self.predictions = predictions or (lambda out: out["probabilities"])
        self.records: list[bytes] = []
        self.probabilities: list[np.ndarray] = []

    def __call__(self, examples: Any) -> dict[str, Any]:
        out = self.signature(examples=examples)
        probabilities = self.predictions(out)
        if not self.records:  # the first batch tells the size of one example's probabilities
            per_example = probabilities.dtype.size * max(1, int(np.prod(probabilities.shape[1:])))
            self.limit = max(1, min(CANARY_EXAMPLES, CANARY_PREDICTION_BYTES // per_example))
        taken = 0
        for record in examples[:max(0, self.limit - len(self.records))].numpy().tolist():
            if self.records and self.size + len(record) > CANARY_BYTES:
                self.limit = len(self.records)  # full: later batches add nothing
                break
            self.records.append(record)
            self.size += len(record)
            taken += 1
        if taken:
            self.probabilities.append(probabilities[:taken].numpy())
        return out

    def write(self, out: OutputDir) -> None:
        storage.write_bytes(out.staged(CANARIES), b"".join(frame(record) for record in self.records))
        buffer = io.BytesIO()
        np.save(buffer, np.concatenate(self.probabilities))
        storage.write_bytes(out.staged(CANARY_PREDICTIONS), buffer.getvalue())


def served_detections(out: dict[str, Any]) -> Any:
    """A detector's canary predictions: [N, M, 6] (config.CANARY_DETECTION_COLUMNS) of its served outputs."""
    import tensorflow as tf

    columns = [out["detection_scores"][..., None], out["detection_classes"][..., None]]
    return tf.concat([tf.cast(out["detection_boxes"], tf.float32)] + [tf.cast(c, tf.float32) for c in columns], -1)


def _task_plots(metrics: dict[str, Any], issues: IssueOutputs) -> dict[str, bytes]:
    """A classifier's or segmenter's plots and label issues, by output name."""
    overall = metrics["overall"]
    score_text = (f"accuracy {overall['accuracy']:.3f}" if metrics["task"] == "classification"
                  else f"pixel accuracy {overall['pixel_accuracy']:.3f}, mean IoU {overall['mean_iou']:.3f}")
    title = (f"{storage.basename(metrics['model'])} on {metrics['split']} ({metrics['num_examples']:,} examples): "
             f"{score_text}")
    shown = [i for i, name in enumerate(metrics["class_names"]) if name not in metrics["hidden_classes"]]
    confusion = np.asarray(metrics["confusion_matrix"])[np.ix_(shown, shown)]  # hidden rows/columns are all 0
    files = {PLOT: confusion_matrix_png(confusion, [metrics["class_names"][i] for i in shown], title),
             LABEL_ISSUES: issues.lines, LABEL_ISSUES_SHEET: issues.sheet}
    if metrics.get("calibration"):
        ece = metrics["calibration"]["ece"]
        files[RELIABILITY_PLOT] = reliability_png(
            metrics["calibration"]["bins"], f"{storage.basename(metrics['model'])} on {metrics['split']}: "
                                            f"ECE {ece:.3f} ({len(metrics['calibration']['bins'])} bins)")
    return files


def _publish(out: OutputDir, metrics: dict[str, Any], verdict: Blessing, canaries: _CanaryRecorder,
             files: dict[str, bytes]) -> None:
    """metrics.json, the task's `files`, blessing.json and the canaries; then the verdict marker, last."""
    # Not sorted: classes stay in class-id order and slices in value order.
    storage.write_text(out.staged(METRICS), json.dumps(json_safe(metrics), indent=2) + "\n")
    for name, data in files.items():
        storage.write_bytes(out.staged(name), data)
    storage.write_json(out.staged(BLESSING), {**verdict.to_json(), GATED_AGAINST: metrics[GATED_AGAINST]})
    canaries.write(out)
    out.publish(PUBLISHED)
    out.mark_complete(verdict.marker_text(), BLESSED if verdict.blessed else NOT_BLESSED)


def _load(config: EvaluatorConfig) -> dict[str, LoadedModel]:
    candidate = load_model(config.model, "model")
    check_metric_names(candidate.info.task, config.thresholds, config.max_regressions)
    if config.baseline is None:
        return {"candidate": candidate}
    baseline = load_model(config.baseline, "baseline")
    check_same_labels(candidate, baseline)
    return {"candidate": candidate, "baseline": baseline}


def run(config: EvaluatorConfig, echo: Callable[[str], None] = print) -> Evaluation:
    """Scores `config.split` of `config.examples`; writes the outputs; returns metrics and verdict.

    Raises `EvaluationError` (unreadable model, label missing or out of range, unreadable shards)
    or `ConfigError` (split or slice column not in the examples, a metric the task does not have).
    """
    started = time.time()
    config.check_inputs()
    enable_tensorflow_filesystems(loc for loc in (config.model, config.examples, config.baseline, config.output) if loc)
    out = output_dir(config.output)
    with out.staged_run():
        _invalidate(out)
        return _evaluate(config, out, started, echo)


def _evaluate(config: EvaluatorConfig, out: OutputDir, started: float, echo: Callable[[str], None]) -> Evaluation:
    models = _load(config)
    plan = plan_scoring(config.examples, config.split, models["candidate"].info, config.slice_by)
    for role, model in models.items():  # a detector's eval data carries its label map (the baseline's too)
        check_data_label_map(model, role, plan.manifest.extra.get(BOXES_KEY, {}).get("label_map"), config.examples)
    sizing = size_scoring_batch(plan, models, budget_bytes(config.memory_mb), config.batch_size)
    echo(f"evaluate: {plan.num_examples:,} examples of split {config.split!r} through {len(models)} model(s), "
         f"{sizing.describe()}")
    if models["candidate"].info.task == DETECTION_TASK:
        return _evaluate_detection(config, out, plan, models, sizing, started, echo)
    canaries = _CanaryRecorder(models["candidate"].signature)
    result = score(plan, {**models, "candidate": replace(models["candidate"], signature=canaries)},
                   sizing.batch_size, echo)
    issues = label_issue_outputs(plan, result.scores["candidate"], echo)
    metrics = _metrics(config, models["candidate"], result, sizing, issues, started)
    verdict = bless(config.thresholds, config.regressions(), metrics["overall"],
                    metrics["baseline"]["overall"] if metrics["baseline"] else None, metrics["intervals"], config.gate)
    _publish(out, metrics, verdict, canaries, _task_plots(metrics, issues))
    echo(f"evaluate: {issues.summary['count']:,} likely label errors in split {config.split!r}, ranked by row in "
         f"{storage.join(out.root, LABEL_ISSUES)} (the top {SHEET_ISSUES}: {LABEL_ISSUES_SHEET})")
    echo(f"evaluate: {result.examples:,} examples in {result.seconds:.1f} s "
         f"({metrics['timing']['examples_per_second']:,.0f}/s); {config.gate} gate: "
         f"{'BLESSED' if verdict.blessed else 'NOT BLESSED'}: {'; '.join(verdict.reasons)}")
    return Evaluation(metrics, verdict)


def _evaluate_detection(config: EvaluatorConfig, out: OutputDir, plan: ScoringPlan, models: dict[str, LoadedModel],
                        sizing: BatchSizing, started: float, echo: Callable[[str], None]) -> Evaluation:
    """A detector: COCO metrics from the accumulators, the gate on them (undefined values fail thresholds)."""
    canaries = _CanaryRecorder(models["candidate"].signature, served_detections)
    result = score_detections(plan, {**models, "candidate": replace(models["candidate"], signature=canaries)},
                              sizing.batch_size, echo)
    sections, plots = detection_outcome(config, plan, result)
    intervals = sections["intervals"]
    metrics = {**_header(config, models["candidate"]), "class_names": list(plan.info.class_names), **sections,
               "gate": {"rule": config.gate, "regression_tolerance": config.regression_tolerance},
               "batching": sizing.to_json(),
               "timing": _timing(sizing, result.seconds, result.examples, len(models), started,
                                 intervals_seconds=intervals["seconds"] if intervals else None)}
    baseline = metrics["baseline"]
    verdict = bless(config.thresholds, config.regressions(), gate_values(metrics["overall"]),
                    gate_values(baseline["overall"]) if baseline else None, intervals, config.gate)
    _publish(out, metrics, verdict, canaries, plots)
    overall = metrics["overall"]
    shown = ", ".join(f"{name} {overall[name]:.3f}" for name in ("ap", "ap50", "ar100") if overall[name] is not None)
    echo(f"evaluate: {result.examples:,} images, {result.boxes:,} boxes in {result.seconds:.1f} s: "
         f"{shown or 'no true boxes'}; {config.gate} gate: {'BLESSED' if verdict.blessed else 'NOT BLESSED'}: "
         f"{'; '.join(verdict.reasons)}")
    return Evaluation(metrics, verdict)
