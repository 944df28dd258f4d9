"""Predict's outputs pinned per task kind (labels, masks, boxes), byte for byte, against golden files.

Written before predict's kind code moved to components/tasks/ (issue 68) and kept after: a move that changes a
row, a score's last digit, a mask, a box, the box CSV or a prediction log fails here. Each case runs predict on
data the suite has already (helpers_evaluator's hand-set models on "bands" and "segments") or builds once here
(16 demo box images of mixed sizes, letterboxed to 64 px by ExampleGen, and the box oracle with planted
faults: hashed scores, some under the floor, and false positives, so the floor and the label map are read),
with an explicit batch size (a memory-sized batch may change a float32 sum's last bit), then compares:
- predict.json as text, the run's paths replaced by names and the measured parts dropped (seconds, rows per
  second, the runner chosen);
- the SHA-256 of every other file (the prediction parts, rejects, masks, the box CSV, the logs).

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
from shardflow.core.manifest import read_manifest
from shardflow.core.model_info import ModelInfo, read_model_info, write_model_info
from shardflow.predict import PredictConfig, run
from shared_fixtures import build_once

GOLDEN = Path(__file__).parent / "golden" / "predict_outputs"
MEASURED = ("seconds", "rows_per_second", "runner")
TEXT = (".json", ".jsonl", ".csv")
STORED = 64  # the box examples' image side (letterboxed); the files are of mixed sizes


def _outputs(out: Path, names: dict[str, str]) -> dict[str, str]:
    """Every output file of the run as comparable text: predict.json normalised, the rest by SHA-256 (a text
    file's after `names` are replaced: a model's training examples are named by where the suite built them)."""
    found: dict[str, str] = {}
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        key, data = str(path.relative_to(out)).replace("/", "__"), path.read_bytes()
        if path.suffix in TEXT:
            text = data.decode()
            if path.name == "predict.json":
                summary = {k: v for k, v in json.loads(text).items() if k not in MEASURED}
                text = json.dumps(summary, indent=2, sort_keys=True) + "\n"
            for location, name in names.items():
                text = text.replace(location, name)
            data = text.encode()
        found[key] = (data.decode() if path.name == "predict.json" else hashlib.sha256(data).hexdigest() + "\n")
    return found


def _predict(folder: Path, case: str, model: Path, inputs: dict[str, Path], **options: Any) -> None:
    """Predict run in `folder` (the working directory) on relative names (links to the model and `inputs`, e.g.
    {"examples": path}), so the paths it writes into rows, logs and Parquet files are the same in every run."""
    for name, target in {"model": model, **inputs}.items():
        (folder / name).symlink_to(target)
    run(PredictConfig(model="model", output="preds", batch_size=4, **{k: k for k in inputs}, **options),
        echo=lambda _: None)
    raw = read_model_info(model).extra.get("raw_examples")
    compare_golden(GOLDEN / case, _outputs(folder / "preds", {raw: "<training_examples>"} if raw else {}))


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tmp_path, the working directory while the test runs."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_classification_outputs_are_unchanged(here: Path, bands: Path, models: dict) -> None:
    _predict(here, "classification", models["good"][0], {"examples": bands}, top_k=2, prediction_log=True)


def test_vocabulary_classification_parquet_outputs_are_unchanged(here: Path, bands: Path, models: dict) -> None:
    _predict(here, "classification_words_parquet", models["words"][0], {"examples": bands}, format="parquet")


def test_segmentation_outputs_are_unchanged(here: Path, segments: Path, models: dict) -> None:
    _predict(here, "segmentation", models["seg"][0], {"examples": segments}, prediction_log=True)


def _mixed_boxes(folder: Path) -> dict[str, Any]:
    from shardflow.demo_boxes import write_boxes
    from shardflow.example_gen import ExampleGenConfig, IndexSpec
    from shardflow.example_gen import run as example_gen

    data = folder / "boxes"
    write_boxes(data, count=16, mixed=True, seed=5)
    indexes = tuple(IndexSpec(str(data / f"{split}.csv"), split) for split in ("train", "eval"))
    example_gen(ExampleGenConfig(indexes=indexes, data_root=str(data), output=str(folder / "examples"),
                                 resize=(("*", (STORED, STORED)),), max_reject_fraction=0.2),  # gray ones: refused
                 echo=lambda _: None)
    files = sorted(p.relative_to(data).as_posix() for p in (data / "img").glob("*"))
    (folder / "new.csv").write_text("image\n" + "".join(f"{name}\n" for name in files) + "img/missing.jpg\n")
    return {"data": str(data), "examples": str(folder / "examples"), "index": str(folder / "new.csv")}


@pytest.fixture(scope="module")
def box_oracle(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The mixed box set, a new-files index of it (one missing), and the oracle with faults, its model info
    naming its input, training examples and their letterboxing (as the Trainer's export writes them)."""
    built = {k: Path(v) for k, v in build_once(tmp_path_factory, "predict-mixed-boxes", _mixed_boxes).items()}
    manifest = read_manifest(built["examples"])
    label_map = manifest.extra["boxes"]["label_map"]
    faults = OracleFaults(random_scores=True, jitter=0.05, extra_boxes=2)
    model = export_oracle(tmp_path_factory.mktemp("oracle") / "oracle", sorted(label_map, key=label_map.get),
                          faults=faults, image_size=(STORED, STORED))
    info = read_model_info(model)
    write_model_info(model, ModelInfo(info.task, info.label, info.num_classes, info.class_names, None, {
        **info.extra, "input": "image", "raw_examples": str(built["examples"]),
        "ingest_ops": manifest.extra["ingest_ops"]}))
    return {**built, "model": model}


def test_detection_outputs_on_examples_are_unchanged(here: Path, box_oracle: dict) -> None:
    _predict(here, "detection_examples", box_oracle["model"], {"examples": box_oracle["examples"]}, split="train",
             prediction_log=True)


def test_detection_outputs_on_new_files_are_unchanged(here: Path, box_oracle: dict) -> None:
    """Each file's boxes mapped back from its letterboxed example onto the file, in its own pixels; a floor of 0."""
    _predict(here, "detection_new_files", box_oracle["model"],
             {"index": box_oracle["index"], "data_root": box_oracle["data"]}, min_score=0.0)
