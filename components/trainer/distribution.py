"""Which tf.distribute strategy a run uses, decided from the environment as Kubeflow's TFJob sets it.

- `TF_CONFIG` names a cluster with workers → MultiWorkerMirroredStrategy (one process per worker;
  the TFJob operator or the test sets TF_CONFIG, the chief is worker 0);
- several local GPUs → MirroredStrategy;
- otherwise the default strategy (one CPU or GPU).

    placement = choose_strategy()
    placement.strategy.num_replicas_in_sync, placement.is_chief, placement.num_workers
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass

import tensorflow as tf


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
