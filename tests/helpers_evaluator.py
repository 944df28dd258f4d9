"""The Evaluator's end-to-end tests' data and models, built once per machine, and the helpers both test
files use (tests/evaluator/test_evaluator.py, test_evaluator_blessing.py).

Two small datasets go through ExampleGen (`shared_fixtures.build_once`, so the two files share them even on
two xdist workers):
- "bands": 120 gray 8x8 PNGs whose label y (0..2) brightens rows 3y..3y+1; columns word (the label as
  a string, 6 rows "fish" = unknown), site (3 strings) and fold (ints) for slicing.
- "segments": 24 gray 16x16 PNGs; the mask is the pixel brightness band (0, 1, 2) with 5% of the
  mask pixels flipped, so the model's errors are known.
The models have hand-set weights (deterministic, imperfect): "good" averages each band, "weak" looks
at two pixels per band; the segmentation model thresholds brightness with a 1x1 convolution. Their
SavedModels are built once; each process makes the same Keras models again in memory (no training: the
weights are set by hand), which the tests call on pixels read with the reader. Read only.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
import tf_keras as keras

from helpers_images import write_csv, write_png
from helpers_models import band_model, export_model, threshold_model
from shardflow.cli import main as shardflow_main
from shardflow.core.model_info import ModelInfo
from shardflow.evaluator import EvaluatorConfig, run
from shardflow.example_gen import ExampleGenConfig, IndexSpec
from shardflow.example_gen import run as example_gen
from shared_fixtures import build_once

ROWS, SEG_ROWS = 120, 24
WORDS = ["cat", "dog", "bird"]
SITES = ["north", "south", "east"]
SEG_CLASSES = ["dark", "mid", "bright", "never"]


def _ingest(root: Path, header: list[str], rows: list[list[object]], **options: object) -> Path:
    write_csv(root / "eval.csv", header, rows)
    out = root / "examples"
    example_gen(ExampleGenConfig(indexes=(IndexSpec(str(root / "eval.csv"), "eval"),), data_root=str(root),
                                 output=str(out), num_shards=3, **options), echo=lambda _: None)
    return out


def _built(factory: pytest.TempPathFactory, name: str, build: Callable[[Path], Path]) -> Path:
    def record(folder: Path) -> dict[str, Any]:
        return {"path": str(build(folder))}

    return Path(build_once(factory, name, record)["path"])


def _bands(root: Path) -> Path:
    rng = np.random.default_rng(11)
    rows = []
    for i in range(ROWS):
        y = int(rng.integers(0, 3))
        pixels = rng.integers(0, 201, size=(8, 8, 1))
        pixels[3 * y:3 * y + 2] += 30
        write_png(root / f"img/{i}.png", pixels.astype(np.uint8))
        word = "fish" if i % 20 == 7 else WORDS[y]
        rows.append([f"img/{i}.png", y, word, SITES[int(rng.integers(0, 3))], i % 4])
    return _ingest(root, ["x", "y", "word", "site", "fold"], rows)


def _segments(root: Path) -> Path:
    rng = np.random.default_rng(12)
    rows = []
    for i in range(SEG_ROWS):
        pixels = rng.integers(0, 256, size=(16, 16, 1)).astype(np.uint8)
        mask = np.digitize(pixels, [86, 171]).astype(np.uint8)
        flip = rng.random(mask.shape) < 0.05
        mask[flip] = (mask[flip] + 1) % 3
        write_png(root / f"img/{i}.png", pixels)
        write_png(root / f"mask/{i}.png", mask)
        rows.append([f"img/{i}.png", f"mask/{i}.png", SITES[i % 2]])
    return _ingest(root, ["image", "mask", "site"], rows, roles=(("site", "metadata"),))


@pytest.fixture(scope="session")
def bands(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _built(tmp_path_factory, "evaluator-bands", _bands)


@pytest.fixture(scope="session")
def segments(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _built(tmp_path_factory, "evaluator-segments", _segments)


@pytest.fixture(scope="session")
def models(bands: Path, segments: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, keras.Model]]:
    ints = ModelInfo(task="classification", label="y", num_classes=3, class_names=["r0", "r3", "r6"])
    words = ModelInfo(task="classification", label="word", num_classes=3, class_names=WORDS,
                      label_vocabulary=WORDS)  # served: the trained classes only
    seg = ModelInfo(task="segmentation", label="mask", num_classes=4, class_names=SEG_CLASSES)
    two = ModelInfo(task="classification", label="y", num_classes=2, class_names=["r0", "r3"])  # y has 3 values
    made = {"good": (band_model(3, 8), bands, "x", ints), "weak": (band_model(3, 2), bands, "x", ints),
            "words": (band_model(3, 8), bands, "x", words), "two": (band_model(2, 8), bands, "x", two),
            "seg": (threshold_model((16, 16, 1), (85.5, 170.5)), segments, "image", seg)}

    def build(root: Path) -> dict[str, Any]:
        return {name: str(export_model(model, root / name, examples, image, info))
                for name, (model, examples, image, info) in made.items()}

    exported = build_once(tmp_path_factory, "evaluator-models", build)
    return {name: (Path(exported[name]), model) for name, (model, *_) in made.items()}


def evaluate(tmp_path: Path, model: Path, examples: Path, **options: object) -> dict:
    outcome = run(EvaluatorConfig(model=str(model), examples=str(examples), output=str(tmp_path / "eout"),
                                  batch_size=16, **options), echo=lambda _: None)  # type: ignore[arg-type]
    written = json.loads((tmp_path / "eout" / "metrics.json").read_text())
    assert written["overall"] == pytest.approx(outcome.metrics["overall"])
    return written


def verdict(out: Path) -> tuple[dict, str]:
    blessing = json.loads((out / "blessing.json").read_text())
    markers = [name for name in ("BLESSED", "NOT_BLESSED") if (out / name).is_file()]
    assert len(markers) == 1
    assert (out / markers[0]).read_text().splitlines() == blessing["reasons"]
    return blessing, markers[0]


def evaluate_cli(argv: list[str]) -> int:
    return shardflow_main(["evaluate", *argv])
