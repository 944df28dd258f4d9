"""Keras callbacks of a training run: fault-tolerant backups, an exact step budget, timing and history.

    callbacks = [StepAndEpochBackup(backup_dir, save_freq=100), StopAtStep(600),
                 TrainTimer(global_batch), HistoryFile("MOUT/history.json", write=True)]
"""
from __future__ import annotations

import time
from typing import Callable

import tf_keras as keras

from ..core import storage
from .resume import backup_step


class StepAndEpochBackup(keras.callbacks.BackupAndRestore):
    """BackupAndRestore that saves every `save_freq` steps *and* at each epoch end, and keeps its backup.

    Stock Keras saves either per epoch or per N steps. Saving the epoch end as "the last batch of
    the epoch" makes a restart continue with the next epoch at step 0, the stock resume logic.
    `backed_up(step)` is told the step each backup resumes at, once the backup is whole: the step of
    the counters the checkpoint holds, so an epoch that the step budget stops early records its own
    batch, not the epoch's end. Stock Keras deletes the backup when `fit` ends; it is kept here until
    the run's output is complete (executor.py), so a kill after training (in the export) resumes at
    the end of training instead of its beginning.
    """

    def __init__(self, backup_dir: str, save_freq: int, backed_up: Callable[[int], None] | None = None) -> None:
        super().__init__(backup_dir, save_freq=save_freq, delete_checkpoint=False)
        self.backed_up = backed_up

    def _backup(self, epoch: int, batch: int = 0) -> None:
        super()._backup(epoch, batch)  # saves the state's (epoch, batch) variables, whatever the arguments say
        if self.backed_up is not None:
            state = self._training_state
            self.backed_up(backup_step(int(state._ckpt_saved_epoch.numpy()), int(state._ckpt_saved_batch.numpy()),
                                       int(self.params["steps"])))

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        super().on_epoch_end(epoch, logs)
        self._batches_count = 0
        self._backup(epoch=epoch, batch=self.params["steps"] - 1)


class StopAtStep(keras.callbacks.Callback):
    """Stops training when the optimizer has made exactly `total_steps` steps (also after a resume)."""

    def __init__(self, total_steps: int) -> None:
        super().__init__()
        self.total_steps = total_steps

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        if int(self.model.optimizer.iterations.numpy()) >= self.total_steps:
            self.model.stop_training = True


class TrainTimer(keras.callbacks.Callback):
    """Seconds and steps of the training part of each epoch (validation excluded).

    `resumed_from_step` is the optimizer's step when training began: > 0 after a restored backup.
    """

    def __init__(self, global_batch: int) -> None:
        super().__init__()
        self.global_batch = global_batch
        self.epochs: list[dict] = []
        self.resumed_from_step = 0
        self._start = 0.0
        self._steps = 0
        self._train_seconds: float | None = None

    def on_train_begin(self, logs: dict | None = None) -> None:
        self.resumed_from_step = int(self.model.optimizer.iterations.numpy())

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self._start, self._steps, self._train_seconds = time.perf_counter(), 0, None

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        self._steps += 1

    def on_test_begin(self, logs: dict | None = None) -> None:
        if self._train_seconds is None:  # validation inside fit starts: the training part is over
            self._train_seconds = time.perf_counter() - self._start

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        seconds = self._train_seconds if self._train_seconds is not None else time.perf_counter() - self._start
        seconds = round(seconds, 3)  # the rate from the seconds recorded, as steady_rate computes it from them
        examples = self._steps * self.global_batch
        self.epochs.append({"epoch": epoch + 1, "steps": self._steps, "seconds": seconds,
                            "examples_per_second": round(examples / seconds, 1) if seconds > 0 else None})

    def steady_rate(self) -> float | None:
        """Examples/s over the epochs after the first (which pays for tracing), or the first if alone."""
        timed = self.epochs[1:] or self.epochs
        steps = sum(e["steps"] for e in timed)
        seconds = sum(e["seconds"] for e in timed)
        return steps * self.global_batch / seconds if seconds > 0 and steps else None


class HistoryFile(keras.callbacks.Callback):
    """history.json (a local path or a URI), rewritten whole after every epoch and kept across resumed runs."""

    def __init__(self, path: str, write: bool) -> None:
        super().__init__()
        self.path, self.write = path, write
        self.entries: list[dict] = storage.read_json(path)["epochs"] if storage.is_file(path) else []
        # Fine-tuning (fine_tuning.py): the phase's name, and the steps earlier phases' optimizers made.
        self.phase: str | None = None
        self.step_offset = 0

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        entry = {"epoch": epoch + 1, "optimizer_steps": self.step_offset + int(self.model.optimizer.iterations.numpy()),
                 **({"phase": self.phase} if self.phase else {}), **{k: float(v) for k, v in (logs or {}).items()}}
        # A resumed run repeats the epoch it was killed in: the newer entry replaces the older.
        self.entries = [e for e in self.entries if e["epoch"] < entry["epoch"]] + [entry]
        if self.write:
            storage.write_json(self.path, {"epochs": self.entries})
