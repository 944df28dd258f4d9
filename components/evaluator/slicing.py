"""Running totals per model, overall and per slice value: memory bounded by classes × slice values.

Each scored batch arrives as per-example confusion "cells": one cell index `label * C + prediction`
per example (classification), or one row of C*C pixel counts per example (segmentation), plus a
per-example log loss (classification). Overall, each example's own counts are kept, small and
lossless for every metric (what intervals resampling examples need): a classification example's
cell, log loss and confidence (16 bytes), a mask's per-class true positives, false positives and false negatives
(3 × C numbers, not C², and never its pixels).

>>> tally = Tally(num_classes=2)
>>> tally.add(np.array([0, 3, 1]), np.array([0.1, 0.2, 0.3]))      # (0→0), (1→1), (0→1)
>>> tally.confusion.tolist(), tally.examples, round(tally.loss_sum, 6)
([[1, 1], [0, 1]], 3, 0.6)
>>> groups = group_slices({"site": np.array([b"a", b"b", b"a"])})
>>> scores = Scores(num_classes=2, slice_by=("site",))
>>> scores.add(np.array([0, 3, 1]), None, groups)
>>> {value: t.confusion.tolist() for value, t in scores.slices["site"].items()}
{'a': [[1, 1], [0, 0]], 'b': [[0, 0], [0, 1]]}
>>> scores.example_cells().tolist()
[0, 3, 1]
>>> mask_counts(np.array([[3, 1, 0, 2]]), num_classes=2).tolist()     # one mask: 3 px 0→0, 1 px 0→1, 2 px 1→1
[[[3, 2], [0, 1], [1, 0]]]
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..core.label_issues import MaskRejections
from .outputs import EvaluationError

# Distinct values one slice column may have: a column like a file id would otherwise make
# thousands of confusion matrices nobody reads (and unbounded memory).
MAX_SLICE_VALUES = 1000
# Mask pixels folded into the label-issue histograms per step: MaskRejections' temporaries take ~45 + 4 × C
# bytes a pixel (~32 MB with 4 classes), whatever the scoring batch (which is sized to the model's activations).
MASK_SLICE_PIXELS = 1 << 19


@dataclass
class Tally:
    """A confusion matrix (true × predicted), the summed per-example log loss and the example count."""

    num_classes: int
    confusion: np.ndarray = field(init=False)
    loss_sum: float = 0.0
    examples: int = 0

    def __post_init__(self) -> None:
        self.confusion = np.zeros((self.num_classes, self.num_classes), dtype=np.int64)

    def add(self, cells: np.ndarray, losses: np.ndarray | None) -> None:
        """`cells`: [N] cell indices or [N, C*C] counts; `losses`: [N] or None."""
        size = self.num_classes * self.num_classes
        if cells.ndim == 1:
            counts = np.bincount(cells, minlength=size)
        else:
            counts = cells.sum(axis=0, dtype=np.int64)
        self.confusion += counts.reshape(self.num_classes, self.num_classes)
        if losses is not None:
            self.loss_sum += float(losses.sum(dtype=np.float64))
        self.examples += len(cells)


def slice_key(value: object) -> str:
    """A slice value as the JSON key it becomes: strings decoded, numbers as Python prints them."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, (np.integer, int)):
        return str(int(value))
    if isinstance(value, (np.floating, float)):
        return repr(float(value))
    return str(value)


# column -> (distinct values as keys, index of each example's value in those keys)
SliceGroups = dict[str, tuple[list[str], np.ndarray]]


def group_slices(values: dict[str, np.ndarray]) -> SliceGroups:
    """Groups a batch's examples by each slice column's value (done once, shared by every model)."""
    groups = {}
    for column, column_values in values.items():
        distinct, inverse = np.unique(column_values, return_inverse=True)
        groups[column] = ([slice_key(v) for v in distinct], inverse.reshape(-1))
    return groups


def mask_counts(pixel_counts: np.ndarray, num_classes: int) -> np.ndarray:
    """[N, C*C] per-mask pixel counts → int32 [N, 3, C]: per class, true positives, false positives, false negatives."""
    confusion = pixel_counts.reshape(len(pixel_counts), num_classes, num_classes)
    true_positives = np.diagonal(confusion, axis1=1, axis2=2)
    false_positives = confusion.sum(axis=1) - true_positives  # predicted c, true another class
    false_negatives = confusion.sum(axis=2) - true_positives  # true c, predicted another class
    return np.stack([true_positives, false_positives, false_negatives], axis=1).astype(np.int32)


