"""Label issues by confident learning (Northcutt, Jiang and Chuang, 2021) over a model's probabilities.

For classification, from each example's given label and the model's class probabilities:

1. per class j, a threshold t_j: the mean probability of j over the examples labelled j (what the
   model says of a class when it is right about it, on average);
2. each example's confident class: of the classes whose probability reaches their threshold, the most
   probable; none when no class does;
3. the confident joint: given label × confident class counts. An example off its diagonal (confidently
   another class than the one it was given) is a label issue, ranked by self-confidence: the model's
   probability of the given label, lowest first. The suggested label is the confident class.

That is cleanlab 2.x's `filter_by="confident_learning"`; the default here is its default,
`prune_by_noise_rate` (`find_label_issues`' `rule`), down to its rounding (the calibrated joint rounded
keeping each row's total, every diagonal counted at least once): both rules list the same rows as
cleanlab 2.7.1 on the label-issue benchmark's photos and on 200 random cases. Written here because cleanlab is AGPL-3.0: the
label-issue benchmark runs it as a contender on the same probabilities.

>>> labels = np.array([0, 0, 0, 1, 1, 1])
>>> probabilities = np.array([[.9, .1], [.8, .2], [.1, .9], [.2, .8], [.3, .7], [.6, .4]])
>>> issues = find_label_issues(labels, probabilities, rule="off_diagonal")
>>> issues.rows.tolist(), issues.suggested.tolist(), issues.self_confidence.round(2).tolist()
([2, 5], [1, 0], [0.1, 0.4])
>>> issues.thresholds.round(3).tolist(), issues.joint.tolist()
([0.6, 0.633], [[2, 1], [1, 2]])

For masks, an image's score is the share of its pixels whose given class the model confidently
rejects: the model predicts another class j there, with a probability of at least t_j (t over the
pixels labelled j). Scoring
streams batch by batch and the thresholds are known only at the end, so each image keeps a histogram
of those pixels' probabilities per class (`MaskRejections`: C × PROBABILITY_BINS counts, bytes per
image fixed by the classes, not the pixels).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Histogram bins of [0, 1] for a mask's per-pixel probabilities: a threshold is applied from the bin
# holding it, so within 1/64, well inside the spread of a class's mean probability between models.
PROBABILITY_BINS = 64
# A class's probability counts as reaching its threshold within this much (cleanlab's tolerance): float32
# probabilities of examples identical to the class's mean would otherwise fall either side by rounding.
THRESHOLD_TOLERANCE = 1e-6


@dataclass(frozen=True)
class LabelIssues:
    """Issues ranked most likely first: `rows` index the scored examples (split order)."""

    rows: np.ndarray  # int64 [K]
    suggested: np.ndarray  # int64 [K] the confident class of each
    self_confidence: np.ndarray  # float64 [K] the model's probability of the given label
    thresholds: np.ndarray  # float64 [C]
    joint: np.ndarray  # int64 [C, C] given × confident class

    def __len__(self) -> int:
        return len(self.rows)


def class_thresholds(labels: np.ndarray, probabilities: np.ndarray) -> np.ndarray:
    """Per class, the mean probability of that class over the examples labelled with it (1.0 for a class
    no example has: nothing is confidently that class)."""
    classes = probabilities.shape[1]
    sums = np.zeros(classes)
    np.add.at(sums, labels, probabilities[np.arange(len(labels)), labels])
    counts = np.bincount(labels, minlength=classes)
    return np.divide(sums, counts, out=np.ones(classes), where=counts > 0)


def confident_classes(probabilities: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """Each example's confident class, -1 when no class reaches its threshold: the one class that does, or,
    when several do, the most probable class (cleanlab's `compute_confident_joint`, to the tolerance)."""
    above = probabilities >= thresholds - THRESHOLD_TOLERANCE
    count = above.sum(axis=1)
    chosen = np.where(count > 1, probabilities.argmax(axis=1), above.argmax(axis=1))
    return np.where(count > 0, chosen, -1)


def find_label_issues(labels: np.ndarray, probabilities: np.ndarray, rule: str = "noise_rate") -> LabelIssues:
    """Confident learning over int [N] given labels and float [N, C] probabilities (module docstring).

    `rule`: "off_diagonal" flags exactly the confident joint's off-diagonal examples; "noise_rate" (the
    default, as cleanlab's default `prune_by_noise_rate`) estimates from the calibrated joint how many
    examples of each given class i truly are j, and flags that many of class i, those with the largest
    margin p_j − p_i, never one the model predicts as its given label.
    """
    labels = np.asarray(labels, np.int64)
    probabilities = np.asarray(probabilities, np.float64)
    thresholds = class_thresholds(labels, probabilities)
    confident = confident_classes(probabilities, thresholds)
    classes = probabilities.shape[1]
    known = confident >= 0
    joint = np.zeros((classes, classes), np.int64)
    np.add.at(joint, (labels[known], confident[known]), 1)
    if rule == "off_diagonal":
        rows, suggested = np.flatnonzero(known & (confident != labels)), confident
    elif rule == "noise_rate":
        rows, suggested = _pruned_by_noise_rate(labels, probabilities, joint), probabilities.argmax(axis=1)
    else:
        raise ValueError(f"unknown label-issue rule {rule!r}: off_diagonal or noise_rate")
    self_confidence = probabilities[rows, labels[rows]]
    order = np.argsort(self_confidence, kind="stable")
    return LabelIssues(rows[order], suggested[rows[order]], self_confidence[order], thresholds, joint)


def _pruned_by_noise_rate(labels: np.ndarray, probabilities: np.ndarray, joint: np.ndarray) -> np.ndarray:
    """Rows flagged by the estimated count of each off-diagonal cell (see find_label_issues)."""
    flagged = np.zeros(len(labels), bool)
    estimated = estimated_joint(labels, joint)
    for given, true in zip(*np.nonzero(estimated * (1 - np.eye(len(joint), dtype=np.int64)))):
        members = np.flatnonzero(labels == given)
        if len(members) <= 1:  # a class's last example is never pruned (cleanlab's min_examples_per_class)
            continue
        margins = probabilities[members, true] - probabilities[members, given]
        flagged[members[np.argsort(-margins, kind="stable")[:estimated[given, true]]]] = True
    flagged &= probabilities.argmax(axis=1) != labels
    return np.flatnonzero(flagged)


def estimated_joint(labels: np.ndarray, joint: np.ndarray) -> np.ndarray:
    """The confident joint calibrated to the given labels' counts: each row scaled to its class's count, the
    whole to N, then rounded with each row's total kept (every diagonal first counted at least once).

    >>> estimated_joint(np.array([0, 0, 0, 1, 1]), np.array([[2, 1], [0, 1]])).tolist()
    [[2, 1], [0, 2]]
    """
    counts = np.bincount(labels, minlength=len(joint)).astype(np.float64)
    joint = joint.astype(np.float64)
    np.fill_diagonal(joint, np.maximum(joint.diagonal(), 1))
    calibrated = joint / joint.sum(axis=1, keepdims=True) * counts[:, None]
    calibrated *= counts.sum() / max(calibrated.sum(), 1e-12)
    return np.stack([_rounded_keeping_sum(row) for row in calibrated])


def _rounded_keeping_sum(values: np.ndarray) -> np.ndarray:
    """Rounds to integers whose sum is the rounded sum of `values`: the largest remainders move first."""
    rounded = np.round(values)
    short = int(np.round(values.sum() - rounded.sum()))
    if short:
        step = 1 if short > 0 else -1
        order = np.argsort(values - rounded)[::-step][:abs(short)]
        rounded[order] += step
    return rounded.astype(np.int64)


@dataclass
class MaskRejections:
    """Per image, histograms that let the mask score be computed once the class thresholds are known.

    `add` takes a batch's given masks [B, H, W] and probabilities [B, H, W, C]. Kept per image: for
    each class j, the probabilities of j at the pixels the model predicts as j though they were given
    another class (PROBABILITY_BINS bins), and the pixel count; kept overall: per class, the sum of
    its probability over the pixels labelled with it and their count (the thresholds).
    """

    num_classes: int

    def __post_init__(self) -> None:
        self._histograms: list[np.ndarray] = []
        self._pixels: list[np.ndarray] = []
        self._sums = np.zeros(self.num_classes)
        self._counts = np.zeros(self.num_classes, np.int64)

    def add(self, masks: np.ndarray, probabilities: np.ndarray) -> None:
        batch, classes = len(masks), self.num_classes
        given = masks.reshape(batch, -1).astype(np.int64)
        probs = probabilities.reshape(batch, given.shape[1], classes)
        given_p = np.take_along_axis(probs, given[..., None], axis=2)[..., 0]
        np.add.at(self._sums, given.ravel(), given_p.ravel())
        self._counts += np.bincount(given.ravel(), minlength=classes)
        others = probs.copy()
        np.put_along_axis(others, given[..., None], -1.0, axis=2)
        rival = others.argmax(axis=2)
        rival_p = np.take_along_axis(others, rival[..., None], axis=2)[..., 0]
        bins = np.minimum((rival_p * PROBABILITY_BINS).astype(np.int64), PROBABILITY_BINS - 1)
        cells = (np.arange(batch)[:, None] * classes + rival) * PROBABILITY_BINS + bins
        predicted_other = rival_p > given_p
        counts = np.bincount(cells[predicted_other], minlength=batch * classes * PROBABILITY_BINS)
        self._histograms.append(counts.reshape(batch, classes, PROBABILITY_BINS).astype(np.int32))
        self._pixels.append(np.full(batch, given.shape[1], np.int64))

    def thresholds(self) -> np.ndarray:
        return np.divide(self._sums, self._counts, out=np.ones(self.num_classes), where=self._counts > 0)

    def scores(self) -> np.ndarray:
        """float64 [N]: each image's share of pixels whose given class is confidently rejected."""
        if not self._histograms:
            return np.zeros(0)
        histograms, pixels = np.concatenate(self._histograms), np.concatenate(self._pixels)
        # From the bin holding t_j: a pixel within 1/64 below the threshold may count, none at or above is missed.
        first_bin = np.minimum((self.thresholds() * PROBABILITY_BINS).astype(np.int64), PROBABILITY_BINS - 1)
        reach = np.arange(PROBABILITY_BINS)[None, :] >= first_bin[:, None]  # [C, bins]
        return (histograms * reach[None]).sum(axis=(1, 2)) / pixels
