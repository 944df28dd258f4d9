"""A detector served: the infra check holds both signatures to the contract, predict writes boxes a person can fix.

One small demo box set per module (40 images of 96 px, stored resized to 64x64 JPEGs, so an image's file and
its stored example differ in size) through ExampleGen, and the oracle detector (tests/detection_oracle.py),
which answers each example's true boxes on `serving_default` and, for the canaries' exact image bytes, on
`serving_image`. The Evaluator scores it and keeps its canaries, which the infra check replays. Planted
faults: an oracle told of fewer classes than the data has (its answers leave the label map), and one whose
`serving_image` knows no image (it answers no box where `serving_default` answers the truth).
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from detection_oracle import export_oracle, renumbered_examples
from shardflow.cli import main as shardflow_main
from shardflow.core.box_schema import BBOX, CLASS_LABEL, DETECTION_TASK, MAX_DETECTIONS, BOX_TARGET
from shardflow.core.errors import ConfigError
from shardflow.core.manifest import read_manifest
from shardflow.core.model_info import ModelInfo, read_model_info, write_model_info
from shardflow.core.reader import shard_files
from shardflow.demo_boxes import write_boxes
from shardflow.evaluator import EvaluatorConfig
from shardflow.evaluator import run as evaluate
from shardflow.example_gen import ExampleGenConfig, IndexSpec
from shardflow.predict.config import DEFAULT_MIN_SCORE
from shardflow.example_gen import run as example_gen
from shardflow.example_gen.box_index import read_box_csv
from shardflow.infra_validator import InfraValidatorConfig
from shardflow.infra_validator import run as infra_validate
from shardflow.predict import PredictConfig

QUIET = {"echo": lambda _: None}
STORED = 64  # the examples' image side (--resize); the files are 96 px
CHEAP = {"batch_sizes": (1, 4), "latency_calls": 3, "latency_seconds": 0.5, "warmup_requests": 8}


@pytest.fixture(scope="module")
def box_set(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("detection_serving")
    data = root / "boxes"
    write_boxes(data, count=40)
    indexes = tuple(IndexSpec(str(data / f"{split}.csv"), split) for split in ("train", "eval"))
    example_gen(ExampleGenConfig(indexes=indexes, data_root=str(data), output=str(root / "examples"),
                                 resize=(("*", (STORED, STORED)),), storage=(("*", "jpeg"),)), **QUIET)
    examples = root / "examples"
    manifest = read_manifest(examples)
    label_map = manifest.extra["boxes"]["label_map"]
    files = shard_files(examples, manifest, "eval")
    records = [r.numpy() for r in tf.data.TFRecordDataset(files, compression_type=manifest.compression)]
    return {"root": root, "data": data, "examples": examples, "records": records,
            "names": sorted(label_map, key=label_map.__getitem__)}


def _image(record: bytes) -> bytes:
    return tf.train.Example.FromString(record).features.feature["image"].bytes_list.value[0]


def _oracle(box_set: dict, name: str, class_names: list[str], knows_images: bool = True) -> Path:
    """The oracle, its model info naming its input image and training examples (as the Trainer's export does)."""
    known = {_image(record): record for record in box_set["records"]} if knows_images else None
    model = export_oracle(box_set["root"] / name, class_names, known_images=known)
    info = read_model_info(model)
    write_model_info(model, ModelInfo(info.task, info.label, info.num_classes, info.class_names, None,
                                      {**info.extra, "input": "image", "raw_examples": str(box_set["examples"])}))
    return model


@pytest.fixture(scope="module")
def oracle(box_set: dict) -> Path:
    return _oracle(box_set, "oracle", box_set["names"])


@pytest.fixture(scope="module")
def evaluation(box_set: dict, oracle: Path) -> Path:
    output = box_set["root"] / "eval"
    assert evaluate(EvaluatorConfig(model=str(oracle), examples=str(box_set["examples"]), output=str(output),
                                    thresholds=("ap50>=0.99",)), **QUIET).blessing.blessed
    return output


def _true_boxes(record: bytes) -> tuple[np.ndarray, list[int]]:
    features = tf.train.Example.FromString(record).features.feature
    boxes = np.stack([np.array(features[name].float_list.value, np.float32) for name in BBOX], axis=-1)
    return boxes.reshape(-1, 4), list(features[CLASS_LABEL].int64_list.value)


def _check(box_set: dict, model: Path, evaluation: Path, name: str) -> dict:
    result = infra_validate(InfraValidatorConfig(model=str(model), evaluation=str(evaluation),
                                                 output=str(box_set["root"] / name), **CHEAP), **QUIET)
    return {"blessed": result.blessed, "reasons": result.reasons,
            "report": json.loads((box_set["root"] / name / "infra_validation.json").read_text())}


def test_the_infra_check_blesses_a_detector_whose_two_signatures_keep_the_contract(box_set, oracle, evaluation):
    checked = _check(box_set, oracle, evaluation, "infra")
    assert checked["blessed"], checked["reasons"]
    assert checked["report"]["signatures"] == ["serving_default", "serving_image"]
    assert checked["report"]["max_abs_diff"] == {"serving_image": 0.0}  # the same boxes, exactly
    assert (box_set["root"] / "infra" / "INFRA_BLESSED").is_file()
    assert any(f"on {len(box_set['records'])} canaries" in line for line in checked["reasons"])
    assert any(f"one pixel of the {STORED}x{STORED} image" in line for line in checked["reasons"])


def test_classes_outside_the_label_map_fail_the_check_in_one_line_naming_the_canary(box_set, oracle, evaluation):
    """Told of two classes, the oracle still answers the third's boxes: the first canary with one is named."""
    bad = _oracle(box_set, "two_classes", box_set["names"][:2])
    checked = _check(box_set, bad, evaluation, "infra_two_classes")
    labels = [_true_boxes(record)[1] for record in box_set["records"]]
    canary = next(i for i, ids in enumerate(labels) if 3 in ids)
    detection = labels[canary].index(3)  # every score is 1.0: the oracle keeps the stored order
    assert not checked["blessed"]
    assert checked["reasons"] == [f"{signature}: canary {canary}: detection {detection}: class 3 is not in the "
                                  f"label map (ids [1, 2])" for signature in ("serving_default", "serving_image")]
    assert (box_set["root"] / "infra_two_classes" / "INFRA_NOT_BLESSED").read_text().splitlines() == checked["reasons"]


def test_a_serving_image_that_finds_other_boxes_than_serving_default_fails_the_check(box_set, evaluation):
    blind = _oracle(box_set, "blind", box_set["names"], knows_images=False)
    checked = _check(box_set, blind, evaluation, "infra_blind")
    canary = next(i for i, record in enumerate(box_set["records"]) if _true_boxes(record)[1])
    boxes, labels = _true_boxes(box_set["records"][canary])
    box = ", ".join(f"{v:.4g}" for v in boxes[0])
    assert not checked["blessed"]
    assert checked["reasons"] == [f"canary {canary}: serving_image has no class {labels[0]} box within "
                                  f"{1 / STORED:.3g} of serving_default's [{box}] (score 1.000)"]


def _lines(output: Path) -> list[dict]:
    return [json.loads(line) for part in sorted((output / "predictions").glob("part-*.jsonl"))
            for line in part.read_text().splitlines()]


def _index_boxes(path: Path) -> dict[str, list[tuple[str, tuple[float, ...]]]]:
    """An index's boxes per image, read by ExampleGen's own reader (rejects must be none)."""
    index = read_box_csv(str(path))
    assert list(index.rejects) == [] and index.units == "normalized"
    return {image.path: sorted((name, tuple(np.round([b.ymin, b.xmin, b.ymax, b.xmax], 5)))
                               for name, b in zip(image.classes, image.boxes)) for image in index.images}


def test_predict_writes_each_examples_boxes_and_a_box_csv_that_example_gen_reads_back(box_set, oracle):
    """Predict on the eval examples: the oracle's boxes are the truth, so the box CSV is the eval index again."""
    output = box_set["root"] / "predicted"
    assert shardflow_main(["predict", "--model", str(oracle), "--examples", str(box_set["examples"]),
                           "--output", str(output)]) == 0
    lines = _lines(output)
    assert len(lines) == len(box_set["records"])
    for line, record in zip(lines, box_set["records"]):
        boxes, labels = _true_boxes(record)
        assert line["image_size"] == [STORED, STORED]
        assert [b["label_id"] for b in line["boxes"]] == labels
        assert [b["class_name"] for b in line["boxes"]] == [box_set["names"][i - 1] for i in labels]
        np.testing.assert_allclose([b["box"] for b in line["boxes"]] or np.zeros((0, 4)), boxes, atol=1e-6)
        np.testing.assert_allclose([b["pixels"] for b in line["boxes"]] or np.zeros((0, 4)), boxes * STORED,
                                   atol=0.01)
    summary = json.loads((output / "predict.json").read_text())
    assert summary["boxes"] == sum(len(line["boxes"]) for line in lines)
    assert summary["min_score"] == DEFAULT_MIN_SCORE == 0.3
    assert _index_boxes(output / "boxes.csv") == _index_boxes(box_set["data"] / "eval.csv")


def test_a_pushed_version_holds_the_label_map_predict_names_classes_by(box_set):
    """A detector serving COCO's kind of ids (3, 7, 12): Push copies its label_map.pbtxt into the version, and
    predict on that version names each served id's class from it."""
    from shardflow.core.box_schema import LabelMap
    from shardflow.core.label_map_file import LABEL_MAP_NAME, read_label_map
    from shardflow.pusher import push_model

    ids = {1: 3, 2: 7, 3: 12}
    examples = renumbered_examples(box_set["examples"], box_set["root"] / "coco_ids", ids)
    coco_map = {name: ids[i] for i, name in enumerate(box_set["names"], start=1)}
    model = export_oracle(box_set["root"] / "coco_oracle", box_set["names"], label_map=coco_map)
    version, served = push_model(str(model), str(box_set["root"] / "serving"), gated_against=None)
    assert (Path(served) / LABEL_MAP_NAME).read_bytes() == (model / LABEL_MAP_NAME).read_bytes()
    assert read_label_map(Path(served) / LABEL_MAP_NAME) == LabelMap(coco_map)
    output = box_set["root"] / "predicted_coco"
    assert shardflow_main(["predict", "--model", served, "--examples", str(examples), "--output", str(output)]) == 0
    names = {i: name for name, i in coco_map.items()}
    lines = _lines(output)
    assert sum(len(line["boxes"]) for line in lines) > 0
    for line, record in zip(lines, box_set["records"]):
        labels = [ids[i] for i in _true_boxes(record)[1]]
        assert [(b["label_id"], b["class_name"]) for b in line["boxes"]] == [(i, names[i]) for i in labels]


class _FixedBoxes(tf.Module):
    """A detector answering two boxes for any example: one at 0.9 and one at 0.2 (under predict's floor)."""

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(self, examples: tf.Tensor) -> dict[str, tf.Tensor]:
        count = tf.shape(examples)[0]
        rows = tf.constant([[0.25, 0.125, 0.75, 0.5], [0.1, 0.1, 0.2, 0.3]] + [[0.0] * 4] * (MAX_DETECTIONS - 2))
        scores = tf.constant([0.9, 0.2] + [0.0] * (MAX_DETECTIONS - 2))
        classes = tf.constant([1.0, 2.0] + [0.0] * (MAX_DETECTIONS - 2))
        return {"detection_boxes": tf.tile(rows[None], [count, 1, 1]),
                "detection_scores": tf.tile(scores[None], [count, 1]),
                "detection_classes": tf.tile(classes[None], [count, 1]),
                "num_detections": tf.fill([count], 2.0)}


def test_predict_on_new_files_tells_boxes_in_each_files_own_pixels_above_the_score_floor(box_set, tmp_path):
    module = _FixedBoxes()
    model = tmp_path / "fixed"
    tf.saved_model.save(module, str(model), signatures={"serving_default": module.serve})
    write_model_info(model, ModelInfo(DETECTION_TASK, BOX_TARGET, 2, box_set["names"][:2], None,
                                      {"input": "image", "raw_examples": str(box_set["examples"])}))
    files = sorted(p.relative_to(box_set["data"]).as_posix() for p in (box_set["data"] / "img").glob("*.jpg"))[:5]
    index = tmp_path / "new.csv"
    index.write_text("image\n" + "".join(f"{name}\n" for name in files) + "img/missing.jpg\n")
    output = tmp_path / "predicted"
    assert shardflow_main(["predict", "--model", str(model), "--index", str(index), "--data-root",
                           str(box_set["data"]), "--output", str(output)]) == 0
    lines = sorted(_lines(output), key=lambda line: line["row"])
    assert [line["path"] for line in lines] == files  # the missing file is a reject, not a row
    assert json.loads((output / "predict.json").read_text())["rejected"] == 1
    for line in lines:  # the files are 96 px: their pixels, not the stored 64's
        assert line["image_size"] == [96, 96]
        assert line["boxes"] == [{"class_name": box_set["names"][0], "label_id": 1, "score": 0.9,
                                  "box": [0.25, 0.125, 0.75, 0.5], "pixels": [24.0, 12.0, 72.0, 48.0]}]
    with open(output / "boxes.csv", newline="") as file:
        assert list(csv.reader(file)) == [[name, box_set["names"][0], "0.125", "0.25", "", "", "0.5", "0.75", "", ""]
                                          for name in files]
    assert set(_index_boxes(output / "boxes.csv")) == set(files)


def test_a_score_floor_outside_zero_to_one_is_refused_naming_it():
    with pytest.raises(ConfigError, match="min_score must be a number from 0 to 1"):
        PredictConfig(model="m", output="o", examples="e", min_score=1.5)
