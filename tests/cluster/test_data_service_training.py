"""The Trainer's input on the tf.data service: real dispatcher and workers (static sharding, two workers), the
stream built by core/input_stream.py, and `shardflow train --data-service` against servers started by
`shardflow data-service`. Through the service the batches are the local stream's, in its order."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

from loopback_server import free_port

from shardflow.core.input_stream import StreamOptions, build_stream
from shardflow.core.stream_options import ServiceJob

SHARDFLOW = str(Path(sys.executable).with_name("shardflow"))
pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A dispatcher with two fixed workers, each a `shardflow data-service` process."""
    logs = tmp_path_factory.mktemp("servers")
    port, workers = free_port(), [free_port(), free_port()]
    argv = [["dispatcher", "--port", str(port), *(t for w in workers for t in ("--worker", f"localhost:{w}"))]]
    argv += [["worker", "--dispatcher", f"localhost:{port}", "--port", str(w)] for w in workers]
    processes = [subprocess.Popen([SHARDFLOW, "data-service", *a], stdout=open(logs / f"{i}.log", "w"),
                                  stderr=subprocess.STDOUT) for i, a in enumerate(argv)]
    yield f"grpc://localhost:{port}"
    for process in processes:
        process.kill()
        process.wait()


@pytest.mark.parametrize("start", [0, 7 * 32])
def test_the_served_stream_is_the_local_stream(service: str, digits_examples: Path, start: int) -> None:
    options = dict(batch_size=32, shuffle_mb=0.05, seed=3, repeat=True, drop_remainder=True, start=start)
    local = list(build_stream(digits_examples, "train", StreamOptions(**options)).take(60))  # past one pass
    job = ServiceJob(dispatcher=service, name=f"stream-{start}")
    served = list(build_stream(digits_examples, "train", StreamOptions(**options, service=job)).take(60))
    assert len(served) == 60
    for mine, theirs in zip(local, served):  # every example once per pass, in the local order
        assert all(np.array_equal(mine[key].numpy(), theirs[key].numpy()) for key in mine)


def _train(examples: Path, out: Path, *extra: str) -> dict:
    done = subprocess.run([SHARDFLOW, "train", "--examples", str(examples), "--output", str(out), "--epochs", "2",
                           "--batch-size", "32", "--deterministic", "--augment", "flip", "--input-probe-batches", "1",
                           *extra], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((out / "training.json").read_text())


def test_training_on_the_service_ends_with_the_local_runs_weights(service: str, digits_examples: Path,
                                                                  tmp_path: Path) -> None:
    local = _train(digits_examples, tmp_path / "local")
    served = _train(digits_examples, tmp_path / "served", "--data-service", service)
    assert served["weights_sha256"] == local["weights_sha256"]  # augmentation draws included
    assert served["optimizer_steps"] == local["optimizer_steps"]


def test_a_detector_on_the_service_ends_with_the_local_runs_weights(service: str, box_examples: Path,
                                                                   tmp_path: Path) -> None:
    """Boxes padded in the workers' part, moved by flip and crop, CenterNet targets made there: the same weights.
    One epoch (7 steps of 32) proves it: the digits test above crosses an epoch on the service."""
    extra = ("--augment", "flip,crop", "--epochs", "1")  # the later flags overrule _train's
    local = _train(box_examples, tmp_path / "local", *extra)
    served = _train(box_examples, tmp_path / "served", *extra, "--data-service", service)
    assert served["weights_sha256"] == local["weights_sha256"]
    assert served["data_service"]["batches_served"] > 0 and served["data_service"]["examples_lost"] == 0


@pytest.mark.parametrize(("extra", "says"), [
    (["--data-service", "localhost:5050"], "data_service must be grpc://HOST:PORT (a dispatcher), got "
                                           "'localhost:5050'"),
    (["--data-service", "grpc://localhost:5050", "--record-order", "order.jsonl"],
     "record_order cannot be written by the tf.data service's workers: drop --record-order or --data-service"),
])
def test_a_service_option_that_cannot_work_is_one_line(digits_examples: Path, tmp_path: Path, extra: list[str],
                                                       says: str) -> None:
    done = subprocess.run([SHARDFLOW, "train", "--examples", str(digits_examples), "--output", str(tmp_path / "m"),
                           "--epochs", "1", *extra], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and done.stderr == f"shardflow train: error: {says}\n"


def test_a_python_function_in_the_workers_part_is_refused_before_any_job(digits_examples: Path) -> None:
    import tensorflow as tf

    from shardflow.core.errors import ConfigError

    def step(batch: dict) -> tuple:
        return tf.py_function(lambda pixels: pixels, [batch["x"]], tf.uint8), batch["y"]

    options = StreamOptions(batch_size=8, repeat=True, seed=1, service=ServiceJob(dispatcher="grpc://localhost:1",
                                                                                 name="python"))
    with pytest.raises(ConfigError, match=r"^the training stream calls Python \(EagerPyFunc\), which cannot run on "
                                          r"a tf.data service worker"):
        build_stream(digits_examples, "train", options, model_step=step)  # no dispatcher there: never asked
    build_stream(digits_examples, "train", options, model_step=lambda batch: (batch["x"], batch["y"]))


def test_two_workers_serve_every_train_example_exactly_once_a_pass(service: str, digits_examples: Path) -> None:
    import tensorflow as tf

    from shardflow.core.input_stream import SERIALIZED
    from shardflow.core.manifest import read_manifest
    from shardflow.core.reader import shard_files

    manifest = read_manifest(digits_examples)
    stored = sorted(r.numpy() for r in tf.data.TFRecordDataset(shard_files(digits_examples, manifest, "train"),
                                                               compression_type=manifest.compression or None))
    options = StreamOptions(batch_size=32, shuffle_mb=0.05, seed=9, repeat=True, keep_serialized=True,
                            service=ServiceJob(dispatcher=service, name="once"))
    batches = build_stream(digits_examples, "train", options).take(-(-len(stored) // 32))
    served = [record for batch in batches for record in batch[SERIALIZED].numpy()][:len(stored)]  # pass 1
    assert sorted(served) == stored  # by the records' own bytes: each stored example once, none twice
