"""`shardflow predict` on real files and real SavedModels: every row predicted or rejected, predictions equal
the served model's own, masks, serving dirs, --examples input, Parquet and PredictionLog, reruns, Dask.

Two small data sets go through ExampleGen once per module (the training examples whose manifest the
models record as `raw_examples`):
- "bands": 8x8 gray images whose bright row band is the class (the hand-set `band_model`, imperfect);
- "segments": 16x16 gray images (the `threshold_model`: each pixel's class is its brightness band).
The expected predictions never go through predict's code: the SavedModel is loaded with
`tf.saved_model.load` and its `serving_default` called on tf.Examples built here from the files'
pixels as Pillow decodes them. Tolerance: 1e-5 on probabilities for PNG rows (the same graph on the
same pixels); 0.01 for JPEG rows (ExampleGen's JPEG decoder may differ from Pillow's by a level).
"""
from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import tensorflow as tf
from PIL import Image

from helpers_images import corrupt_idat, png_bytes, read_pixels, write_csv, write_png
from helpers_models import band_model, export_model, threshold_model
from shardflow.cli import main as shardflow_main
from shardflow.core.errors import ConfigError
from shardflow.core.model_info import ModelInfo
from shardflow.example_gen import ExampleGenConfig, IndexSpec
from shardflow.example_gen import run as example_gen
from shardflow.predict import PredictConfig, run
from shardflow.pusher import push_model

NEW_ROWS = 14  # good prediction rows of the classification index (12 PNG + 2 JPEG)
BAD = {"corrupt.png": "corrupt_image", "missing.png": "missing_file", "big.png": "wrong_shape"}
QUIET = {"echo": lambda _: None}


def _bands(rng: np.random.Generator, y: int, size: int = 8) -> np.ndarray:
    pixels = rng.integers(0, 201, size=(size, size, 1))
    pixels[3 * y:3 * y + 2] += 40
    return pixels.astype(np.uint8)


def _ingest(root: Path, header: list[str], rows: list[list[object]]) -> Path:
    write_csv(root / "train.csv", header, rows)
    out = root / "examples"
    example_gen(ExampleGenConfig(indexes=(IndexSpec(str(root / "train.csv"), "train"),), data_root=str(root),
                                 output=str(out), num_shards=2), **QUIET)
    return out


