"""Class labels as the components see them (`base.Task`): the gate's metrics, the canaries, the evaluation, the
served checks.

>>> task = ClassificationTask()
>>> task.metric_names[-1], sorted(task.lower_is_better), task.score_text({"accuracy": 0.95})
('ece', ['ece', 'log_loss'], 'accuracy 0.950')
"""
from __future__ import annotations

from typing import Any

from ..base import (EvaluationRun, PredictionPart, PredictionSpec, ServedCheck, ServedJudgement, Task,
                    TaskEvaluation)
from .evaluation import LOWER_IS_BETTER, OVERALL_METRICS, batch_counts, classification_report


class ClassificationTask(Task):
    kind = "classification"
    metric_names = OVERALL_METRICS + ("ece",)  # ece: the calibration of the predicted class's probability
    lower_is_better = LOWER_IS_BETTER | {"ece"}
    unbounded_metrics = frozenset({"log_loss"})
    default_threshold = "accuracy>=0.9"
    served_outputs, needs_canary_predictions = ("probabilities",), True

    def check_examples(self, manifest: Any, info: Any, examples: str) -> None:
        """A value column: integers, or strings (integers too) through the model's vocabulary."""
        from ...evaluator.outputs import EvaluationError
        from ...evaluator.scorer import label_feature

        feature = label_feature(manifest, info, examples)
        if feature.is_file:
            raise EvaluationError(f"classification label {info.label!r} is an {feature.role} file, not a value")
        if feature.dtype == "string" and info.label_vocabulary is None:
            raise EvaluationError(f"label {info.label!r} holds strings but the model has no label_vocabulary")
        if feature.dtype == "float32" and info.label_vocabulary is not None:
            raise EvaluationError(f"label {info.label!r} holds floats; a label vocabulary needs strings or integers")

    def check_served_outputs(self, outputs: dict[str, Any], info: Any, where: str) -> None:
        """probabilities [N, C] and class_ids [N]."""
        from ...evaluator.loaded_model import check_probability_outputs

        check_probability_outputs(outputs, info, where, rank=2)

    def judge_served(self, check: ServedCheck) -> ServedJudgement:
        """Each signature's probabilities against the Evaluator's for the same canaries, within the tolerance."""
        from ...infra_validator.evaluator_agreement import judge_probabilities

        return ServedJudgement(*judge_probabilities(check))

    def canary_outputs(self, outputs: dict[str, Any]) -> Any:
        return outputs["probabilities"]  # [N, C]

    def label_ids(self, plan: Any) -> Any:
        """Raw label tensor → int64 class ids, as `ModelInfo.class_id_of` does one value at a time: integers as
        they are, strings (or integers as text) through the vocabulary, an unknown one to the OOV id."""
        import tensorflow as tf

        info = plan.info
        if info.label_vocabulary is None:
            return lambda labels: tf.cast(labels, tf.int64)
        vocabulary = tf.constant(info.label_vocabulary, tf.string)
        table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(vocabulary, tf.range(len(info.label_vocabulary), dtype=tf.int64)),
            default_value=len(info.label_vocabulary))  # the OOV id
        is_string = plan.manifest.features[info.label].dtype == "string"
        return lambda labels: table.lookup(labels if is_string else tf.strings.as_string(labels))

    def batch_counts(self, info: Any, labels: Any, predicted: Any, probabilities: Any) -> dict[str, Any]:
        return batch_counts(labels, predicted, probabilities, len(info.label_classes))

    def group_report(self, tally: Any, class_names: list[str]) -> dict[str, Any]:
        """One group's metrics from its tally (evaluator/slicing.py's `Tally`)."""
        return classification_report(tally.confusion, tally.loss_sum, class_names)

    def score_text(self, overall: dict[str, Any]) -> str:
        return f"accuracy {overall['accuracy']:.3f}"

    def find_label_issues(self, scores: Any) -> Any:
        """The Evaluator's list of likely label errors (evaluator/label_list.py's `IssueList`): confident learning."""
        from .label_issues import class_issues

        return class_issues(scores)

    def issue_overlay(self, info: Any) -> str | None:
        """No feature drawn over a listed example's picture: its label is in the caption."""
        return None

    def bootstrap_arrays(self, data: dict[str, Any], num_classes: int) -> dict[str, Any]:
        """The per-example arrays the Evaluator's bootstrap resamples (evaluator/intervals.py)."""
        from .intervals import bootstrap_arrays

        return bootstrap_arrays(data, num_classes)

    def bootstrap_metrics(self, indices: Any, weights: Any, data: dict[str, Any], num_classes: int) -> dict[str, Any]:
        """Every metric of a chunk of resamples ([b, N] indices and draw counts): [b] values each."""
        from .intervals import bootstrap_metrics

        return bootstrap_metrics(indices, weights, data, num_classes)

    def evaluate(self, run: EvaluationRun) -> TaskEvaluation:
        from ...evaluator.confusion import evaluate_confusion  # TensorFlow: only when a model is scored

        return TaskEvaluation(**evaluate_confusion(run, self))

    def served_predictions(self, outputs: dict[str, Any]) -> list[dict[str, Any]]:
        from ...predict.tables import class_outputs

        return class_outputs(outputs)

    def prediction_part(self, spec: PredictionSpec, stem: str) -> PredictionPart:
        """A row per example: its class, score and top k (predictions.py)."""
        from .predictions import ClassificationPart

        return ClassificationPart(spec, stem)
