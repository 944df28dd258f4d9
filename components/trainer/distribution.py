"""Which tf.distribute strategy a run uses, decided from the environment as Kubeflow's TFJob sets it.

- `TF_CONFIG` names a cluster with workers → MultiWorkerMirroredStrategy (one process per worker;
  the TFJob operator or the test sets TF_CONFIG, the chief is worker 0);
- several local GPUs → MirroredStrategy;
- otherwise the default strategy (one CPU or GPU).

And how ops run on those devices: `deterministic_ops` turns TensorFlow's op determinism on for a
`--deterministic` run (the same outputs for the same inputs on the same hardware and software, GPUs
included), and `precision_policy` Keras' mixed policy for a `--mixed-precision` run (the devices' half
type, `mixed_policy`); each puts the process's own setting back after it.

    placement = choose_strategy()
    placement.strategy.num_replicas_in_sync, placement.is_chief, placement.num_workers
    with deterministic_ops(config.input.deterministic):
        ...  # build the streams and the model, train
"""
from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from typing import Iterator

import tensorflow as tf
import tf_keras as keras
from tensorflow.python.framework import config as tf_config  # is_/disable_op_determinism: no public name


@dataclass(frozen=True)
class Placement:
    strategy: tf.distribute.Strategy
    kind: str  # "default" | "mirrored" | "multi_worker"
    num_workers: int
    worker_index: int

    @property
    def is_chief(self) -> bool:
        return self.worker_index == 0

    @property
    def replicas(self) -> int:
        return int(self.strategy.num_replicas_in_sync)


def cluster_from_env() -> tuple[int, int]:
    """(number of workers, this worker's index) from TF_CONFIG; (1, 0) without it."""
    raw = os.environ.get("TF_CONFIG", "")
    if not raw:
        return 1, 0
    try:
        config = json.loads(raw)
        cluster, task = config["cluster"], config["task"]
    except (ValueError, KeyError) as err:
        raise ValueError(f"TF_CONFIG is not valid JSON with 'cluster' and 'task': {raw[:200]!r}") from err
    workers = len(cluster.get("worker", [])) + len(cluster.get("chief", []))
    index = int(task.get("index", 0))
    # With an explicit chief, the chief is 0 and worker i is i + 1.
    if task.get("type") == "worker" and cluster.get("chief"):
        index += 1
    return max(workers, 1), index


def expected_replicas() -> int:
    """The replicas choose_strategy's strategy will have, known before any worker connects."""
    workers, _ = cluster_from_env()
    # Physical devices: listing logical ones starts the runtime, after which collectives cannot be configured.
    return workers * max(1, len(tf.config.list_physical_devices("GPU")))


def choose_strategy() -> Placement:
    workers, index = cluster_from_env()
    if workers > 1:
        options = tf.distribute.experimental.CommunicationOptions(
            implementation=tf.distribute.experimental.CommunicationImplementation.AUTO)
        strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
        return Placement(strategy, "multi_worker", workers, index)
    gpus = tf.config.list_logical_devices("GPU")
    if len(gpus) > 1:
        return Placement(tf.distribute.MirroredStrategy(), "mirrored", 1, 0)
    return Placement(tf.distribute.get_strategy(), "default", 1, 0)


@contextlib.contextmanager
def deterministic_ops(enabled: bool) -> Iterator[None]:
    """TensorFlow's op determinism while a `--deterministic` run builds its streams and model and trains.

    What TensorFlow documents for it (tf.config.experimental.enable_op_determinism): ops give the same
    outputs for the same inputs on the same hardware and software; on a GPU, ops pick deterministic
    kernels (cuDNN's included), and an op without one raises UnimplementedError instead of differing.
    The other half of its recipe, the seeds (tf.keras.utils.set_random_seed), is build_model's. Not set:
    TF_DETERMINISTIC_OPS, the same switch as an environment variable, which TensorFlow reads once, at its
    first check (set later in a process it does nothing: measured), and which child processes would inherit.
    Restored after the run: a process that trains several times (tune's trials, find-label-issues' folds) goes on.
    Its cost: a tf.data pipeline holding a stateful op (a Python function: --record-order's tap, the
    data service's receiver) runs its parallel maps one call at a time.
    """
    if not enabled:
        yield
        return
    before = tf_config.is_op_determinism_enabled()
    tf.config.experimental.enable_op_determinism()
    try:
        yield
    finally:
        if not before:
            tf_config.disable_op_determinism()


def mixed_policy() -> str:
    """Keras' mixed policy for this machine's devices: float16 on GPUs, bfloat16 on CPUs.

    float16 on a CPU is emulated; oneDNN runs bfloat16 natively where the CPU has AVX512_BF16 or AMX. A 224-px
    LeNet's training step of 64 photos on 2 AMD EPYC cores (AVX512_BF16): 263 ms in float32, 15,020 ms in
    mixed_float16, 181 ms in mixed_bfloat16. bfloat16 keeps float32's exponent range: no loss scaling.
    """
    return "mixed_float16" if tf.config.list_physical_devices("GPU") else "mixed_bfloat16"


@contextlib.contextmanager
def precision_policy(mixed: bool) -> Iterator[None]:
    """The mixed policy (`mixed_policy`) while the model is built and trained, the process's own policy again after."""
    if not mixed:
        yield
        return
    before = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(mixed_policy())
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy(before)
