"""Infra validation's outputs pinned per task kind (labels, masks, boxes) against golden files.

Written before the kind's checks moved out of components/infra_validator/ into components/tasks/ (issue 68)
and kept after: a move that changes a reason, a key, a judged difference or the warm-up file fails here. Each
case infra-validates a model against an evaluation the suite already builds (helpers_evaluator's hand-set
models on "bands" and "segments"; the box oracle on `box_examples`), blessed and refused, then compares:
- infra_validation.json as text, the run's paths replaced by names and the measured parts dropped (load and
  first-call times, latency, the probe's seconds and interpreter, the report's seconds; the load time in the
  first reason line; the activation bytes measured per example);
- the verdict marker's text, so normalised; the SHA-256 of the warm-up file (the canaries as requests).
Beside them, the check of the evaluation's canary files each kind needs, by its one-line refusal.

Regenerate (only for an intended change, and say why in the commit): SHARDFLOW_WRITE_GOLDEN=1 pytest this file.
"""
from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import tensorflow as tf

from detection_oracle import export_oracle
from helpers_evaluator import bands, models, segments  # noqa: F401
from helpers_golden import compare_golden
from shardflow.core.errors import ConfigError
from shardflow.core.manifest import read_manifest
from shardflow.core.model_info import ModelInfo, read_model_info, write_model_info
from shardflow.core.reader import shard_files
from shardflow.evaluator import EvaluatorConfig, Threshold
from shardflow.evaluator import run as evaluate
from shardflow.infra_validator import InfraValidatorConfig
from shardflow.infra_validator import run as infra_validate
from shardflow.infra_validator.canaries import image_bytes

GOLDEN = Path(__file__).parent / "golden" / "infra_outputs"
QUIET = {"echo": lambda _: None}
CHEAP = {"batch_sizes": (1, 4), "latency_calls": 3, "latency_seconds": 0.5, "warmup_requests": 8}
MEASURED = ("load_seconds", "first_call_ms", "example_bytes", "latency", "seconds")
MEASURED_PROBE = ("seconds", "started_ahead", "command", "modules")  # modules: one has a generated name
LOAD_TIME = re.compile(r"(loads in a TensorFlow-only process in )[0-9.]+( s)")


def _normalised(text: str, names: dict[str, str]) -> str:
    for location, name in sorted(names.items(), key=lambda item: -len(item[0])):
        text = text.replace(location, name)
    return LOAD_TIME.sub(r"\1<measured>\2", text)


def _outputs(out: Path, names: dict[str, str]) -> dict[str, str]:
    """Every output of the run as comparable text: the report normalised, the marker's text, the rest by SHA-256."""
    found: dict[str, str] = {}
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        key, data = str(path.relative_to(out)).replace("/", "__"), path.read_bytes()
        if path.name == "infra_validation.json":
            report = {k: v for k, v in json.loads(data).items() if k not in MEASURED}
            report["probe"] = {k: v for k, v in report["probe"].items() if k not in MEASURED_PROBE}
            found[key] = _normalised(json.dumps(report, indent=2), names) + "\n"
        elif path.name.startswith("INFRA_"):
            found[key] = _normalised(data.decode(), names)
        else:
            found[key] = hashlib.sha256(data).hexdigest() + "\n"
    return found


def _compare(case: str, out: Path, names: dict[str, str]) -> None:
    compare_golden(GOLDEN / case, _outputs(out, names))


def _infra(tmp_path: Path, case: str, model: Path, evaluation: Path) -> None:
    out = tmp_path / case
    infra_validate(InfraValidatorConfig(model=str(model), evaluation=str(evaluation), output=str(out), **CHEAP),
                   **QUIET)
    evaluated = json.loads((evaluation / "metrics.json").read_text())["model"]
    names = {evaluated: "<evaluated model>", str(model): "<model>", str(evaluation): "<evaluation>",
             str(out): "<output>"}
    _compare(case, out, names)


def _evaluated(tmp_path: Path, model: Path, examples: Path, threshold: str) -> Path:
    out = tmp_path / "eval"
    evaluate(EvaluatorConfig(model=str(model), examples=str(examples), output=str(out), batch_size=16,
                             thresholds=(Threshold.parse(threshold),)), **QUIET)
    return out


