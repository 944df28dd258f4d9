"""`shardflow predict`'s other inputs and outputs: a serving dir or its CURRENT.json as the model, Parquet
and PredictionLog, --examples input, and segmentation masks.

"bands" (tests/helpers_predict.py) is the classification set shared with test_predict.py; "segments"
(16x16 gray images, the `threshold_model`: each pixel's class is its brightness band) goes through
ExampleGen once per module. The expected predictions never go through predict's code: the SavedModel
is loaded with `tf.saved_model.load` and its `serving_default` called directly.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import tensorflow as tf
from PIL import Image

from helpers_images import read_pixels, write_csv, write_png
from helpers_models import export_model, threshold_model
from helpers_predict import NEW_ROWS, QUIET, assert_same_table, bands, bands_run  # noqa: F401
from helpers_predict import ingest as _ingest
from helpers_predict import serving_default as _serving_default
from helpers_predict import table as _table
from shardflow.cli import main as shardflow_main
from shardflow.core.model_info import ModelInfo
from shardflow.predict import PredictConfig, run
from shardflow.pusher import push_model


def test_a_serving_dir_or_its_current_json_names_the_model_parquet_and_prediction_log(
        bands: dict[str, Path], bands_run: tuple[dict, Path], tmp_path: Path) -> None:
    serving = tmp_path / "serving"
    push_model(str(bands["model"]), str(serving), gated_against="none")  # into an empty serving directory
    base = ["predict", "--index", str(bands["index"]), "--data-root", str(bands["root"]), "--top-k", "2"]
    assert shardflow_main([*base, "--model", str(serving), "--output", str(tmp_path / "a")]) == 0
    assert shardflow_main([*base, "--model", str(serving / "CURRENT.json"), "--output", str(tmp_path / "b"),
                           "--format", "parquet", "--prediction-log", "--batch-size", "4"]) == 0
    summary = json.loads((tmp_path / "b" / "predict.json").read_text())
    assert summary["model"] == str(serving / "1" / "model" / "1") and summary["model_reference"] == str(serving / "CURRENT.json")
    csv_rows = sorted(_table(tmp_path / "a"), key=lambda r: int(r["row"]))
    assert_same_table(csv_rows, _table(bands_run[1]))
    parquet = pq.read_table(tmp_path / "b" / "predictions").to_pylist()
    assert sorted(r["row"] for r in parquet) == [int(r["row"]) for r in csv_rows]
    by_row = {int(r["row"]): r for r in csv_rows}
    for row in parquet:
        assert row["class_id"] == int(by_row[row["row"]]["class_id"]) and row["path"] == by_row[row["row"]]["path"]
        assert row["top_k_scores"] == pytest.approx(json.loads(by_row[row["row"]]["top_k_scores"]), abs=1e-6)
    from tensorflow_serving.apis import prediction_log_pb2

    logs = [prediction_log_pb2.PredictionLog.FromString(r.numpy())
            for r in tf.data.TFRecordDataset(sorted(map(str, (tmp_path / "b" / "prediction_log").glob("*.tfrecord"))))]
    assert len(logs) == NEW_ROWS
    for log in logs:
        example = tf.make_ndarray(log.predict_log.request.inputs["examples"])[0]
        expected = _serving_default_on_records(bands["model"], [example])
        got = tf.make_ndarray(log.predict_log.response.outputs["probabilities"])
        np.testing.assert_allclose(got, expected["probabilities"], atol=1e-5)


def _serving_default_on_records(model: Path, records: list[bytes]) -> dict[str, np.ndarray]:
    outputs = tf.saved_model.load(str(model)).signatures["serving_default"](examples=tf.constant(records))
    return {k: v.numpy() for k, v in outputs.items()}


def test_examples_input_predicts_every_record_of_the_split(bands: dict[str, Path], tmp_path: Path) -> None:
    summary = run(PredictConfig(model=str(bands["model"]), output=str(tmp_path / "p"), examples=str(bands["examples"]),
                                split="train"), **QUIET)
    manifest = json.loads((bands["examples"] / "manifest.json").read_text())
    shards = [s["path"] for s in manifest["splits"]["train"]["shards"]]
    assert summary["rows"] == summary["predicted"] == 24 and summary["rejected"] == 0
    table = _table(tmp_path / "p")
    for shard in shards:
        records = [r.numpy() for r in tf.data.TFRecordDataset(str(bands["examples"] / shard))]
        expected = _serving_default_on_records(bands["model"], records)
        mine = sorted((r for r in table if r["index"] == shard), key=lambda r: int(r["row"]))
        assert [int(r["row"]) for r in mine] == list(range(1, len(records) + 1))
        assert [int(r["class_id"]) for r in mine] == expected["class_ids"].tolist()
        assert [float(r["score"]) for r in mine] == pytest.approx(expected["probabilities"].max(axis=1), abs=1e-6)


@pytest.fixture(scope="module")
def segments(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root, rng = tmp_path_factory.mktemp("segments"), np.random.default_rng(22)
    rows = []
    for i in range(6):
        pixels = rng.integers(0, 256, size=(16, 16, 1)).astype(np.uint8)
        write_png(root / f"img/{i}.png", pixels)
        write_png(root / f"mask/{i}.png", np.digitize(pixels, [86, 171]).astype(np.uint8))
        rows.append([f"img/{i}.png", f"mask/{i}.png"])
    examples = _ingest(root, ["image", "mask"], rows)
    info = ModelInfo("segmentation", "mask", 4, ["dark", "mid", "bright", "never"],
                     extra={"raw_examples": str(examples), "input": "image"})
    model = export_model(threshold_model((16, 16, 1), (85.5, 170.5)), root / "model", examples, "image", info)
    for i in range(5):
        write_png(root / f"new/{i}.png", rng.integers(0, 256, size=(16, 16, 1)).astype(np.uint8))
    write_png(root / "new/wide.png", rng.integers(0, 256, size=(16, 20, 1)).astype(np.uint8))
    write_csv(root / "new.csv", ["image"], [[f"new/{i}.png"] for i in range(5)] + [["new/wide.png"]])
    return {"root": root, "model": model, "index": root / "new.csv"}


def test_segmentation_writes_one_mask_per_image_equal_to_the_models_class_ids(segments: dict[str, Path],
                                                                              tmp_path: Path) -> None:
    out = tmp_path / "seg"
    summary = run(PredictConfig(model=str(segments["model"]), output=str(out), index=str(segments["index"]),
                                data_root=str(segments["root"])), **QUIET)
    assert (summary["predicted"], summary["rejected_by_reason"]) == (5, {"wrong_shape": 1})
    table = sorted(_table(out), key=lambda r: int(r["row"]))
    assert len(list((out / "masks").glob("*.png"))) == len(table) == 5
    expected = _serving_default(segments["model"], "image", [read_pixels(segments["root"] / r["path"]) for r in table])
    for row, class_ids, probabilities in zip(table, expected["class_ids"], expected["probabilities"]):
        mask = np.asarray(Image.open(out / row["mask"]))
        np.testing.assert_array_equal(mask, class_ids)
        assert float(row["mean_score"]) == pytest.approx(probabilities.max(axis=-1).mean(), abs=1e-5)
        assert json.loads(row["classes"]) == np.unique(class_ids).tolist()
    assert len({c for row in table for c in json.loads(row["classes"])}) == 3  # dark, mid and bright all occur
