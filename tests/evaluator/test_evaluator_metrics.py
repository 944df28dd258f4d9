"""The Evaluator's segmentation metrics on hand-built masks whose IoU and Dice are worked out by hand."""
from __future__ import annotations

import numpy as np
import pytest

from shardflow.tasks.segmentation.evaluation import segmentation_report

pytestmark = pytest.mark.unit  # in process, small generated data, no server: make test-fast runs it


def test_segmentation_metrics_on_hand_built_masks() -> None:
    truth = np.zeros((4, 4), np.int64)
    truth[:, :2] = 1  # left half is class 1
    predicted = np.zeros((4, 4), np.int64)
    predicted[:, :3] = 1  # the prediction spills one column to the right
    confusion = np.bincount((truth * 3 + predicted).ravel(), minlength=9).reshape(3, 3)
    report = segmentation_report(confusion, ["bg", "thing", "absent"], num_examples=1)
    # class 1: TP 8, FP 4, FN 0; class 0: TP 4, FP 0, FN 4; class 2 nowhere
    assert report["per_class"]["thing"] == {"iou": pytest.approx(8 / 12), "dice": pytest.approx(16 / 20), "pixels": 8}
    assert report["per_class"]["bg"] == {"iou": pytest.approx(4 / 8), "dice": pytest.approx(8 / 12), "pixels": 8}
    assert report["per_class"]["absent"] == {"iou": None, "dice": None, "pixels": 0}
    assert report["overall"] == pytest.approx({"pixel_accuracy": 12 / 16, "mean_iou": (8 / 12 + 4 / 8) / 2,
                                               "mean_dice": (16 / 20 + 8 / 12) / 2})
    # Over two images the counts are summed first: a perfect all-background image adds 16 TN-free bg pixels.
    both = confusion + np.bincount(np.zeros(16, np.int64), minlength=9).reshape(3, 3)
    assert segmentation_report(both, ["bg", "thing", "absent"])["per_class"]["bg"]["iou"] == pytest.approx(20 / 24)
