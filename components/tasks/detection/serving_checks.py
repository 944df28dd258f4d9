"""Infra validation's judgement of a detector's answers (core/box_schema.py's served outputs), in plain numpy.

The probe saves each signature's `detection_*` outputs for every canary and what its first call returned; here
each signature's answer is held to the contract, and `serving_image` (the canaries' encoded images) to
`serving_default` (the same canaries as examples). A problem is one line naming the signature, the canary and
the check; only the first problem of each signature is told (one broken rule usually breaks every canary).

    problems = contract_problems("serving_default", returned, answers, label_ids=(3, 7, 12))
    worst, problems = agreement(answers_by_signature["serving_default"], answers_by_signature["serving_image"],
                                box_tolerance=1 / 96)

The checks, per canary: the outputs are exactly `DETECTION_OUTPUTS`, float32, of shapes [N, M, 4], [N, M],
[N, M], [N] with M = `MAX_DETECTIONS` (box_schema's `DETECTION_OUTPUT_SHAPES`); every value finite;
`num_detections` a whole number in 0..M; in the rows that are detections, boxes within [0, 1] with ymin <= ymax
and xmin <= xmax, scores in [0, 1] and descending, classes ids of the model's label map (its label_map.pbtxt);
past them, class 0.
"""
from __future__ import annotations

import os
from typing import Any

import numpy as np

from ...core.box_schema import DETECTION_OUTPUTS, MAX_DETECTIONS, detection_output_shape, detection_shape_text
from ...core.label_map_file import model_label_map
from ...core.manifest import FeatureSpec
from ...core.model_info import IMAGE_SIGNATURE, SERVING_SIGNATURE
from ...infra_validator.canaries import image_feature
from ...infra_validator.errors import InfraValidationError
from ..base import ServedCheck, ServedJudgement

BOXES, SCORES, CLASSES, COUNT = DETECTION_OUTPUTS
# serving_image and serving_default are compared on the detections a user would keep (the score floor predict
# defaults to); a counterpart may score a little lower on the other side (a resize moves scores too), so one
# detection just above the floor and its twin just below it do not fail the check.
AGREEMENT_SCORE = 0.5
AGREEMENT_SCORE_MARGIN = 0.1


def _shape_problem(answers: dict[str, np.ndarray], canaries: int) -> str | None:
    """The first output that is not float32 or not of its contract shape (box_schema.DETECTION_OUTPUT_SHAPES)."""
    for name in DETECTION_OUTPUTS:
        value = answers[name]
        if value.dtype != np.float32:
            return f"{name} is {value.dtype}, the contract is float32"
        if value.shape != detection_output_shape(name, canaries):
            return (f"{name} has shape {list(value.shape)} for {canaries} canaries, the contract is "
                    f"{detection_shape_text(name)} with M = {MAX_DETECTIONS}")
    return None


def _first(bad: np.ndarray) -> tuple[int, ...] | None:
    """The first index where `bad` holds, or None."""
    found = np.argwhere(bad)
    return tuple(int(i) for i in found[0]) if len(found) else None


def _row_problem(answers: dict[str, np.ndarray], label_ids: tuple[int, ...]) -> str | None:
    """The first canary (and detection) breaking a rule of the values, said in one line."""
    boxes, scores, classes, count = (answers[name].astype(np.float64) for name in DETECTION_OUTPUTS)
    finite = np.isfinite(boxes).all(axis=(1, 2)) & np.isfinite(scores).all(axis=1) & np.isfinite(classes).all(axis=1)
    at = _first(~(finite & np.isfinite(count)))
    if at:
        return f"canary {at[0]}: an output holds NaN or infinity"
    at = _first((count != np.round(count)) | (count < 0) | (count > MAX_DETECTIONS))
    if at:
        return f"canary {at[0]}: {COUNT} is {count[at[0]]:g}, not a whole number in 0..{MAX_DETECTIONS}"
    detection = np.arange(MAX_DETECTIONS)[None, :] < count[:, None]
    rules = (
        (((boxes < 0) | (boxes > 1)).any(axis=2), lambda i, j: f"box {_box(boxes[i, j])} is not within [0, 1]"),
        ((boxes[..., 0] > boxes[..., 2]) | (boxes[..., 1] > boxes[..., 3]),
         lambda i, j: f"box {_box(boxes[i, j])} is reversed (ymin > ymax or xmin > xmax)"),
        ((scores < 0) | (scores > 1), lambda i, j: f"score {scores[i, j]:g} is not within [0, 1]"),
        (np.pad(np.diff(scores, axis=1) > 0, ((0, 0), (1, 0))),  # detection j scores above detection j - 1
         lambda i, j: f"scores are not descending ({scores[i, j - 1]:g} then {scores[i, j]:g})"),
        (~np.isin(classes, np.asarray(label_ids, np.float64)),
         lambda i, j: f"class {classes[i, j]:g} is not in the label map (ids {list(label_ids)})"),
    )
    for bad, said in rules:
        at = _first(bad & detection)
        if at:
            return f"canary {at[0]}: detection {at[1]}: {said(*at)}"
    at = _first((classes != 0) & ~detection)
    if at:
        return (f"canary {at[0]}: row {at[1]} past its {int(count[at[0]])} detections has class {classes[at]:g}, "
                "the contract is 0")
    return None


def _box(box: np.ndarray) -> str:
    return "[" + ", ".join(f"{value:.4g}" for value in box) + "]"