@pytest.fixture(scope="module")
def bands(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Training examples, the model, and a prediction index (no label column) with bad rows."""
    root, rng = tmp_path_factory.mktemp("bands"), np.random.default_rng(21)
    rows = []
    for i in range(24):
        write_png(root / f"train/{i}.png", _bands(rng, i % 3))
        rows.append([f"train/{i}.png", i % 3])
    examples = _ingest(root, ["x", "y"], rows)
    info = ModelInfo("classification", "y", 3, ["low", "mid", "high"],
                     extra={"raw_examples": str(examples), "input": "x"})
    model = export_model(band_model(3, 8), root / "model", examples, "x", info)
    new = []
    for i in range(NEW_ROWS):
        name = f"new/{i}.png" if i < 12 else f"new/{i}.jpg"
        pixels = _bands(rng, i % 3)
        if name.endswith(".png"):
            write_png(root / name, pixels)
        else:
            Image.fromarray(pixels[:, :, 0]).save(root / name, quality=95)
        new.append([f"note {i}", name])
    (root / "new/corrupt.png").write_bytes(corrupt_idat(png_bytes(_bands(rng, 0)[:, :, 0])))
    write_png(root / "new/big.png", _bands(rng, 1, size=10))
    for position, name in ((3, "corrupt.png"), (8, "missing.png"), (15, "big.png")):
        new.insert(position, [f"bad {name}", f"new/{name}"])
    write_csv(root / "new.csv", ["note", "x"], new)  # the image column is not first; no label column
    return {"root": root, "examples": examples, "model": model, "index": root / "new.csv"}


@pytest.fixture(scope="module")
def bands_run(bands: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    out = tmp_path_factory.mktemp("bands_out") / "preds"
    summary = run(PredictConfig(model=str(bands["model"]), output=str(out), index=str(bands["index"]),
                                data_root=str(bands["root"]), top_k=2, rows_per_chunk=5), **QUIET)
    return summary, out


def _serving_default(model: Path, name: str, images: list[np.ndarray]) -> dict[str, np.ndarray]:
    """The SavedModel's own signature on tf.Examples built here (raw storage: the HWC pixel bytes)."""
    examples = [tf.train.Example(features=tf.train.Features(feature={
        name: tf.train.Feature(bytes_list=tf.train.BytesList(value=[np.ascontiguousarray(p).tobytes()]))}))
        .SerializeToString() for p in images]
    outputs = tf.saved_model.load(str(model)).signatures["serving_default"](examples=tf.constant(examples))
    return {k: v.numpy() for k, v in outputs.items()}


def _table(out: Path) -> list[dict[str, str]]:
    rows = []
    for part in sorted((out / "predictions").glob("part-*.csv")):
        with open(part, newline="") as stream:
            rows.extend(csv.DictReader(stream))
    return rows


def _index_rows(index: Path) -> list[list[str]]:
    with open(index, newline="") as stream:
        return list(csv.reader(stream))[1:]


def test_every_row_is_predicted_or_rejected_with_its_reason(bands: dict[str, Path], bands_run: tuple[dict, Path]) -> None:
    summary, out = bands_run
    index_rows = _index_rows(bands["index"])
    assert summary["rows"] == len(index_rows) == NEW_ROWS + len(BAD)
    assert summary["predicted"] == NEW_ROWS and summary["rejected"] == len(BAD)
    assert summary["rejected_by_reason"] == {code: 1 for code in BAD.values()}
    assert json.loads((out / "predict.json").read_text()) == summary
    rejects = [json.loads(line) for line in (out / "rejects.jsonl").read_text().splitlines()]
    assert {r["path"]: r["code"] for r in rejects} == {f"new/{n}": c for n, c in BAD.items()}
    for reject in rejects:
        assert index_rows[reject["row"] - 1][1] == reject["path"]  # the row number is the index's data row
        assert reject["index"] == str(bands["index"]) and reject["column"] == "x" and reject["reason"]
    assert "differs from the column's (8, 8, 1)" in next(r["reason"] for r in rejects if r["code"] == "wrong_shape")
    table = _table(out)
    predicted_rows = {int(r["row"]) for r in table}
    assert len(table) == len(predicted_rows) == NEW_ROWS
    assert predicted_rows | {r["row"] for r in rejects} == set(range(1, len(index_rows) + 1))
    for row in table:
        assert row["path"] == index_rows[int(row["row"]) - 1][1] and row["index"] == str(bands["index"])


def test_predictions_equal_the_served_models_own(bands: dict[str, Path], bands_run: tuple[dict, Path]) -> None:
    _, out = bands_run
    table = sorted(_table(out), key=lambda r: int(r["row"]))
    expected = _serving_default(bands["model"], "x", [read_pixels(bands["root"] / r["path"]) for r in table])
    names = ["low", "mid", "high"]
    for row, probabilities, class_id in zip(table, expected["probabilities"], expected["class_ids"]):
        tolerance = 1e-5 if row["path"].endswith(".png") else 0.01
        top = np.argsort(-probabilities, kind="stable")[:2]
        assert int(row["class_id"]) == class_id and row["class_name"] == names[class_id]
        assert float(row["score"]) == pytest.approx(probabilities[class_id], abs=tolerance)
        assert json.loads(row["top_k_ids"]) == top.tolist()
        assert json.loads(row["top_k_names"]) == [names[i] for i in top]
        assert json.loads(row["top_k_scores"]) == pytest.approx(probabilities[top].tolist(), abs=tolerance)
    assert len({int(r["class_id"]) for r in table}) == 3  # the checks above saw every class


def assert_same_table(rows: list[dict], expected: list[dict]) -> None:
    """The same rows, classes and names; scores within 1e-6 (float32 sums change in the last bit with the
    make-up of the batch an example was predicted in)."""
    scores = ("score", "top_k_scores")
    rows, expected = (sorted(t, key=lambda r: int(r["row"])) for t in (rows, expected))
    assert [{k: v for k, v in r.items() if k not in scores} for r in rows] == [
        {k: v for k, v in r.items() if k not in scores} for r in expected]
    for row, before in zip(rows, expected):
        assert float(row["score"]) == pytest.approx(float(before["score"]), abs=1e-6)
        assert json.loads(row["top_k_scores"]) == pytest.approx(json.loads(before["top_k_scores"]), abs=1e-6)


def test_a_serving_dir_or_its_current_json_names_the_model_parquet_and_prediction_log(
        bands: dict[str, Path], bands_run: tuple[dict, Path], tmp_path: Path) -> None:
    serving = tmp_path / "serving"
    push_model(str(bands["model"]), str(serving), gated_against="none")  # into an empty serving directory
    base = ["predict", "--index", str(bands["index"]), "--data-root", str(bands["root"]), "--top-k", "2"]
    assert shardflow_main([*base, "--model", str(serving), "--output", str(tmp_path / "a")]) == 0
    assert shardflow_main([*base, "--model", str(serving / "CURRENT.json"), "--output", str(tmp_path / "b"),
                           "--format", "parquet", "--prediction-log", "--batch-size", "4"]) == 0
    summary = json.loads((tmp_path / "b" / "predict.json").read_text())
    assert summary["model"] == str(serving / "1") and summary["model_reference"] == str(serving / "CURRENT.json")
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


def test_a_rerun_over_a_killed_run_gives_the_same_result(bands: dict[str, Path], bands_run: tuple[dict, Path],
                                                         tmp_path: Path) -> None:
    out = tmp_path / "preds"
    shutil.copytree(bands_run[1], out)
    # What a run killed midway leaves: the marker gone, staged parts and scratch files, stale items.
    (out / "predict.json").unlink()
    (out / ".staging" / "parts").mkdir(parents=True)
    (out / ".staging" / "parts" / "deadbeef.csv").write_text("index,row\nx,1\n")
    (out / "predictions" / "part-00999.csv").write_text((out / "predictions" / "part-00000.csv").read_text())
    config = PredictConfig(model=str(bands["model"]), output=str(out), index=str(bands["index"]),
                           data_root=str(bands["root"]), top_k=2, rows_per_chunk=3)
    summary = run(config, **QUIET)
    assert_same_table(_table(out), _table(bands_run[1]))
    assert (out / "rejects.jsonl").read_text() == (bands_run[1] / "rejects.jsonl").read_text()
    assert not (out / ".staging").exists() and not (out / "predictions" / "part-00999.csv").exists()
    assert {k: summary[k] for k in ("rows", "predicted", "rejected")} == {"rows": 17, "predicted": 14, "rejected": 3}


def test_bad_models_and_inputs_are_config_errors(bands: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="neither shardflow_model.json nor CURRENT.json"):
        PredictConfig(model=str(tmp_path), output=str(tmp_path / "o"), examples=str(bands["examples"])).check_inputs()
    write_csv(tmp_path / "other.csv", ["image"], [["new/0.png"]])
    with pytest.raises(ConfigError, match="no column 'x'"):
        run(PredictConfig(model=str(bands["model"]), output=str(tmp_path / "o"), index=str(tmp_path / "other.csv"),
                          data_root=str(bands["root"])), **QUIET)
    assert not (tmp_path / "o" / "predict.json").exists()


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


def test_dask_runner_gives_the_local_runners_predictions(bands: dict[str, Path], bands_run: tuple[dict, Path],
                                                         tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 2-worker Dask LocalCluster: the same rows, rejects and predictions as the local runner."""
    import dask
    from dask.distributed import Client, LocalCluster

    monkeypatch.setenv("DASK_TEMPORARY_DIRECTORY", str(tmp_path / "dask"))
    with dask.config.set({"temporary-directory": str(tmp_path / "dask")}):
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(cluster)
        try:
            out = tmp_path / "dask_preds"
            assert shardflow_main(["predict", "--model", str(bands["model"]), "--index", str(bands["index"]),
                                   "--data-root", str(bands["root"]), "--output", str(out), "--top-k", "2",
                                   "--rows-per-chunk", "4", "--runner=apache_beam.runners.dask.dask_runner.DaskRunner",
                                   f"--dask_client_address={cluster.scheduler_address}"]) == 0
        finally:
            client.close()
            cluster.close()
    summary = json.loads((out / "predict.json").read_text())
    assert "DaskRunner" in summary["runner"] and summary["predicted"] == NEW_ROWS
    key = lambda r: int(r["row"])  # noqa: E731
    mine, local = sorted(_table(out), key=key), sorted(_table(bands_run[1]), key=key)
    assert [(r["row"], r["path"], r["class_id"]) for r in mine] == [(r["row"], r["path"], r["class_id"]) for r in local]
    for a, b in zip(mine, local):
        assert float(a["score"]) == pytest.approx(float(b["score"]), abs=1e-6)
    assert (out / "rejects.jsonl").read_text() == (bands_run[1] / "rejects.jsonl").read_text()
