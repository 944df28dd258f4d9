"""A detector's served contract as the Evaluator (and predict) check it when they load the model
(evaluator/loaded_model.py): the OD API's outputs with their ranks and fixed sizes (core/box_schema.py's
`DETECTION_OUTPUT_SHAPES`: boxes [N, M, 4], the others [N, M] or [N]; N and M may be left undeclared), and the
label map beside the model (its served ids, core/label_map_file.py). Each problem an `EvaluationError` naming
the model (`where`: its role and directory).

>>> import tensorflow as tf
>>> spec = {name: tf.TensorSpec([None] * (len(shape) - 1) + [shape[-1] if shape[-1] == 4 else None])
...         for name, shape in (("detection_boxes", "NM4"), ("detection_scores", "NM"),
...                             ("detection_classes", "NM"), ("num_detections", "N"))}
>>> check_detection_outputs(spec, "model m")
>>> check_detection_outputs({"probabilities": spec["detection_scores"]}, "model m")
Traceback (most recent call last):
...
shardflow.evaluator.outputs.EvaluationError: model m: signature 'serving_default' lacks detection outputs \
['detection_boxes', 'detection_scores', 'detection_classes', 'num_detections'] (returns ['probabilities'])
"""
from __future__ import annotations

from typing import Any

from ...core.box_schema import DETECTION_OUTPUTS, LabelMap, detection_output_shape, detection_shape_text
from ...core.label_map_file import model_label_map
from ...core.model_info import SERVING_SIGNATURE
from ...evaluator.outputs import EvaluationError


def check_detection_outputs(outputs: dict[str, Any], where: str) -> None:
    """The signature's declared outputs (name -> TensorSpec) hold the contract's names, ranks and fixed sizes."""
    missing = [name for name in DETECTION_OUTPUTS if name not in outputs]
    if missing:
        raise EvaluationError(f"{where}: signature {SERVING_SIGNATURE!r} lacks detection outputs {missing} "
                              f"(returns {sorted(outputs)})")
    for name in DETECTION_OUTPUTS:
        declared, expected = outputs[name].shape, detection_output_shape(name, None, None)  # a fixed size: 4 corners
        if declared.rank != len(expected) or not declared.is_compatible_with(expected):
            raise EvaluationError(f"{where}: {name} have shape {declared}, expected "
                                  f"{detection_shape_text(name)} (rank {len(expected)})")


def served_label_map(path: str, info: Any, where: str) -> LabelMap:
    """The ids the detector in `path` serves: its label_map.pbtxt's."""
    try:
        return model_label_map(path, info)
    except (OSError, ValueError) as err:
        raise EvaluationError(f"{where}: cannot read its label map: {err}") from err
