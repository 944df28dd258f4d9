"""Masks as the components see them (`base.Task`): the gate's metrics, the canaries, the evaluation, the served checks.

>>> task = SegmentationTask()
>>> task.metric_names, task.score_text({"pixel_accuracy": 0.9, "mean_iou": 0.75})
(('pixel_accuracy', 'mean_iou', 'mean_dice'), 'pixel accuracy 0.900, mean IoU 0.750')
"""
from __future__ import annotations

from typing import Any

from ..base import (EvaluationRun, PredictionPart, PredictionSpec, ServedCheck, ServedJudgement, Task,
                    TaskEvaluation)
from .evaluation import OVERALL_METRICS, pixel_counts, segmentation_report


class SegmentationTask(Task):
    kind = "segmentation"
    metric_names = OVERALL_METRICS
    default_threshold = "mean_iou>=0.5"
    served_outputs, needs_canary_predictions = ("probabilities",), True

    def check_examples(self, manifest: Any, info: Any, examples: str) -> None:
        """A one-channel mask image per example."""
        from ...evaluator.outputs import EvaluationError
        from ...evaluator.scorer import label_feature

        feature = label_feature(manifest, info, examples)
        if not feature.is_file or feature.shape[-1] != 1:
            raise EvaluationError(f"segmentation label {info.label!r} must be a one-channel mask feature, "
                                  f"it is a {feature.role} of shape {feature.shape}")

    def check_served_outputs(self, outputs: dict[str, Any], info: Any, where: str) -> None:
        """probabilities [N, H, W, C] and class_ids [N, H, W]."""
        from ...evaluator.loaded_model import check_probability_outputs

        check_probability_outputs(outputs, info, where, rank=4)

    def judge_served(self, check: ServedCheck) -> ServedJudgement:
        """Each signature's probabilities against the Evaluator's for the same canaries, within the tolerance."""
        from ...infra_validator.evaluator_agreement import judge_probabilities

        return ServedJudgement(*judge_probabilities(check))

    def canary_outputs(self, outputs: dict[str, Any]) -> Any:
        return outputs["probabilities"]  # [N, H, W, C]

    def label_ids(self, plan: Any) -> Any:
        """Masks [N, H, W, 1] → class ids [N, H, W]."""
        import tensorflow as tf

        return lambda masks: tf.cast(masks[..., 0], tf.int64)

    def batch_counts(self, info: Any, labels: Any, predicted: Any, probabilities: Any) -> dict[str, Any]:
        """Per example its C*C pixel counts (no loss or confidence: a mask has no one probability)."""
        return {"cells": pixel_counts(labels, predicted, info.num_classes), "probabilities": probabilities}

    def group_report(self, tally: Any, class_names: list[str]) -> dict[str, Any]:
        """One group's metrics from its pixel tally (evaluator/slicing.py's `Tally`)."""
        return segmentation_report(tally.confusion, class_names, tally.examples)

    def score_text(self, overall: dict[str, Any]) -> str:
        return f"pixel accuracy {overall['pixel_accuracy']:.3f}, mean IoU {overall['mean_iou']:.3f}"

    def find_label_issues(self, scores: Any) -> Any:
        """The Evaluator's list of likely label errors (evaluator/label_list.py's `IssueList`): rejected pixels."""
        from .label_issues import mask_issues

        return mask_issues(scores)

    def issue_overlay(self, info: Any) -> str | None:
        """The given mask, drawn over a listed image's picture."""
        return info.label

    def bootstrap_arrays(self, data: dict[str, Any], num_classes: int) -> dict[str, Any]:
        """A mask is one example of the Evaluator's bootstrap (evaluator/intervals.py): its 3C pixel counts."""
        from .intervals import bootstrap_arrays

        return bootstrap_arrays(data, num_classes)

    def bootstrap_metrics(self, indices: Any, weights: Any, data: dict[str, Any], num_classes: int) -> dict[str, Any]:
        from .intervals import bootstrap_metrics

        return bootstrap_metrics(indices, weights, data, num_classes)

    def evaluate(self, run: EvaluationRun) -> TaskEvaluation:
        from ...evaluator.confusion import evaluate_confusion  # TensorFlow: only when a model is scored

        return TaskEvaluation(**evaluate_confusion(run, self))

    prediction_items = ("masks",)  # predictions.MASKS: a PNG of class ids per example

    def served_predictions(self, outputs: dict[str, Any]) -> list[dict[str, Any]]:
        from ...predict.tables import class_outputs

        return class_outputs(outputs)

    def prediction_part(self, spec: PredictionSpec, stem: str) -> PredictionPart:
        """A mask PNG and a row per example (predictions.py)."""
        from .predictions import SegmentationPart

        return SegmentationPart(spec, stem)

    def finish_predictions(self, spec: PredictionSpec, stems: list[str],
                           counts: list[dict[str, int]]) -> dict[str, Any]:
        return {"masks": "masks/"}
