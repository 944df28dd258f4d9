"""The Evaluator on detectors: `shardflow evaluate` on a real box ExampleGen output and oracle detectors.

The examples: demo_boxes' shapes (96-px JPEG scenes, 0-5 objects of 3 classes) through ExampleGen, built once
per module. The models: tests/detection_oracle.py's oracle, which answers each example's own true boxes, perfect
or with a planted fault, so every figure below is known or recomputed independently with pycocotools.
"""
from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from detection_oracle import OracleFaults, export_oracle
from shardflow.cli import main as shardflow_main
from shardflow.core.box_schema import AREA, BBOX, CLASS_LABEL
from shardflow.core.detection_metrics import coco_boxes
from shardflow.core.manifest import read_manifest
from shardflow.core.reader import shard_files
from shardflow.demo_boxes import write_boxes
from shardflow.evaluator import ConfigError, EvaluatorConfig, run
from shardflow.tasks.detection.report import METRIC_NAMES

SIZE = 96


@pytest.fixture(scope="module")
def boxes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """ExampleGen's output of 200 demo box images (~40 in eval) and the label map's names in id order."""
    root = tmp_path_factory.mktemp("boxes")
    write_boxes(root / "data", count=200)
    out = root / "examples"
    code = shardflow_main(["example-gen", "--index", f"train={root / 'data' / 'train.csv'}",
                           "--index", f"eval={root / 'data' / 'eval.csv'}", "--data-root", str(root / "data"),
                           "--output", str(out)])
    assert code == 0
    label_map = json.loads((out / "manifest.json").read_text())["boxes"]["label_map"]
    return {"examples": out, "names": sorted(label_map, key=label_map.get), "root": root}


@pytest.fixture(scope="module")
def oracles(boxes: dict[str, object]) -> dict[str, Path]:
    faults = {"perfect": OracleFaults(), "swapped": OracleFaults(swap_axes=True),
              "pixel_off": OracleFaults(shift_pixels=1.0),
              "noisy": OracleFaults(random_scores=True, jitter=0.12, extra_boxes=2, drop_class=3)}
    root = boxes["root"] / "models"
    return {name: export_oracle(root / name, boxes["names"], faults=fault, image_size=(SIZE, SIZE))
            for name, fault in faults.items()}


def evaluate(tmp_path: Path, name: str, boxes: dict[str, object], model: Path, *flags: str) -> dict:
    output = tmp_path / name
    assert shardflow_main(["evaluate", "--model", str(model), "--examples", str(boxes["examples"]),
                           "--output", str(output), *flags]) == 0
    metrics = json.loads((output / "metrics.json").read_text())
    metrics["verdict"] = "BLESSED" if (output / "BLESSED").exists() else "NOT_BLESSED"
    assert (output / metrics["verdict"]).exists()
    return metrics


def eval_records(examples: Path) -> list[bytes]:
    manifest = read_manifest(examples)
    files = shard_files(str(examples), manifest, "eval")
    return [record.numpy() for record in tf.data.TFRecordDataset(files, compression_type=manifest.compression)]


def pycocotools_stats(records: list[bytes], model: Path) -> np.ndarray:
    """COCOeval's 12 numbers of the model's served detections, true boxes parsed here from the same records."""
    served = tf.saved_model.load(str(model)).signatures["serving_default"](examples=tf.constant(records))
    truth = {"images": [{"id": i, "height": SIZE, "width": SIZE} for i in range(len(records))],
             "categories": [{"id": k} for k in (1, 2, 3)], "annotations": []}
    detections = []
    for i, record in enumerate(records):
        feature = tf.train.Example.FromString(record).features.feature
        true_boxes = np.stack([feature[name].float_list.value for name in BBOX], axis=-1).reshape(-1, 4)
        coco = coco_boxes(true_boxes, SIZE, SIZE)
        areas = list(feature[AREA].float_list.value) or coco[:, 2] * coco[:, 3]  # COCO's `area`: ExampleGen's
        for box, label, area in zip(coco, feature[CLASS_LABEL].int64_list.value, areas):
            truth["annotations"].append({"id": len(truth["annotations"]) + 1, "image_id": i, "category_id": label,
                                         "bbox": box.tolist(), "area": float(area), "iscrowd": 0})
        count = int(served["num_detections"][i])
        boxes_px = coco_boxes(served["detection_boxes"][i, :count].numpy(), SIZE, SIZE)
        for box, score, label in zip(boxes_px, served["detection_scores"][i, :count].numpy(),
                                     served["detection_classes"][i, :count].numpy()):
            detections.append({"image_id": i, "category_id": int(label), "bbox": box.tolist(), "score": float(score)})
    with contextlib.redirect_stdout(io.StringIO()):
        reference = COCO()
        reference.dataset = truth
        reference.createIndex()
        evaluation = COCOeval(reference, reference.loadRes(detections), "bbox")
        evaluation.evaluate()
        evaluation.accumulate()
        evaluation.summarize()
    return evaluation.stats


