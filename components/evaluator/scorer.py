"""Streaming one split through the candidate (and baseline) model, batch by batch, into tallies.

    plan = plan_scoring("runs/examples", "eval", model.info, ("site",), task_for(model.info.task))
    sizing = size_scoring_batch(plan, {"candidate": model, "baseline": baseline}, budget_bytes=1 << 30)
    result = score(plan, {"candidate": model, "baseline": baseline}, sizing.batch_size, task_for(model.info.task))
    result.scores["candidate"].overall.confusion          # [C, C] counts

The split is read in manifest order by the one input stream (`core.input_stream.build_stream`:
no shuffle, no augmentation), keeping each example's serialized bytes. It parses only the feature the task
scores by (`Task.scoring_feature`: the label, decoded; a detector's image, as stored) and the slice columns, and its transform stage turns labels into class ids (the task's `label_ids`: strings through the
model's vocabulary, unknown strings to the OOV id; masks [H, W, 1] to ids [H, W]); the serialized
batch itself goes to each model's `serving_default`, which parses and preprocesses the examples
its own way. Labels are counted in the model's `label_classes`: for a string label the served
classes plus the OOV id, a row of labels unseen in training, which the served model (it answers the
trained classes only) gives probability 0 and never predicts. Both models score the same batch;
per-example confusion cells and log losses are added to running tallies, and only each example's
few counts are kept (`slicing.Scores`), so memory grows by bytes per example, never by pixels: the
candidate's class probabilities for label issues (4 × C bytes a classified example; a mask's C × 64
histogram counts) included. The batch is sized in bytes (`core.batch_memory`): each model is measured
on the split's first examples, and a batch holds as many examples as the activations budget allows.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Protocol

import numpy as np
import tensorflow as tf

from ..core.batch_memory import PROBE_EXAMPLES, BatchSizing, size_batch
from ..core.box_schema import BOX_ROLE
from ..core.cloud_env import enable_tensorflow_filesystems
from ..core.errors import ConfigError
from ..core.manifest import FeatureSpec, Manifest, read_manifest
from ..core.model_info import ModelInfo
from ..core.input_stream import SERIALIZED, StreamOptions, build_stream
from ..core.reader import shard_files
from .outputs import EvaluationError
from .loaded_model import LoadedModel
from .slicing import Scores, group_slices

PROGRESS_SECONDS = 30.0


class ConfusionCounts(Protocol):
    """What a confusion-matrix task (labels, masks) gives the scoring loop: its labels as class ids, and one
    batch's counts: "cells" (what `slicing.Scores.add` tallies), "probabilities", and optionally "losses" and
    "confidences" (per example)."""

    def label_ids(self, plan: ScoringPlan) -> Callable[[tf.Tensor], tf.Tensor]: ...

    def batch_counts(self, info: ModelInfo, labels: np.ndarray, predicted: np.ndarray,
                     probabilities: np.ndarray) -> dict[str, np.ndarray]: ...


@dataclass(frozen=True)
class ScoringPlan:
    examples: str
    split: str
    files: list[str]
    manifest: Manifest
    info: ModelInfo
    slice_by: tuple[str, ...]
    read: str  # the feature the stream parses beside the slice columns (`Task.scoring_feature`)
    decodes: bool  # whether a model step gets it decoded (a label, a mask) or as stored (an image's bytes)

    @property
    def num_examples(self) -> int:
        return self.manifest.splits[self.split].num_examples


@dataclass(frozen=True)
class ScoreResult:
    scores: dict[str, Scores]  # "candidate", "baseline"
    examples: int
    seconds: float  # first batch requested → last batch counted (pipeline start and first calls included)


def label_feature(manifest: Manifest, info: ModelInfo, examples: str) -> FeatureSpec:
    """The model's label column in the examples (a task's `check_examples` judges its form)."""
    feature = manifest.features.get(info.label)
    if feature is None:
        raise EvaluationError(f"the model's label {info.label!r} is not a feature of {examples} "
                              f"(has {sorted(manifest.features)})")
    return feature


def plan_scoring(examples: str, split: str, info: ModelInfo, slice_by: tuple[str, ...], task: Any) -> ScoringPlan:
    """Checks that the examples have the split, the model's label (`task`: the model's, tasks.task_for(info.task):
    its `check_examples`) and the slice columns; the feature scored by is the task's `scoring_feature`."""
    manifest = read_manifest(examples)
    if split not in manifest.splits:
        raise ConfigError(f"split {split!r} is not in the examples {examples} (has {sorted(manifest.splits)})")
    if manifest.splits[split].num_examples == 0:
        raise EvaluationError(f"split {split!r} of {examples} has no examples")
    task.check_examples(manifest, info, examples)
    for column in slice_by:
        feature = manifest.features.get(column)
        if feature is None or feature.is_file or feature.role == BOX_ROLE:  # a box list is no slice value
            values = sorted(n for n, f in manifest.features.items() if not f.is_file and f.role != BOX_ROLE)
            raise ConfigError(f"slice_by {column!r} is not a value column of the examples (value columns: {values})")
    try:
        files = shard_files(examples, manifest, split)
    except (FileNotFoundError, ValueError) as err:
        raise EvaluationError(f"split {split!r} of {examples}: {err}") from err
    enable_tensorflow_filesystems(files)  # s3:// shards: before TensorFlow opens them
    read, decodes = task.scoring_feature(manifest, info, examples)
    return ScoringPlan(examples, split, files, manifest, info, tuple(slice_by), read, decodes)