@dataclass
class Scores:
    """One model's tallies: overall and per value of each slice column, and each example's own arrays.

    Per example, in split order, kept in `_examples[name]` as a list of per-batch arrays: "cells"
    (int32 cell, or int32 [3, C] mask counts), "losses" (float64) and "confidences" (float32: the
    probability the model gave its predicted class) for classifiers, and "slice:<column>" (int32: the
    index of its value among `slices[column]`). `add_probabilities` keeps what label issues need (the
    candidate's only): a classifier's class probabilities ("probabilities", float32 [C]: 4 × C bytes an
    example), or for masks the per-image histograms of `MaskRejections` (never per-pixel probabilities).
    """

    num_classes: int
    slice_by: tuple[str, ...] = ()
    overall: Tally = field(init=False)
    slices: dict[str, dict[str, Tally]] = field(init=False)
    _examples: dict[str, list[np.ndarray]] = field(init=False, repr=False)
    rejections: MaskRejections | None = field(init=False, default=None)  # masks, with add_probabilities

    def __post_init__(self) -> None:
        self.overall = Tally(self.num_classes)
        self.slices = {column: {} for column in self.slice_by}
        self._examples = {}

    def add_probabilities(self, labels: np.ndarray, probabilities: np.ndarray) -> None:
        """A batch's class probabilities: [N, C] kept as they are, or [N, H, W, C] (masks [N, H, W])
        folded into `rejections` a few images at a time (its temporaries stay ~MASK_SLICE_PIXELS × C)."""
        if labels.ndim == 1:
            self._keep("probabilities", np.asarray(probabilities, np.float32))
            return
        if self.rejections is None:
            self.rejections = MaskRejections(self.num_classes)
        step = max(1, MASK_SLICE_PIXELS // max(1, int(np.prod(labels.shape[1:]))))
        for start in range(0, len(labels), step):
            self.rejections.add(labels[start:start + step], probabilities[start:start + step])

    def example_probabilities(self) -> np.ndarray | None:
        """float32 [N, C] class probabilities (classification, after add_probabilities), None otherwise."""
        return self.example_array("probabilities")

    def example_array(self, name: str) -> np.ndarray | None:
        """The per-example array kept under `name`, in split order; None when none was kept."""
        parts = self._examples.get(name)
        return np.concatenate(parts) if parts else None

    def example_cells(self) -> np.ndarray:
        """Per example in split order: int32 [N] cells (label * C + prediction) or [N, 3, C] mask counts."""
        cells = self.example_array("cells")
        return np.zeros(0, np.int32) if cells is None else cells

    def example_losses(self) -> np.ndarray | None:
        """float64 [N] per-example log losses (classification), None for masks."""
        return self.example_array("losses")

    def example_confidences(self) -> np.ndarray | None:
        """float32 [N] probability of each example's predicted class (classification), None for masks."""
        return self.example_array("confidences")

    def example_slices(self, column: str) -> tuple[list[str], np.ndarray]:
        """A slice column's values (the keys of `slices[column]`, in order) and each example's index in them."""
        ids = self.example_array(f"slice:{column}")
        return list(self.slices[column]), np.zeros(0, np.int32) if ids is None else ids

    def _keep(self, name: str, values: np.ndarray) -> None:
        self._examples.setdefault(name, []).append(values)

    def add(self, cells: np.ndarray, losses: np.ndarray | None, groups: SliceGroups,
            confidences: np.ndarray | None = None) -> None:
        self.overall.add(cells, losses)
        self._keep("cells", cells.astype(np.int32) if cells.ndim == 1 else mask_counts(cells, self.num_classes))
        if losses is not None:
            self._keep("losses", np.asarray(losses, np.float64))
        if confidences is not None:
            self._keep("confidences", np.asarray(confidences, np.float32))
        for column, (keys, inverse) in groups.items():
            tallies = self.slices[column]
            for index, key in enumerate(keys):
                chosen = inverse == index
                if key not in tallies:
                    if len(tallies) >= MAX_SLICE_VALUES:
                        raise EvaluationError(f"slice column {column!r} has more than {MAX_SLICE_VALUES} distinct "
                                              f"values: slice by a column with fewer values")
                    tallies[key] = Tally(self.num_classes)
                tallies[key].add(cells[chosen], None if losses is None else losses[chosen])
            position = {key: i for i, key in enumerate(tallies)}  # insertion order: stable across batches
            self._keep(f"slice:{column}", np.array([position[k] for k in keys], np.int32)[inverse])
