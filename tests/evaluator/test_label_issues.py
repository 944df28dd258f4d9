"""Confident learning (core/label_issues.py) on planted label flips: which rows it lists, and how well.

The probabilities are a simulated model's (a softmax over noisy logits, ~98 % accurate against the true
labels); 5 % of the given labels are flipped at random to another class, as the issue's target states.
"""
from __future__ import annotations

import numpy as np
import pytest

from shardflow.core.label_issues import PROBABILITY_BINS, MaskRejections, find_label_issues

pytestmark = pytest.mark.unit  # numpy only: make test-fast runs it

ROWS, CLASSES, FLIPPED = 5_000, 10, 0.05


def flipped_labels(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(given labels, probabilities, the flipped rows) of a simulated ~98 %-accurate model."""
    rng = np.random.default_rng(seed)
    true = rng.integers(0, CLASSES, ROWS)
    logits = rng.normal(0, 1, (ROWS, CLASSES))
    logits[np.arange(ROWS), true] += 4
    probabilities = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    flip = rng.random(ROWS) < FLIPPED
    given = true.copy()
    given[flip] = (true[flip] + rng.integers(1, CLASSES, flip.sum())) % CLASSES
    return given, probabilities, np.flatnonzero(flip)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_planted_flips_are_found_with_the_issues_precision_and_recall(seed: int) -> None:
    given, probabilities, flipped = flipped_labels(seed)
    issues = find_label_issues(given, probabilities)
    found = set(issues.rows.tolist())
    hits = len(found & set(flipped.tolist()))
    assert hits / len(found) >= 0.8 and hits / len(flipped) >= 0.7, (hits, len(found), len(flipped))
    # Ranked by self-confidence, lowest first, and the suggestion is never the given label.
    assert np.all(np.diff(issues.self_confidence) >= 0)
    assert np.all(issues.suggested != given[issues.rows])
    np.testing.assert_allclose(issues.self_confidence, probabilities[issues.rows, given[issues.rows]])


def test_the_off_diagonal_rule_lists_exactly_the_confident_joints_off_diagonal() -> None:
    given, probabilities, _ = flipped_labels(3)
    issues = find_label_issues(given, probabilities, rule="off_diagonal")
    assert len(issues) == issues.joint.sum() - np.trace(issues.joint)
    # Each listed row's suggestion reaches its class threshold and is the most probable that does.
    chosen = probabilities[issues.rows, issues.suggested]
    assert np.all(chosen >= issues.thresholds[issues.suggested] - 1e-12)


def test_clean_labels_from_a_confident_model_list_nothing() -> None:
    labels = np.repeat(np.arange(3), 4)
    probabilities = np.full((12, 3), 0.05)
    probabilities[np.arange(12), labels] = 0.9
    assert len(find_label_issues(labels, probabilities)) == 0
    with pytest.raises(ValueError, match="unknown label-issue rule 'mean'"):
        find_label_issues(labels, probabilities, rule="mean")


def test_a_mask_scores_the_share_of_pixels_confidently_given_the_wrong_class() -> None:
    """Two 4x4 masks of class 0 on the left half, 1 on the right; the second image's right half is
    given class 0 though the model is sure it is 1, so half its pixels are confidently rejected."""
    truth = np.zeros((2, 4, 4), np.int64)
    truth[:, :, 2:] = 1
    probabilities = np.stack([np.where(truth == 0, 0.95, 0.05), np.where(truth == 1, 0.95, 0.05)], axis=-1)
    given = truth.copy()
    given[1, :, 2:] = 0
    rejections = MaskRejections(num_classes=2)
    rejections.add(given[:1], probabilities[:1])  # streamed in two batches, as the scorer streams them
    rejections.add(given[1:], probabilities[1:])
    np.testing.assert_allclose(rejections.scores(), [0.0, 0.5])
    # Kept per image: C x PROBABILITY_BINS counts, whatever the mask's size.
    assert rejections._histograms[0].shape == (1, 2, PROBABILITY_BINS)
