"""Boxes as the components see them (`base.Task`): the gate's metrics, the canaries, the evaluation, the served checks.

COCO's metrics: a value pycocotools reports as -1 (no true box in its class or area range) is None in
metrics.json and NaN to the gate, on which every threshold and regression check fails (report.py).

>>> task = DetectionTask()
>>> task.metric_names[:3], task.gate_values({"ap": 0.5, "ap_small": None})
(('ap', 'ap50', 'ap75'), {'ap': 0.5, 'ap_small': nan})
>>> task.signature_problems(["serving_default"])
["the detector has no 'serving_image' signature taking encoded images"]
"""
from __future__ import annotations

from typing import Any, Callable

from ...core.box_schema import DETECTION_OUTPUTS
from ...core.detection_metrics import METRIC_NAMES
from ...core.model_info import IMAGE_SIGNATURE
from ..base import (EvaluationRun, PredictionPart, PredictionSpec, ServedCheck, ServedJudgement, Task,
                    TaskEvaluation)


class DetectionTask(Task):
    kind = "detection"  # core/box_schema.py's DETECTION_TASK
    metric_names = METRIC_NAMES  # ap, ap50, ap75, ap_small, ..., ar1, ar10, ar100, ar_small, ...
    default_threshold = "ap50>=0.5"
    # Infra validation holds the answers to the served contract and the two signatures to each other, not to
    # the Evaluator's canary answers (serving_checks.py).
    served_outputs, needs_canary_predictions = DETECTION_OUTPUTS, False

    def check_examples(self, manifest: Any, info: Any, examples: str) -> None:
        """The box features (core/box_schema.py) and one image feature, which boxes are normalised to."""
        from .scoring import check_box_examples

        check_box_examples(manifest, examples)

    def signature_problems(self, signatures: list[str]) -> list[str]:
        """serving_image (encoded images) beside serving_default: the two are checked against each other."""
        return [] if IMAGE_SIGNATURE in signatures else [
            f"the detector has no {IMAGE_SIGNATURE!r} signature taking encoded images"]

    def scoring_feature(self, manifest: Any, info: Any, examples: str) -> tuple[str, bool]:
        """The one image feature, as stored: boxes are parsed from the serialized bytes (scoring.py)."""
        from .scoring import image_feature

        return image_feature(manifest, examples).name, False

    def check_served_outputs(self, outputs: dict[str, Any], info: Any, where: str) -> None:
        """The OD API's outputs (core/box_schema.py's DETECTION_OUTPUTS) with their ranks and fixed sizes."""
        from .signature import check_detection_outputs

        check_detection_outputs(outputs, where)

    def served_label_map(self, path: str, info: Any, where: str) -> Any:
        """Its label_map.pbtxt: the ids it serves."""
        from .signature import served_label_map

        return served_label_map(path, info, where)

    def judge_served(self, check: ServedCheck) -> ServedJudgement:
        from .serving_checks import judge_served_detections

        return judge_served_detections(check)

    def canary_outputs(self, outputs: dict[str, Any]) -> Any:
        from .evaluation import served_detections  # TensorFlow

        return served_detections(outputs)  # [N, MAX_DETECTIONS, 6]

    def evaluate(self, run: EvaluationRun) -> TaskEvaluation:
        from .evaluation import evaluate_detection  # TensorFlow: only when a model is scored

        return evaluate_detection(run)

    def gate_values(self, overall: dict[str, Any]) -> dict[str, float]:
        from .report import gate_values

        return gate_values(overall)

    prediction_items = ("boxes.csv",)  # predictions.BOXES_CSV: every row's boxes in ExampleGen's AutoML layout

    def served_predictions(self, outputs: dict[str, Any]) -> list[dict[str, Any]]:
        from .predictions import served_rows

        return served_rows(outputs)

    def check_prediction_config(self, config: Any) -> None:
        from .predictions import check_format

        check_format(config)

    def prediction_spec(self, config: Any, info: Any, model_dir: str, staged: Callable[[str], str]) -> PredictionSpec:
        """JSON lines and a box CSV, with the score floor, the label map, the examples' image size, the letterboxing."""
        from .predictions import box_spec

        return box_spec(super().prediction_spec(config, info, model_dir, staged), config, info, model_dir)

    def prediction_part(self, spec: PredictionSpec, stem: str) -> PredictionPart:
        """A JSON line and box CSV rows per image (predictions.py)."""
        from .predictions import DetectionPart

        return DetectionPart(spec, stem)

    def finish_predictions(self, spec: PredictionSpec, stems: list[str],
                           counts: list[dict[str, int]]) -> dict[str, Any]:
        from .predictions import finish_boxes

        return finish_boxes(spec, stems, counts)
