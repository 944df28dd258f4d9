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
from ..core.box_schema import BOXES_KEY
from ..core.cloud_env import enable_tensorflow_filesystems
from ..core.config_record import recorded_options
from ..core.output_dir import OutputDir
from ..core.tfrecord import frame
from ..tasks import EvaluationRun, Task, TaskEvaluation, task_for
from .blessing import Blessing, bless
from .config import EvaluatorConfig, check_metric_names
from .loaded_model import LoadedModel, check_data_label_map, check_same_labels, load_model
from .outputs import (BLESSED, BLESSING, CANARIES, CANARY_PREDICTIONS, DETECTIONS_PLOT, GATED_AGAINST, LABEL_ISSUES,
                      LABEL_ISSUES_SHEET, METRICS, NO_BASELINE, NOT_BLESSED, PLOT, PRECISION_RECALL_PLOT,
                      RELIABILITY_PLOT)
from .report import json_safe
from .scorer import plan_scoring, size_scoring_batch

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
        # What is kept of the outputs per example: the task's `canary_outputs` (probabilities, served detections).
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
    candidate = load_model(config.model, "model", task_for)
    check_metric_names(candidate.info.task, config.thresholds, config.max_regressions)
    if config.baseline is None:
        return {"candidate": candidate}
    baseline = load_model(config.baseline, "baseline", task_for)
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
    task = task_for(models["candidate"].info.task)
    plan = plan_scoring(config.examples, config.split, models["candidate"].info, config.slice_by, task)
    for role, model in models.items():  # a detector's eval data carries its label map (the baseline's too)
        check_data_label_map(model, role, plan.manifest.extra.get(BOXES_KEY, {}).get("label_map"), config.examples)
    sizing = size_scoring_batch(plan, models, budget_bytes(config.memory_mb), config.batch_size)
    echo(f"evaluate: {plan.num_examples:,} examples of split {config.split!r} through {len(models)} model(s), "
         f"{sizing.describe()}")
    canaries = _CanaryRecorder(models["candidate"].signature, task.canary_outputs)
    scored = {**models, "candidate": replace(models["candidate"], signature=canaries)}
    evaluation = task.evaluate(EvaluationRun(config, plan, scored, sizing.batch_size, echo))
    metrics = _metrics(config, models, evaluation, sizing, started)
    verdict = _verdict(config, task, metrics)
    _publish(out, metrics, verdict, canaries, evaluation.files)
    for note in evaluation.notes:
        echo(note)
    echo(f"evaluate: {evaluation.summary}; {config.gate} gate: {'BLESSED' if verdict.blessed else 'NOT BLESSED'}: "
         f"{'; '.join(verdict.reasons)}")
    return Evaluation(metrics, verdict)


def _metrics(config: EvaluatorConfig, models: dict[str, LoadedModel], evaluation: TaskEvaluation,
             sizing: BatchSizing, started: float) -> dict[str, Any]:
    """metrics.json: the header, the task's sections (a task's `class_names` replaces the header's in place),
    the gate's options, the batch and the timing."""
    return {**_header(config, models["candidate"]), **evaluation.sections,
            "gate": {"rule": config.gate, "regression_tolerance": config.regression_tolerance},
            "batching": sizing.to_json(),
            "timing": _timing(sizing, evaluation.seconds, evaluation.examples, len(models), started,
                              **evaluation.timing)}


def _verdict(config: EvaluatorConfig, task: Task, metrics: dict[str, Any]) -> Blessing:
    """The gate on the task's view of the overall metrics (a detector's undefined values are NaN there)."""
    baseline = metrics["baseline"]
    return bless(config.thresholds, config.regressions(), task.gate_values(metrics["overall"]),
                 task.gate_values(baseline["overall"]) if baseline else None, metrics["intervals"], config.gate)
