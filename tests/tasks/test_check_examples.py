"""Each kind's `check_examples` on real ExampleGen outputs the suite already has: its own passes, a label in
another kind's form is refused with the reason, before any example is read (components/tasks/*/task.py)."""
from __future__ import annotations

from pathlib import Path

import pytest

from helpers_evaluator import bands, segments  # noqa: F401
from shardflow.core.manifest import read_manifest
from shardflow.core.model_info import ModelInfo
from shardflow.evaluator.outputs import EvaluationError
from shardflow.tasks import task_for


def _info(task: str, label: str, vocabulary: list[str] | None = None) -> ModelInfo:
    return ModelInfo(task=task, label=label, num_classes=3, class_names=["a", "b", "c"], label_vocabulary=vocabulary)


def _check(examples: Path, info: ModelInfo) -> None:
    task_for(info.task).check_examples(read_manifest(str(examples)), info, str(examples))


def test_each_kind_takes_its_own_examples(bands: Path, segments: Path, box_examples: Path) -> None:
    _check(bands, _info("classification", "y"))
    _check(bands, _info("classification", "word", ["a", "b", "c"]))
    _check(segments, _info("segmentation", "mask"))
    _check(box_examples, _info("detection", "boxes"))  # a detector's label is the box features, whatever its name


@pytest.mark.parametrize("case, label, vocabulary, reason", [
    ("bands", "nothing", None, "is not a feature of"),
    ("bands", "x", None, "classification label 'x' is an image file, not a value"),
    ("bands", "word", None, "holds strings but the model has no label_vocabulary"),
])
def test_a_classifier_refuses_a_label_it_cannot_score(bands: Path, case: str, label: str,
                                                       vocabulary: list[str] | None, reason: str) -> None:
    with pytest.raises(EvaluationError, match=reason):
        _check(bands, _info("classification", label, vocabulary))


def test_a_segmenter_needs_a_mask_and_a_detector_the_box_features(segments: Path, bands: Path) -> None:
    with pytest.raises(EvaluationError, match="segmentation label 'site' must be a one-channel mask feature"):
        _check(segments, _info("segmentation", "site"))
    with pytest.raises(EvaluationError, match="a detection model needs the box features of .* which lacks"):
        _check(bands, _info("detection", "y"))
