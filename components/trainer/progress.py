"""Progress within an epoch: a bar on a terminal, a line every `interval` seconds in logs.

Keras' own bar (fit's `verbose`) always finishes an epoch at its full step count, so a run that the
step budget (`--steps 1`) stops after one step of a 71-step epoch still shows "71/71". This callback
knows the budget: an epoch's target is the steps it will really run.

    progress = StepProgress(steps_per_epoch=71, total_steps=1, global_batch=64, echo=print)
    model.fit(..., callbacks=[progress], verbose=0)     # prints "1/1 ...", never "71/71"
"""
from __future__ import annotations

import sys
import time
from typing import Callable

import tf_keras as keras

from ..core.progress import format_rate, format_seconds, progress_text

LOG_INTERVAL_SECONDS = 30.0


def epoch_target(epoch: int, optimizer_step: int, steps_per_epoch: int, total_steps: int | None) -> tuple[int, int]:
    """(first step, last step) within `epoch` that this run will train: resumed runs start inside it,
    the step budget may end it early. An epoch is always `steps_per_epoch` optimizer steps long.

    >>> epoch_target(0, 0, 71, 1), epoch_target(1, 100, 71, 120), epoch_target(2, 142, 71, None)
    ((0, 1), (29, 49), (0, 71))
    """
    offset = min(max(optimizer_step - epoch * steps_per_epoch, 0), steps_per_epoch)
    if total_steps is None:
        return offset, steps_per_epoch
    return offset, min(steps_per_epoch, offset + max(total_steps - optimizer_step, 0))


def _metrics_text(logs: dict | None) -> str:
    return ", ".join(f"{name} {float(value):.4f}" for name, value in (logs or {}).items())


class StepProgress(keras.callbacks.Callback):
    """Use with `fit(verbose=0)`. `tty` defaults to whether stdout is a terminal; `clock` is injectable."""

    def __init__(self, steps_per_epoch: int, total_steps: int | None, global_batch: int,
                 echo: Callable[[str], None] = print, interval: float = LOG_INTERVAL_SECONDS,
                 tty: bool | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.steps_per_epoch, self.total_steps, self.global_batch = steps_per_epoch, total_steps, global_batch
        self.echo, self.interval, self.clock = echo, interval, clock
        self.tty = sys.stdout.isatty() if tty is None else tty
        self._first = self._target = self._done = 0
        self._started = self._last_line = 0.0
        self._bar: keras.utils.Progbar | None = None
        self.step_offset = 0  # fine-tuning: the steps earlier phases' optimizers made

    def _epoch_name(self, epoch: int) -> str:
        return f"epoch {epoch + 1}/{self.params.get('epochs', '?')}"

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        step = self.step_offset + int(self.model.optimizer.iterations.numpy())
        self._first, self._target = epoch_target(epoch, step, self.steps_per_epoch, self.total_steps)
        self._done, self._epoch = self._first, epoch
        self._started = self._last_line = self.clock()
        if self.tty:
            print(f"{self._epoch_name(epoch)}", flush=True)
            self._bar = keras.utils.Progbar(self._target - self._first, unit_name="step")

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        self._done = min(self._done + 1, self._target)
        if self._bar is not None:
            names = list(logs or {})
            self._bar.stateful_metrics.update(names)  # Keras' logs are running means already
            self._bar.update(self._done - self._first, [(k, float(v)) for k, v in (logs or {}).items()])
            return
        now = self.clock()
        if now - self._last_line >= self.interval:
            self._last_line = now
            self.echo(f"train: {self._epoch_name(self._epoch)}: {self._line(now - self._started)}, "
                      f"{_metrics_text(logs)}")

    def _line(self, elapsed: float) -> str:
        done, total = self._done - self._first, self._target - self._first
        text = progress_text(done, total, elapsed, "steps")
        if done and elapsed > 0:
            text += f", {format_rate(done * self.global_batch / elapsed, 'ex')}"
        return text

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        elapsed = self.clock() - self._started
        if self._bar is not None:
            self._bar.stateful_metrics.update(logs or {})
            self._bar.update(self._done - self._first, [(k, float(v)) for k, v in (logs or {}).items()], finalize=True)
            self._bar = None
            return
        self.echo(f"train: {self._epoch_name(epoch)}: {self._done - self._first}/{self._target - self._first} "
                  f"steps in {format_seconds(elapsed)}, {_metrics_text(logs)}")
