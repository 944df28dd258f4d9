"""Where a killed run resumes, and the proof that it resumes the same order.

Keras' BackupAndRestore restores the weights, the optimizer and its (epoch, batch) counters, but
`fit` opens a new iterator: the data would start again at its beginning. The training stream is a
pure function of what `StreamOrder` holds (core/stream_position.py), so the Trainer reads the
backup's counters before `fit` and builds the stream at step × global batch instead.

`checkpoints/stream.json` is the stream record, written by the chief before the first step (the
order and the global batch) and rewritten whole after every backup (the same, plus the backup's
position). A rerun that finds a backup compares its order with the record's and refuses any
difference in one line; a backup without its record is refused (its order is unknown). A resumed run
keeps the recorded global batch, whatever its number of workers: the per-replica batch follows, and
a worker count that cannot split it is refused. The position itself is always taken from the
checkpoint (written atomically by TensorFlow), so a kill between the checkpoint and the record
cannot make them disagree.

    order = StreamOrder.of(config.input, task.train_manifest, train_examples=1438)
    record = resumed_record("MOUT/checkpoints", order)               # None when there is no backup
    step = saved_step("MOUT/checkpoints", steps_per_epoch=45)        # None when there is no backup
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Callable

import tensorflow as tf
import tf_keras as keras

from ..core import storage
from ..core.errors import ConfigError
from ..core.manifest import Manifest
from ..core.reader import shuffle_window
from ..core.stream_read import RepeatedStart
from .config import InputOptions
from .fine_tuning import DONE_SUFFIX
from .record_order import RecordOrderWriter

STREAM_RECORD = "stream.json"
_EPOCH = "ckpt_saved_epoch/.ATTRIBUTES/VARIABLE_VALUE"  # tf_keras' WorkerTrainingState variables
_BATCH = "ckpt_saved_batch/.ATTRIBUTES/VARIABLE_VALUE"
# What marks a whole backup: the CheckpointManager's state file (written after the checkpoint it names), or
# a phase's saved end (fine_tuning.py, its JSON written last).
_BACKUP_MARKS = ("/chief/checkpoint", f"{DONE_SUFFIX}/phase.json")


def backup_step(epoch: int, batch: int, steps_per_epoch: int) -> int | None:
    """The optimizer step (counted over epochs from 0) a backup of (epoch, batch) resumes at, as Keras' restore
    counts it: batch -1 is a backup at epoch granularity.

    >>> backup_step(1, 2, 10), backup_step(1, 9, 10), backup_step(1, -1, 10), backup_step(-1, -1, 10)
    (13, 20, 20, None)
    """
    if batch >= 0:  # saved after batch `batch` of epoch `epoch` (the last batch: the next epoch's step 0)
        return epoch * steps_per_epoch + batch + 1
    return (epoch + 1) * steps_per_epoch if epoch >= 0 else None


def saved_step(backup_dir: str, steps_per_epoch: int) -> int | None:
    """The step the backup in `backup_dir` resumes at; None when there is none."""
    latest = tf.train.latest_checkpoint(storage.join(backup_dir, "chief"))  # BackupAndRestore's read directory
    if not latest:
        return None
    reader = tf.train.load_checkpoint(latest)
    return backup_step(int(reader.get_tensor(_EPOCH)), int(reader.get_tensor(_BATCH)), steps_per_epoch)


def restore_backup(model: keras.Model, backup_dir: str) -> None:
    """The weights and optimizer of the backup in `backup_dir`, as BackupAndRestore loads them, without `fit`
    (which, given a backup at the step budget, would train one step more before the budget stops it)."""
    latest = tf.train.latest_checkpoint(storage.join(backup_dir, "chief"))
    tf.train.Checkpoint(model=model).read(latest).expect_partial()  # "model": the name Keras' checkpoint uses


def has_backup(checkpoints: str) -> bool:
    """Whether `checkpoints` holds anything a rerun resumes from (a whole backup of any phase)."""
    return any(path.replace("\\", "/").endswith(_BACKUP_MARKS) for path in storage.list_files(checkpoints))


@dataclass(frozen=True, kw_only=True)
class StreamOrder:
    """What decides the training stream's endless order of records; the global batch then cuts it into steps.

    `window`: the records permuted together (`shuffle_buffer_mb` over the split's mean record size, at
    most one pass: the order the stream really has). `folds`: `FoldSelection.to_json()` of the folds
    trained on, None for the whole split. `shards`: (path, examples, bytes) of the split's shards, in
    the manifest's order. `train_examples`: one pass, derived from the shards and the folds.
    """

    split: str
    seed: int
    shuffle_buffer_mb: float
    window: int
    folds: dict[str, Any] | None
    shards: tuple[tuple[str, int, int], ...]
    train_examples: int

    def __post_init__(self) -> None:
        for name in ("seed", "window", "train_examples"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or (name != "seed" and value < 0):
                raise ConfigError(f"stream order: {name} must be an integer{' >= 0' * (name != 'seed')}, got {value!r}")
        if not isinstance(self.shards, tuple) or not all(isinstance(s, tuple) and len(s) == 3 for s in self.shards):
            raise ConfigError(f"stream order: shards must be (path, examples, bytes) tuples, got {self.shards!r}")

    @classmethod
    def of(cls, inputs: InputOptions, manifest: Manifest, train_examples: int) -> StreamOrder:
        split = inputs.train_split
        window = min(shuffle_window(manifest, split, inputs.shuffle_bytes), train_examples)  # as plan_repeated caps it
        return cls(split=split, seed=inputs.seed, shuffle_buffer_mb=inputs.shuffle_buffer_mb, window=window,
                   folds=inputs.train_folds.to_json() if inputs.train_folds is not None else None,
                   shards=tuple((s.path, s.num_examples, s.bytes) for s in manifest.splits[split].shards),
                   train_examples=train_examples)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "shards": [list(shard) for shard in self.shards]}

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> StreamOrder | None:
        """The order a stream record holds; None when it lacks a field (a record of an older shardflow)."""
        try:
            return cls(split=record["split"], seed=record["seed"], shuffle_buffer_mb=record["shuffle_buffer_mb"],
                       window=record["window"], folds=record["folds"], train_examples=record["train_examples"],
                       shards=tuple(tuple(shard) for shard in record["shards"]))
        except KeyError:
            return None

    def differences(self, now: StreamOrder) -> list[str]:
        """What `now` changes of this (recorded) order, one phrase per option given; what follows from another
        option (another split's shards, the window of fewer examples) is not repeated."""
        if self.split != now.split:
            return [f"--train-split was {self.split!r}, is {now.split!r} now"]
        found = []
        if self.seed != now.seed:
            found.append(f"--seed was {self.seed}, is {now.seed} now")
        if self.window != now.window and self.shuffle_buffer_mb != now.shuffle_buffer_mb:
            found.append(f"--shuffle-buffer-mb was {self.shuffle_buffer_mb:g} (a shuffle window of {self.window:,} "
                         f"records), is {now.shuffle_buffer_mb:g} now ({now.window:,} records)")
        if self.folds != now.folds:
            found.append(f"the train folds were {_folds_text(self.folds)}, are {_folds_text(now.folds)} now")
        if self.shards != now.shards:
            found.append(f"the {now.split} split's shards were {_shards_text(self.shards)}, are "
                         f"{_shards_text(now.shards)} now")
        return found


def _folds_text(folds: dict[str, Any] | None) -> str:
    if folds is None:
        return "the whole split"
    return f"{','.join(map(str, folds['folds']))} of {folds['count']} (seed {folds['seed']})"


def _shards_text(shards: tuple[tuple[str, int, int], ...]) -> str:
    examples, size = sum(s[1] for s in shards), sum(s[2] for s in shards)
    return f"{len(shards)} files of {examples:,} examples ({size:,} bytes: {', '.join(s[0] for s in shards)})"


def read_record(checkpoints: str) -> dict[str, Any] | None:
    path = storage.join(checkpoints, STREAM_RECORD)
    return storage.read_json(path) if storage.is_file(path) else None


def resumed_record(checkpoints: str, order: StreamOrder) -> dict[str, Any] | None:
    """The stream record of the backup this run resumes; None when `checkpoints` holds no backup (a record
    alone, of a run killed before its first backup, is a fresh start's).

    ConfigError (one line) when the backup has no record, or a record of another order than `order`:
    resuming would train the rest of the run on another sequence of examples.
    """
    if not has_backup(checkpoints):
        return None
    record = read_record(checkpoints)
    if record is None:
        raise ConfigError(f"{checkpoints} holds a backup without its stream record ({STREAM_RECORD}), so the order "
                          f"it trained in is unknown: remove {checkpoints} to train anew")
    recorded = StreamOrder.from_record(record)
    if recorded is None:
        raise ConfigError(f"{storage.join(checkpoints, STREAM_RECORD)} does not record the order its backup trained "
                          f"in (an older shardflow's): remove {checkpoints} to train anew")
    changed = recorded.differences(order)
    if changed:
        raise ConfigError(f"the backup in {checkpoints} trained in another order: {'; '.join(changed)}; rerun with "
                          f"the backup's values, or remove {checkpoints} to train anew")
    return record


def run_global_batch(record: dict[str, Any] | None, batch_size: int, replicas: int,
                     echo: Callable[[str], None]) -> int:
    """The global batch of this run: the resumed run's (its stream `record`), else batch_size × replicas.

    ConfigError (one line) when the replicas cannot share the recorded global batch evenly.
    """
    if record is None:
        return batch_size * replicas
    recorded = int(record["global_batch"])
    if recorded % replicas:
        raise ConfigError(f"the run being resumed trains global batches of {recorded}, which {replicas} replicas "
                          f"cannot share evenly: resume on a number of replicas that divides {recorded}")
    if recorded != batch_size * replicas:
        echo(f"train: resuming with the run's global batch of {recorded}: {recorded // replicas} per replica on "
             f"{replicas} replica(s) (not --batch-size {batch_size})")
    return recorded


class StreamRecord:
    """stream.json and the record order's bounds, kept with the backups (stream.json: the chief's only).

    `starting(step)` before each phase's first step: a fresh run (step 0) records its order before
    training; the record order drops what it had read past `step`. `backed_up(step)` after each whole
    backup; `finished(steps)` when training has ended.
    """

    def __init__(self, checkpoints: str, order: StreamOrder, global_batch: int, steps_per_epoch: int, write: bool,
                 order_file: RecordOrderWriter | None = None) -> None:
        self.path, self.write, self.order_file = storage.join(checkpoints, STREAM_RECORD), write, order_file
        self.identity = {**order.to_json(), "global_batch": global_batch, "steps_per_epoch": steps_per_epoch}

    def starting(self, step: int) -> None:
        if self.write and step == 0:  # a resumed run never starts at 0: its backup is after a step
            storage.write_json(self.path, self.identity)
        if self.order_file is not None:
            self.order_file.restart(step)

    def backed_up(self, step: int) -> None:
        if not self.write:
            return
        examples = step * self.identity["global_batch"]
        per_pass = self.identity["train_examples"]
        storage.write_json(self.path, {**self.identity, "step": step, "examples_consumed": examples,
                                       "pass": examples // per_pass, "example_in_pass": examples % per_pass})

    def finished(self, steps: int) -> None:
        if self.order_file is not None:
            self.order_file.end(steps)


def describe_start(start: RepeatedStart, step: int, record_bytes: float) -> str:
    """The resume's one line: where the stream starts and what it reads before the first resumed step."""
    point = start.point
    read = point.read_before_first
    return (f"train: resuming at step {step}: pass {point.pass_index + 1}, example {point.offset_in_pass} of the pass; "
            f"{read} records (~{int(read * record_bytes):,} bytes) are read before the first resumed step "
            f"({point.skip_in_shard} skipped in a shard, {point.drop_in_window} replayed in the shuffle window)")