def split_stream(plan: ScoringPlan, batch_size: int,
            model_step: Callable[[dict], dict] | None = None) -> tf.data.Dataset:
    """The split in manifest order, each example's serialized bytes kept: the input stream with no shuffle."""
    options = StreamOptions(batch_size=batch_size, features=(plan.read, *plan.slice_by), keep_serialized=True,
                            decode=model_step is not None and plan.decodes)
    return build_stream(plan.examples, plan.split, options, model_step=model_step)


def size_scoring_batch(plan: ScoringPlan, models: dict[str, LoadedModel], budget_bytes: int,
                       requested: int | None = None) -> BatchSizing:
    """The scoring batch: every model measured on the split's first examples, fitted to the budget
    (or `requested` checked against it: a ConfigError before any example is scored)."""
    try:
        first = next(iter(split_stream(plan, PROBE_EXAMPLES)), None)
        records = [] if first is None else list(first[SERIALIZED].numpy())
    except tf.errors.OpError as err:
        raise EvaluationError(f"split {plan.split!r} of {plan.examples}: cannot read the examples: {err.message}") from err
    try:
        return size_batch([model.call for model in models.values()], records, budget_bytes, requested)
    except tf.errors.OpError as err:
        raise EvaluationError(f"the model could not score the first examples of split {plan.split!r} "
                              f"({type(err).__name__}): {err.message}") from err


def label_dataset(plan: ScoringPlan, batch_size: int, task: ConfusionCounts) -> tf.data.Dataset:
    """Batches of {"records", "labels", "slice/<column>"} in manifest order, the labels as the task's class ids."""
    to_ids = task.label_ids(plan)

    def labelled(parsed: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        element = {"records": parsed[SERIALIZED], "labels": to_ids(parsed[plan.info.label])}
        return {**element, **{f"slice/{c}": parsed[c] for c in plan.slice_by}}

    return split_stream(plan, batch_size, labelled)


def score_batch(model: LoadedModel, records: tf.Tensor, labels: np.ndarray, task: ConfusionCounts
                ) -> dict[str, np.ndarray]:
    """One signature call on the serialized batch → the task's per-example counts (`ConfusionCounts.batch_counts`).

    The signature is called as it is (a graph already: nothing to trace); the counting is a few
    numpy operations on [N] or [N, H, W] integers, cheap next to the model.
    """
    info = model.info
    result = model.signature(examples=records)
    predicted = result["class_ids"].numpy().astype(np.int64, copy=False)
    if predicted.shape != labels.shape:
        raise EvaluationError(f"model {model.path}: class_ids of shape {predicted.shape} for labels of shape "
                              f"{labels.shape}")
    probabilities = result["probabilities"].numpy()
    if probabilities.shape != labels.shape + (info.num_classes,):
        raise EvaluationError(f"model {model.path}: probabilities of shape {probabilities.shape} for "
                              f"labels of shape {labels.shape} and {info.num_classes} classes")
    return task.batch_counts(info, labels, predicted, probabilities)


def _check_label_range(labels: np.ndarray, plan: ScoringPlan, first: int) -> None:
    classes = len(plan.info.label_classes)
    if labels.size == 0 or (labels.min() >= 0 and labels.max() < classes):
        return
    flat = labels.reshape(len(labels), -1)
    i = int(np.flatnonzero(((flat < 0) | (flat >= classes)).any(axis=1))[0])
    value = flat[i][(flat[i] < 0) | (flat[i] >= classes)][0]
    raise EvaluationError(f"example {first + i} of split {plan.split!r} in {plan.examples}: label "
                          f"{plan.info.label!r} has class id {value}, outside the model's {classes} classes")


def batches(dataset: tf.data.Dataset, plan: ScoringPlan, count_key: str = "labels") -> Iterator[dict[str, tf.Tensor]]:
    """The dataset's elements; a record that cannot be read or parsed becomes an EvaluationError."""
    iterator, seen = iter(dataset), 0
    while True:
        try:
            element = next(iterator)
        except StopIteration:
            return
        except tf.errors.OpError as err:
            raise EvaluationError(f"split {plan.split!r} of {plan.examples}: cannot read or parse the examples "
                                  f"after example {seen}: {err.message}") from err
        seen += int(element[count_key].shape[0])
        yield element


def score(plan: ScoringPlan, models: dict[str, LoadedModel], batch_size: int, task: ConfusionCounts,
          echo: Callable[[str], None] = print) -> ScoreResult:
    """Every example of the split through every model once; returns the tallies."""
    scores = {role: Scores(len(plan.info.label_classes), plan.slice_by) for role in models}
    seen, started = 0, time.perf_counter()
    next_report = started + PROGRESS_SECONDS
    for element in batches(label_dataset(plan, batch_size, task), plan):
        labels = element["labels"].numpy()
        _check_label_range(labels, plan, seen)
        groups = group_slices({c: element[f"slice/{c}"].numpy() for c in plan.slice_by})
        for role, model in models.items():
            try:
                out = score_batch(model, element["records"], labels, task)
            except tf.errors.OpError as err:
                raise EvaluationError(f"{role} {model.path} could not score examples {seen}.. of split "
                                      f"{plan.split!r} ({type(err).__name__}): {err.message}") from err
            scores[role].add(out["cells"], out.get("losses"), groups, out.get("confidences"))
            if role == "candidate":  # label issues: the candidate's probabilities (slicing.Scores)
                scores[role].add_probabilities(labels, out["probabilities"])
        seen += len(labels)
        if time.perf_counter() >= next_report:
            echo(f"evaluate: {seen:,} of {plan.num_examples:,} examples scored")
            next_report += PROGRESS_SECONDS
    if seen != plan.num_examples:
        raise EvaluationError(f"split {plan.split!r} of {plan.examples}: read {seen} examples, "
                              f"the manifest lists {plan.num_examples}")
    return ScoreResult(scores, seen, time.perf_counter() - started)