def contract_problems(signature: str, returned: dict[str, Any], answers: dict[str, np.ndarray],
                      label_ids: tuple[int, ...]) -> list[str]:
    """[] when `signature`'s answers keep the contract; else [its first problem, in one line].

    `returned`: the names (and dtypes, shapes) its first call returned; `answers`: its saved outputs per canary."""
    if sorted(returned) != sorted(DETECTION_OUTPUTS):
        return [f"{signature}: returns {sorted(returned)}, the contract is exactly {sorted(DETECTION_OUTPUTS)}"]
    problem = _shape_problem(answers, len(answers[COUNT]))
    if problem is None:
        problem = _row_problem(answers, label_ids)
    return [] if problem is None else [f"{signature}: {problem}"]


def _confident(answers: dict[str, np.ndarray], canary: int, floor: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A canary's detections scoring at least `floor`: (boxes, scores, classes)."""
    count = int(answers[COUNT][canary])
    keep = answers[SCORES][canary, :count] >= floor
    return (answers[BOXES][canary, :count][keep].astype(np.float64), answers[SCORES][canary, :count][keep],
            answers[CLASSES][canary, :count][keep])


def _unmatched(ours: dict[str, np.ndarray], theirs: dict[str, np.ndarray], canary: int,
               tolerance: float) -> tuple[float, int | None]:
    """(the largest coordinate gap of `ours`' confident detections to their nearest twins in `theirs`, the first
    of them that has no twin of its class within `tolerance`)."""
    boxes, _, classes = _confident(ours, canary, AGREEMENT_SCORE)
    other_boxes, _, other_classes = _confident(theirs, canary, AGREEMENT_SCORE - AGREEMENT_SCORE_MARGIN)
    worst = 0.0
    for index, (box, cls) in enumerate(zip(boxes, classes)):
        same = other_boxes[other_classes == cls]
        gap = float(np.abs(same - box).max(axis=1).min()) if len(same) else np.inf
        if gap > tolerance:
            return worst, index
        worst = max(worst, gap)
    return worst, None


def agreement(default: dict[str, np.ndarray], image: dict[str, np.ndarray],
              box_tolerance: float) -> tuple[float, list[str]]:
    """(the largest box coordinate gap between the two signatures' confident detections, [the first canary whose
    detections differ, in one line]). Both ways: a box only one side finds fails as a box moved does."""
    worst = 0.0
    for canary in range(len(default[COUNT])):
        for ours, theirs, names in ((default, image, (SERVING_SIGNATURE, IMAGE_SIGNATURE)),
                                    (image, default, (IMAGE_SIGNATURE, SERVING_SIGNATURE))):
            gap, lost = _unmatched(ours, theirs, canary, box_tolerance)
            worst = max(worst, gap)
            if lost is not None:
                boxes, scores, classes = _confident(ours, canary, AGREEMENT_SCORE)
                return worst, [f"canary {canary}: {names[1]} has no class {classes[lost]:g} box within "
                               f"{box_tolerance:.3g} of {names[0]}'s {_box(boxes[lost])} (score {scores[lost]:.3f})"]
    return worst, []


def judge_detections(outputs: str, checked: dict[str, Any], label_ids: tuple[int, ...], image_shape: list[int] | None,
                     canaries: int) -> tuple[dict[str, float], list[str], list[str]]:
    """The probe's saved answers (`outputs`/<signature>.npz) judged: ({serving_image: its largest box gap to
    serving_default}, [problems], [what passed, for the report]). `image_shape`: the canaries' stored image
    [H, W, C], whose one pixel is the resize's rounding the two signatures may differ by."""
    answers = {name: dict(np.load(os.path.join(outputs, f"{name}.npz"))) for name in sorted(checked)}
    problems = [line for name in sorted(checked)
                for line in contract_problems(name, checked[name].get("returned") or {}, answers[name], label_ids)]
    if problems:
        return {}, problems, []
    passed = [f"{', '.join(sorted(checked))}: the detection outputs keep the contract on {canaries} canaries"]
    if IMAGE_SIGNATURE not in answers or SERVING_SIGNATURE not in answers or not image_shape:
        return {}, [], passed
    tolerance = 1.0 / min(image_shape[:2])
    worst, problems = agreement(answers[SERVING_SIGNATURE], answers[IMAGE_SIGNATURE], tolerance)
    passed.append(f"serving_image: boxes scoring >= {AGREEMENT_SCORE:g} within {worst:.3g} of serving_default's "
                  f"(tolerance {tolerance:.3g}: one pixel of the {image_shape[0]}x{image_shape[1]} image)")
    return {IMAGE_SIGNATURE: worst}, problems, passed if not problems else []


def _label_ids(model: str, info: Any) -> tuple[int, ...]:
    """The ids a detector may serve: its label_map.pbtxt's (core/label_map_file.py)."""
    try:
        return model_label_map(model, info).ids
    except (OSError, ValueError) as err:
        raise InfraValidationError(f"model {model}: cannot read its label map: {err}") from None


def judge_served_detections(check: ServedCheck) -> ServedJudgement:
    """`DetectionTask.judge_served`: each signature by the contract, serving_image by serving_default's boxes
    within one pixel of the canaries' stored image (its feature as the evaluated examples store it)."""
    feature = image_feature(check.model, check.examples)
    shape = list(feature.shape) if isinstance(feature, FeatureSpec) else None
    judged = judge_detections(check.outputs, check.checked, _label_ids(check.config.model, check.info), shape,
                              len(check.canaries.records))
    return ServedJudgement(*judged)
