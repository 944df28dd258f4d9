"""Where a killed run resumes: its optimizer step from the backup, its global batch from the stream record.

Keras' BackupAndRestore restores the weights, the optimizer and its (epoch, batch) counters, but
`fit` opens a new iterator: the data would start again at its beginning. The training stream is a
pure function of the seed and the split (core/stream_position.py), so the Trainer reads the backup's
counters before `fit` and builds the stream at step × global batch instead.

`checkpoints/stream.json` is the stream record, rewritten whole after every backup by the chief:
what defines the order (global batch, steps per epoch, examples, seed, shuffle window) and the
position of the last backup. A resumed run keeps the recorded global batch, whatever its number of
workers: the per-replica batch follows, and a worker count that cannot split it is refused. The
position itself is always taken from the checkpoint (written atomically by TensorFlow), so a kill
between the checkpoint and the record cannot make them disagree.

    step = saved_step("MOUT/checkpoints", steps_per_epoch=45)    # None when there is no backup
"""
from __future__ import annotations

from typing import Any, Callable

import tensorflow as tf

from ..core import storage
from ..core.errors import ConfigError
from ..core.stream_read import RepeatedStart

STREAM_RECORD = "stream.json"
_EPOCH = "ckpt_saved_epoch/.ATTRIBUTES/VARIABLE_VALUE"  # tf_keras' WorkerTrainingState variables
_BATCH = "ckpt_saved_batch/.ATTRIBUTES/VARIABLE_VALUE"


def saved_step(backup_dir: str, steps_per_epoch: int) -> int | None:
    """The optimizer step (counted over epochs from 0) a backup resumes at, as Keras' own restore counts it."""
    latest = tf.train.latest_checkpoint(storage.join(backup_dir, "chief"))  # BackupAndRestore's read directory
    if not latest:
        return None
    reader = tf.train.load_checkpoint(latest)
    epoch, batch = int(reader.get_tensor(_EPOCH)), int(reader.get_tensor(_BATCH))
    if batch >= 0:  # saved after batch `batch` of epoch `epoch` (the last batch: the next epoch's step 0)
        return epoch * steps_per_epoch + batch + 1
    return (epoch + 1) * steps_per_epoch if epoch >= 0 else None


def read_record(checkpoints: str) -> dict[str, Any] | None:
    path = storage.join(checkpoints, STREAM_RECORD)
    return storage.read_json(path) if storage.is_file(path) else None


def run_global_batch(record: dict[str, Any] | None, checkpoints: str, batch_size: int, replicas: int,
                     train_examples: int, echo: Callable[[str], None]) -> int:
    """The global batch of this run: the killed run's when resuming one (its `record`, read from
    `checkpoints`), else batch_size × replicas.

    ConfigError (one line) when the replicas cannot share the recorded global batch evenly, or when
    the backup was made on another number of training examples.
    """
    if record is None:
        return batch_size * replicas
    recorded = int(record["global_batch"])
    if record["train_examples"] != train_examples:
        raise ConfigError(f"the backup in {checkpoints} trained on {record['train_examples']} examples, this run has "
                          f"{train_examples}: remove {checkpoints} to train anew")
    if recorded % replicas:
        raise ConfigError(f"the run being resumed trains global batches of {recorded}, which {replicas} replicas "
                          f"cannot share evenly: resume on a number of replicas that divides {recorded}")
    if recorded != batch_size * replicas:
        echo(f"train: resuming with the run's global batch of {recorded}: {recorded // replicas} per replica on "
             f"{replicas} replica(s) (not --batch-size {batch_size})")
    return recorded


class StreamRecord:
    """Writes checkpoints/stream.json after each backup (the chief's only; others pass write=False)."""

    def __init__(self, checkpoints: str, identity: dict[str, Any], write: bool) -> None:
        self.path, self.identity, self.write = storage.join(checkpoints, STREAM_RECORD), identity, write

    def backed_up(self, step: int) -> None:
        if not self.write:
            return
        examples = step * self.identity["global_batch"]
        per_pass = self.identity["train_examples"]
        storage.write_json(self.path, {**self.identity, "step": step, "examples_consumed": examples,
                                       "pass": examples // per_pass, "example_in_pass": examples % per_pass})


def describe_start(start: RepeatedStart, step: int, record_bytes: float) -> str:
    """The resume's one line: where the stream starts and what it reads before the first resumed step."""
    point = start.point
    read = point.read_before_first
    return (f"train: resuming at step {step}: pass {point.pass_index + 1}, example {point.offset_in_pass} of the pass; "
            f"{read} records (~{int(read * record_bytes):,} bytes) are read before the first resumed step "
            f"({point.skip_in_shard} skipped in a shard, {point.drop_in_window} replayed in the shuffle window)")
