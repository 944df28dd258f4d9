"""Training memory is bounded in bytes: photos whose float32 pixels are several times the Trainer's peak RSS.

3,200 rows of photo crops (scikit-learn's sample photographs) are ingested as 512x512 RGB JPEGs:
10 GB as float32 pixels (3 MB each), ~270 MB as stored. `shardflow train` reads them through a
shuffle of serialized records and decodes after it; its peak RSS (of that process alone, from
wait4 in a small launcher process: see helpers_processes) must stay a fraction of the float32 size. A small
model keeps the test about the input pipeline, not the convolutions.
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
import tensorflow as tf

from testkit.photo_data import ensure_photo_index, ensure_photos
from helpers_models import SMALL_PHOTO_MODEL
from helpers_processes import run_with_peak_rss
from shardflow.core.manifest import read_manifest
from shardflow.example_gen import ExampleGenConfig, IndexSpec, run
from shardflow.trainer.config import ExportOptions, FitOptions, InputOptions, TrainerConfig
from shardflow.trainer.features import RawToModel
from shardflow.trainer.input_pipeline import build_streams
from shardflow.trainer.reports import input_verdict
from shardflow.trainer.task import resolve_task

ROWS = 3_200  # the peak RSS (1.7-2.2 GB, ~1.2 GB of it TensorFlow and the model) does not grow with the rows
SIDE = 512
BATCH = 32
PROBE_BATCHES = 20
FLOAT32_BYTES = ROWS * SIDE * SIDE * 3 * 4


@pytest.fixture(scope="module")
def photo_examples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = ensure_photos(tmp_path_factory.mktemp("photos"), count=80)
    index = ensure_photo_index(root, ROWS)
    out = root.parent / "examples"
    run(ExampleGenConfig(indexes=(IndexSpec(str(index), "train"),), data_root=str(root), output=str(out),
                         resize=(("*", (SIDE, SIDE)),), channels=(("*", "rgb"),), storage=(("*", "jpeg"),),
                         min_shards=4), echo=lambda _: None)
    return out


def _train_peak_rss(examples: Path, work: Path) -> tuple[int, int]:
    """(exit status, peak RSS in bytes) of one `shardflow train` process."""
    (work / "small_model.py").write_text(SMALL_PHOTO_MODEL)
    command = [sys.executable, "-m", "shardflow", "train", "--examples", str(examples), "--output", str(work / "m"),
               "--model", f"{work / 'small_model.py'}:small", "--epochs", "1", "--batch-size", str(BATCH),
               "--eval-split", "", "--input-probe-batches", str(PROBE_BATCHES)]
    done = run_with_peak_rss(command)
    if done.returncode:
        print(done.stderr[-3000:])
    return done.returncode, done.peak_rss


@pytest.fixture(scope="module")
def trained(photo_examples: Path) -> tuple[Path, int]:
    """The model directory and the peak RSS of the `shardflow train` run that wrote it."""
    work = photo_examples.parent / "train"
    work.mkdir()
    status, peak = _train_peak_rss(photo_examples, work)
    assert status == 0
    return work / "m", peak


def test_training_memory_is_a_fraction_of_the_float_pixels(photo_examples: Path, trained: tuple[Path, int]) -> None:
    manifest = read_manifest(photo_examples)
    assert manifest.splits["train"].num_examples == ROWS
    assert manifest.features["x"].shape == [SIDE, SIDE, 3] and manifest.features["x"].encoding == "jpeg"
    stored = sum(s.bytes for s in manifest.splits["train"].shards)
    model_dir, peak = trained
    summary = (model_dir / "training.json").read_text()
    assert '"optimizer_steps": 100' in summary  # 3,200 / 32: every example was read once
    print(f"float32 {FLOAT32_BYTES / 1e9:.2f} GB, stored {stored / 1e6:.0f} MB, train peak RSS {peak / 1e9:.2f} GB")
    # 4x: a 2.52 GB ceiling. The Trainer's own peak measured 1.67-2.17 GB in 20 runs on 2 cores at load 3-8
    # (TensorFlow and the model ~1.2 GB, the 128 MB shuffle window's records ~0.3-0.5 GB); pinning tf.data's
    # AUTOTUNE prefetch and parallelism did not narrow it. A peak that grew with the data would be GBs over.
    assert FLOAT32_BYTES >= 4 * peak, (FLOAT32_BYTES, peak)


def _dataset_ops(dataset: tf.data.Dataset) -> set[str]:
    """Every op of a tf.data pipeline's graph, those of its map/interleave functions included."""
    graph = tf.compat.v1.GraphDef.FromString(dataset._as_serialized_graph().numpy())
    return {n.op for n in graph.node} | {n.op for f in graph.library.function for n in f.node_def}


def test_the_input_probe_reads_the_training_stream_without_its_shuffle(photo_examples: Path, tmp_path: Path) -> None:
    """Before, the probe timed batches cut from a window already in memory: 100-340k ex/s where decoding allows ~5k.

    Asserted on the streams' graphs, not on a rate: the probe reads and decodes as training does,
    with no shuffle (no window of records held in memory) anywhere in it.
    """
    config = TrainerConfig(input=InputOptions(examples=str(photo_examples), batch_size=BATCH, eval_split=None),
                           fit=FitOptions(epochs=1), export=ExportOptions(output=str(tmp_path / "m")))
    task = resolve_task(config.input)
    streams = build_streams(task, config.input, BATCH, 1, RawToModel(task, None))
    train, probe = _dataset_ops(streams.train), _dataset_ops(streams.probe)
    assert {"StatelessShuffle", "DecodeJpeg"} <= train  # the window permutation and the decode after it
    assert "DecodeJpeg" in probe and probe <= train
    assert not {op for op in probe if "Shuffle" in op}, sorted(probe)


def test_the_input_report_gives_the_probe_rate_with_its_counts(trained: tuple[Path, int]) -> None:
    """input_report.json: the probe's rate over the batches it read (at most those asked for, within
    reports.PROBE_SECONDS), and the figures derived from it agree."""
    report = json.loads((trained[0] / "input_report.json").read_text())
    assert 1 <= report["probe_batches"] <= PROBE_BATCHES and report["global_batch"] == BATCH
    probe, training = report["input_examples_per_second"], report["training_examples_per_second"]
    print(f"input probe {probe:,.0f} ex/s, training {training:,.0f} ex/s")
    assert math.isfinite(probe) and probe > 0
    (epoch,) = report["epochs"]  # one epoch: the steady rate is that epoch's
    assert epoch["steps"] == ROWS // BATCH and epoch["seconds"] > 0
    assert training == epoch["examples_per_second"] == pytest.approx(ROWS / epoch["seconds"], abs=0.1)
    # The report rounds the rates to 0.1 ex/s and the ratio to 0.01 from the unrounded rates.
    assert report["ratio_input_to_training"] == pytest.approx(probe / training, rel=0.01, abs=0.01)
    assert report["verdict"] == input_verdict(probe, training, report.get("step_examples_per_second"))
    assert ("step_examples_per_second" in report) == (probe < 2.4 * training)  # the step probed unless far ahead
