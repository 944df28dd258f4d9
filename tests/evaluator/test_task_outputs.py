"""The Evaluator's outputs pinned per task kind (labels, masks, boxes), byte for byte, against golden files.

Written before the task code moved to components/tasks/ (issue 68) and kept after: a move that changes a
metric, a key's order, a plot or a canary fails here. Each case runs the Evaluator on data the suite has
already (helpers_evaluator's hand-set models on "bands" and "segments", the box oracle on `box_examples`)
with a baseline, slices and a small bootstrap, then compares:
- metrics.json and blessing.json as text, after the run's own paths are replaced by names and the measured
  parts (timing, batching, the seconds of intervals and label issues) are dropped — floats exactly as printed;
- the verdict marker's text; the SHA-256 of every other output (plots, label issues, canaries).

Regenerate (only for an intended change, and say why in the commit): SHARDFLOW_WRITE_GOLDEN=1 pytest this file.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from detection_oracle import OracleFaults, export_oracle
from helpers_evaluator import bands, models, segments  # noqa: F401
from helpers_golden import compare_golden
from shardflow.evaluator import EvaluatorConfig, Regression, Threshold, run

GOLDEN = Path(__file__).parent / "golden" / "task_outputs"
MEASURED = ("timing", "batching")  # seconds and bytes measured on this machine
TEXT = ("metrics.json", "blessing.json")
MARKERS = ("BLESSED", "NOT_BLESSED")


def _drop_measured(metrics: dict[str, Any]) -> dict[str, Any]:
    kept = {key: value for key, value in metrics.items() if key not in MEASURED}
    for part in ("intervals", "label_issues"):
        if isinstance(kept.get(part), dict) and "seconds" in kept[part]:
            kept[part] = {**kept[part], "seconds": "<measured>"}
    return kept


def _outputs(out: Path, names: dict[str, str]) -> dict[str, str]:
    """Every output file of the run as comparable text: JSON normalised, the rest by SHA-256."""
    found: dict[str, str] = {}
    for path in sorted(out.iterdir()):
        data = path.read_bytes()
        if path.name in TEXT:
            loaded = json.loads(data)
            text = json.dumps(_drop_measured(loaded) if path.name == "metrics.json" else loaded, indent=2)
            for location, name in names.items():
                text = text.replace(location, name)
            found[path.name] = text + "\n"
        elif path.name in MARKERS:
            found[path.name] = data.decode()
        else:
            found[path.name] = hashlib.sha256(data).hexdigest() + "\n"
    return found


def _compare(case: str, out: Path, names: dict[str, str]) -> None:
    compare_golden(GOLDEN / case, _outputs(out, names))


def _evaluate(tmp_path: Path, model: Path, baseline: Path, examples: Path, **options: Any) -> tuple[Path, dict]:
    out = tmp_path / "eout"
    run(EvaluatorConfig(model=str(model), examples=str(examples), output=str(out), baseline=str(baseline),
                        batch_size=16, bootstrap_resamples=200, bootstrap_seed=3, **options), echo=lambda _: None)
    names = {str(model): "<model>", str(baseline): "<baseline>", str(examples): "<examples>", str(out): "<output>"}
    return out, names


def test_classification_outputs_are_unchanged(tmp_path: Path, bands: Path, models: dict) -> None:
    out, names = _evaluate(tmp_path, models["good"][0], models["weak"][0], bands, slice_by=("site", "fold"),
                           thresholds=(Threshold.parse("accuracy>=0.5"), Threshold.parse("ece<=0.5")),
                           max_regressions=(Regression.parse("log_loss=0.2"),))
    _compare("classification", out, names)


def test_string_label_outputs_are_unchanged(tmp_path: Path, bands: Path, models: dict) -> None:
    """The OOV class of a vocabulary (hidden from the tables) and a calibration without a baseline gate."""
    out, names = _evaluate(tmp_path, models["words"][0], models["words"][0], bands, slice_by=("site",),
                           thresholds=(Threshold.parse("macro_f1>=0.99"),))
    _compare("classification_words", out, names)


def test_segmentation_outputs_are_unchanged(tmp_path: Path, segments: Path, models: dict) -> None:
    out, names = _evaluate(tmp_path, models["seg"][0], models["seg"][0], segments, slice_by=("site",),
                           thresholds=(Threshold.parse("mean_iou>=0.5"),))
    _compare("segmentation", out, names)


@pytest.fixture(scope="module")
def box_oracles(box_examples: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    label_map = json.loads((box_examples / "manifest.json").read_text())["boxes"]["label_map"]
    class_names = sorted(label_map, key=label_map.get)
    root = tmp_path_factory.mktemp("oracles")
    faults = {"good": OracleFaults(random_scores=True, jitter=0.05, extra_boxes=1),
              "noisy": OracleFaults(random_scores=True, jitter=0.12, extra_boxes=2, drop_class=3)}
    return {name: export_oracle(root / name, class_names, faults=fault, image_size=(96, 96))
            for name, fault in faults.items()}


def test_detection_outputs_are_unchanged(tmp_path: Path, box_examples: Path, box_oracles: dict) -> None:
    out, names = _evaluate(tmp_path, box_oracles["good"], box_oracles["noisy"], box_examples,
                           thresholds=(Threshold.parse("ap50>=0.3"), Threshold.parse("ap_small>=0.1")),
                           max_regressions=(Regression.parse("ap=0.05"),))
    _compare("detection", out, names)
