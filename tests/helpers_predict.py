"""`shardflow predict`'s tests' shared data: the "bands" set through ExampleGen, its model, a prediction
index with bad rows, and one predict run over it, each built once per machine (`shared_fixtures.build_once`,
so tests/serving/test_predict.py and test_predict_outputs.py share them even on two xdist workers); and
the readers both files check predictions with. Read only.

"bands": 8x8 gray images whose bright row band is the class (the hand-set `band_model`, imperfect). The
expected predictions never go through predict's code: the SavedModel is loaded with `tf.saved_model.load`
and its `serving_default` called on tf.Examples built here from the files' pixels as Pillow decodes them.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from helpers_images import corrupt_idat, png_bytes, write_csv, write_png
from helpers_models import band_model, export_model
from shardflow.core.model_info import ModelInfo
from shardflow.example_gen import ExampleGenConfig, IndexSpec
from shardflow.example_gen import run as example_gen
from shardflow.predict import PredictConfig, run
from shared_fixtures import build_once

NEW_ROWS = 14  # good prediction rows of the classification index (12 PNG + 2 JPEG)
QUIET = {"echo": lambda _: None}


def _bands(rng: np.random.Generator, y: int, size: int = 8) -> np.ndarray:
    pixels = rng.integers(0, 201, size=(size, size, 1))
    pixels[3 * y:3 * y + 2] += 40
    return pixels.astype(np.uint8)


def ingest(root: Path, header: list[str], rows: list[list[object]]) -> Path:
    write_csv(root / "train.csv", header, rows)
    out = root / "examples"
    example_gen(ExampleGenConfig(indexes=(IndexSpec(str(root / "train.csv"), "train"),), data_root=str(root),
                                 output=str(out), num_shards=2), **QUIET)
    return out


def _build_bands(root: Path) -> dict[str, Any]:
    rng = np.random.default_rng(21)
    rows = []
    for i in range(24):
        write_png(root / f"train/{i}.png", _bands(rng, i % 3))
        rows.append([f"train/{i}.png", i % 3])
    examples = ingest(root, ["x", "y"], rows)
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
    return {"root": str(root), "examples": str(examples), "model": str(model), "index": str(root / "new.csv")}


@pytest.fixture(scope="session")
def bands(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Training examples, the model, and a prediction index (no label column) with bad rows."""
    return {key: Path(value) for key, value in build_once(tmp_path_factory, "predict-bands", _build_bands).items()}


@pytest.fixture(scope="session")
def bands_run(bands: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    def build(folder: Path) -> dict[str, Any]:
        out = folder / "preds"
        summary = run(PredictConfig(model=str(bands["model"]), output=str(out), index=str(bands["index"]),
                                    data_root=str(bands["root"]), top_k=2, rows_per_chunk=5), **QUIET)
        return {"summary": summary, "out": str(out)}

    built = build_once(tmp_path_factory, "predict-bands-run", build)
    return built["summary"], Path(built["out"])


def serving_default(model: Path, name: str, images: list[np.ndarray]) -> dict[str, np.ndarray]:
    """The SavedModel's own signature on tf.Examples built here (raw storage: the HWC pixel bytes)."""
    examples = [tf.train.Example(features=tf.train.Features(feature={
        name: tf.train.Feature(bytes_list=tf.train.BytesList(value=[np.ascontiguousarray(p).tobytes()]))}))
        .SerializeToString() for p in images]
    outputs = tf.saved_model.load(str(model)).signatures["serving_default"](examples=tf.constant(examples))
    return {k: v.numpy() for k, v in outputs.items()}


def table(out: Path) -> list[dict[str, str]]:
    rows = []
    for part in sorted((out / "predictions").glob("part-*.csv")):
        with open(part, newline="") as stream:
            rows.extend(csv.DictReader(stream))
    return rows


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