@pytest.fixture(scope="module")
def label_evaluation(bands: Path, models: dict, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _evaluated(tmp_path_factory.mktemp("labels"), models["good"][0], bands, "accuracy>=0")


def test_a_label_models_outputs_are_unchanged(tmp_path: Path, models: dict, label_evaluation: Path) -> None:
    _infra(tmp_path, "classification", models["good"][0], label_evaluation)


def test_a_label_model_that_answers_otherwise_is_refused_as_before(tmp_path: Path, models: dict,
                                                                   label_evaluation: Path) -> None:
    """The weak model's probabilities against the good one's evaluation: the difference and its canary."""
    _infra(tmp_path, "classification_differs", models["weak"][0], label_evaluation)


def test_a_mask_models_outputs_are_unchanged(tmp_path: Path, segments: Path, models: dict) -> None:
    evaluation = _evaluated(tmp_path, models["seg"][0], segments, "mean_iou>=0")
    _infra(tmp_path, "segmentation", models["seg"][0], evaluation)


@pytest.fixture(scope="module")
def box_case(box_examples: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("boxes")
    manifest = read_manifest(box_examples)
    label_map = manifest.extra["boxes"]["label_map"]
    files = shard_files(box_examples, manifest, "eval")
    records = [r.numpy() for r in tf.data.TFRecordDataset(files, compression_type=manifest.compression)]
    known = dict(zip(image_bytes(records, manifest.features["image"]), records))  # what serving_image is sent
    return {"root": root, "examples": box_examples, "known": known,
            "names": sorted(label_map, key=label_map.__getitem__)}


def _oracle(case: dict[str, Any], name: str, class_names: list[str], knows_images: bool = True) -> Path:
    """The oracle, its model info naming its input image (as the Trainer's export does)."""
    model = export_oracle(case["root"] / name, class_names, known_images=case["known"] if knows_images else None)
    info = read_model_info(model)
    write_model_info(model, ModelInfo(info.task, info.label, info.num_classes, info.class_names, None,
                                      {**info.extra, "input": "image"}))
    return model


@pytest.fixture(scope="module")
def box_evaluation(box_case: dict[str, Any]) -> tuple[Path, Path]:
    oracle = _oracle(box_case, "oracle", box_case["names"])
    return oracle, _evaluated(box_case["root"], oracle, box_case["examples"], "ap50>=0")


def test_a_detectors_outputs_are_unchanged(tmp_path: Path, box_evaluation: tuple[Path, Path]) -> None:
    _infra(tmp_path, "detection", *box_evaluation)


@pytest.mark.parametrize("case", ["detection_label_map", "detection_disagrees"])
def test_a_detector_breaking_the_contract_or_disagreeing_is_refused_as_before(
        tmp_path: Path, box_case: dict[str, Any], box_evaluation: tuple[Path, Path], case: str) -> None:
    """Classes outside the label map (told of two classes, it answers the third's boxes); a serving_image that
    finds other boxes than serving_default (it knows no image)."""
    names = box_case["names"]
    model = (_oracle(box_case, "two", names[:2]) if case == "detection_label_map"
             else _oracle(box_case, "blind", names, knows_images=False))
    _infra(tmp_path, case, model, box_evaluation[1])


def test_each_kind_needs_the_canary_files_it_is_judged_by(tmp_path: Path, models: dict, label_evaluation: Path,
                                                          box_evaluation: tuple[Path, Path]) -> None:
    """Labels and masks are judged against the Evaluator's probabilities, a detector against its contract."""
    cases = {"labels": (models["good"][0], label_evaluation), "boxes": box_evaluation}
    refused = {}
    for name, (model, evaluation) in cases.items():
        copy = shutil.copytree(evaluation, tmp_path / name)
        (copy / "canary_predictions.npy").unlink()
        config = InfraValidatorConfig(model=str(model), evaluation=str(copy), output=str(tmp_path / f"{name}-out"))
        try:
            config.check_inputs()
            refused[name] = None
        except ConfigError as err:
            refused[name] = str(err).replace(str(copy), "<evaluation>")
    assert refused == {"labels": "evaluation '<evaluation>' has no canary_predictions.npy: evaluate the model "
                                 "again with this version of shardflow", "boxes": None}