def test_a_perfect_detector_scores_ap_1_and_is_blessed(tmp_path: Path, boxes: dict, oracles: dict) -> None:
    metrics = evaluate(tmp_path, "perfect", boxes, oracles["perfect"], "--threshold", "ap50>=0.6",
                       "--bootstrap-resamples", "200")
    assert metrics["task"] == "detection" and metrics["verdict"] == "BLESSED"
    assert metrics["num_examples"] == read_manifest(boxes["examples"]).splits["eval"].num_examples
    assert metrics["num_boxes"] > metrics["num_examples"]
    overall = metrics["overall"]
    assert list(overall) == list(METRIC_NAMES)
    assert overall["ap_large"] is None and overall["ar_large"] is None  # no object of 96² px in 96-px images
    for name in ("ap", "ap50", "ap75", "ar100", "ap_small", "ap_medium"):
        assert overall[name] == pytest.approx(1.0, abs=1e-6), name
    assert set(metrics["ap_per_class"]) == set(boxes["names"])
    assert metrics["intervals"]["candidate"]["ap_large"] == [None, None]
    for plot in ("detections.png", "precision_recall.png"):
        with Image.open(tmp_path / "perfect" / plot) as image:
            assert image.format == "PNG" and np.asarray(image.convert("L")).std() > 10, plot
    canaries = np.load(tmp_path / "perfect" / "canary_predictions.npy")
    assert canaries.shape[1:] == (100, 6) and set(np.unique(canaries[..., 4])) <= {0.0, 1.0}


def test_equals_pycocotools_on_the_served_detections(tmp_path: Path, boxes: dict, oracles: dict) -> None:
    """Random scores (with ties), jittered boxes, false positives and a class never answered."""
    metrics = evaluate(tmp_path, "noisy", boxes, oracles["noisy"], "--gate", "point", "--bootstrap-resamples", "0")
    reference = pycocotools_stats(eval_records(boxes["examples"]), oracles["noisy"])
    ours = np.array([-1.0 if metrics["overall"][name] is None else metrics["overall"][name] for name in METRIC_NAMES])
    np.testing.assert_allclose(ours, reference, rtol=0, atol=1e-6)
    # The dropped class is named only by the hashed false positives, which may land on one of its boxes by chance.
    assert 0.05 < metrics["overall"]["ap"] < 0.9 and metrics["ap_per_class"][boxes["names"][2]] < 0.01


@pytest.mark.parametrize("planted", ["swapped", "pixel_off"])
def test_a_planted_convention_mistake_is_caught(tmp_path: Path, boxes: dict, oracles: dict, planted: str) -> None:
    threshold = "ap50>=0.6" if planted == "swapped" else "ap>=0.9"  # a pixel moves IoU near 0.9 on small shapes
    metrics = evaluate(tmp_path, planted, boxes, oracles[planted], "--threshold", threshold,
                       "--bootstrap-resamples", "200")
    assert metrics["verdict"] == "NOT_BLESSED"
    assert metrics["overall"]["ap"] < 0.9


def test_the_gate_against_a_baseline_is_paired(tmp_path: Path, boxes: dict, oracles: dict) -> None:
    same = evaluate(tmp_path, "same", boxes, oracles["perfect"], "--baseline", str(oracles["perfect"]),
                    "--threshold", "ap50>=0.6", "--max-regression", "ap_large=0.01", "--bootstrap-resamples", "200")
    assert same["verdict"] == "BLESSED"
    assert same["intervals"]["delta"]["ap"] == [0.0, 0.0] and same["deltas"]["overall"]["ap_large"] is None
    skipped = [c for c in json.loads((tmp_path / "same" / "blessing.json").read_text())["checks"]
               if c["metric"] == "ap_large"]
    assert skipped[0]["passed"] is None and "undefined for both" in skipped[0]["reason"]
    worse = evaluate(tmp_path, "worse", boxes, oracles["noisy"], "--baseline", str(oracles["perfect"]),
                     "--threshold", "ap50>=0.1", "--bootstrap-resamples", "200")
    assert worse["verdict"] == "NOT_BLESSED" and worse["intervals"]["delta"]["ap50"][1] < 0
    reasons = (tmp_path / "worse" / "NOT_BLESSED").read_text()
    assert "ap50 is" in reasons and "worse than the baseline" in reasons


def test_a_metric_the_detection_task_lacks_is_one_line(tmp_path: Path, boxes: dict, oracles: dict,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    code = shardflow_main(["evaluate", "--model", str(oracles["perfect"]), "--examples", str(boxes["examples"]),
                           "--output", str(tmp_path / "e"), "--threshold", "accuracy>=0.9"])
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2 and "'accuracy' is not a detection metric" in line and "ap50" in line
    with pytest.raises(ConfigError, match="not a value column"):
        run(EvaluatorConfig(model=str(oracles["perfect"]), examples=str(boxes["examples"]),
                            output=str(tmp_path / "s"), slice_by=(BBOX[0],)), echo=lambda _: None)


def test_crowd_flags_are_parsed_with_the_true_boxes(boxes: dict) -> None:
    """The scorer reads `is_crowd` beside each example's boxes (with the reader's spec of a box ExampleGen
    output); an empty list means no crowds."""
    from detection_oracle import box_example
    from shardflow.core.box_schema import IS_CROWD
    from shardflow.tasks.detection.scoring import true_box_parser

    crowded = tf.train.Example.FromString(box_example([[0, 0, .5, .5], [.5, .5, 1, 1]], [1, 2]))
    crowded.features.feature[IS_CROWD].int64_list.value[:] = [0, 1]
    bare = tf.train.Example.FromString(box_example([[.1, .1, .2, .2]], [3]))
    del bare.features.feature[IS_CROWD]
    records = [crowded.SerializeToString(), box_example([], []), bare.SerializeToString()]
    found, labels, crowd, _ = true_box_parser(read_manifest(boxes["examples"]))(tf.constant(records))
    assert [len(b) for b in found] == [2, 0, 1] and labels[0].tolist() == [1, 2]
    assert [flags.tolist() for flags in crowd] == [[False, True], [], [False]]
