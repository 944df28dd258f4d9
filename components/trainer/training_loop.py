"""The Trainer's fit: one phase, or the two phases of fine-tuning a backbone (fine_tuning.py).

Every phase trains with the same callbacks (timer, history, progress), a backup of its own in
`checkpoints/` (the one-phase run's is `checkpoints/` itself, as before fine-tuning existed), the step
budget, and TensorBoard on the chief. The streams come ready for `fit` (input_pipeline.py): named
inputs, and with `--class-weight` per-example (per-pixel for masks) sample weights. Backups outlive
`fit` (callbacks.py): a phase whose backup is already at its last step, because the run was killed after
training (in the export, say), is restored from it instead of trained again.

    steps = fit_phases(config, task, placement, out_root, model, streams, (timer, history, progress), record, echo)
"""
from __future__ import annotations

import contextlib
import math
from typing import Callable, Iterator

import tf_keras as keras

from ..core import storage
from ..core.reader import record_bytes
from .callbacks import HistoryFile, StepAndEpochBackup, StopAtStep, TrainTimer
from .config import TrainerConfig
from .distribution import Placement
from .fine_tuning import Phase, finished_phase, freeze_for, phase_plan, restore_phase_end, save_phase_end
from .input_pipeline import Streams, corrupt_shards_named
from .model_builder import compile_model, recipe_of
from .optimizers import is_plain
from .outputs import CHECKPOINTS, TENSORBOARD
from .progress import StepProgress
from .resume import StreamRecord, describe_start, restore_backup, saved_step
from .task import TrainingTask



def fit_phases(config: TrainerConfig, task: TrainingTask, placement: Placement, root: str, model: keras.Model,
               streams: Streams, watchers: tuple[TrainTimer, HistoryFile, StepProgress], record: StreamRecord,
               echo: Callable[[str], None]) -> int:
    """Trains every phase of the plan not yet done; returns the optimizer steps of all phases.

    Each phase's stream starts where its backup resumes (resume.py), else at the phase's first epoch."""
    timer, history, progress = watchers
    epochs = config.fit.epochs or math.ceil(config.fit.steps / streams.steps_per_epoch)
    steps = 0
    for phase in (plan := phase_plan(config, epochs, recipe_of(task, config).learning_rate)):
        checkpoints = storage.join(root, CHECKPOINTS, *([phase.name] if len(plan) > 1 else []))
        done = finished_phase(storage.join(root, CHECKPOINTS), phase) if len(plan) > 1 else None
        if done is not None:  # a killed run's completed phase: its end weights, not its epochs again
            restore_phase_end(model, storage.join(root, CHECKPOINTS), phase)
            steps = done["optimizer_steps"]
            continue
        if config.model.is_backbone or not is_plain(recipe_of(task, config)):
            _prepare_phase(model, task, config, placement, phase,
                           last_step(phase, streams.steps_per_epoch, config.fit.steps), streams.steps_per_epoch)
        history.phase, history.step_offset = (phase.name if config.model.is_backbone else None), steps
        progress.step_offset = steps
        start = saved_step(checkpoints, streams.steps_per_epoch)
        first = phase.first_epoch * streams.steps_per_epoch if start is None else start
        record.starting(first)
        if start is not None and start >= last_step(phase, streams.steps_per_epoch, config.fit.steps):
            restore_backup(model, checkpoints)  # trained to its end before a kill (in the export, say)
            timer.resumed_from_step = int(model.optimizer.iterations.numpy())
            echo(f"train: the backup in {checkpoints} is at the end of training (step {start}): nothing left to train")
        else:
            if start is not None:
                echo(describe_start(streams.start_of(start), start,
                                    record_bytes(task.train_manifest, config.input.train_split)))
            _fit_phase(config, task, placement, root, model, streams, watchers, record, phase, checkpoints, first)
        steps += int(model.optimizer.iterations.numpy())
        if phase is not plan[-1]:
            save_phase_end(model, storage.join(root, CHECKPOINTS), phase, steps)
    record.finished(steps)
    return steps


def last_step(phase: Phase, steps_per_epoch: int, budget: int | None) -> int:
    """The step (counted over epochs from 0) at which `phase` stops: its last epoch's end, or earlier where
    StopAtStep stops it (the phase's own optimizer, which starts at 0 in a phase, reaching the budget)."""
    end = phase.end_epoch * steps_per_epoch
    return end if budget is None else min(end, phase.first_epoch * steps_per_epoch + budget)


def _fit_phase(config: TrainerConfig, task: TrainingTask, placement: Placement, root: str, model: keras.Model,
               streams: Streams, watchers: tuple[TrainTimer, HistoryFile, StepProgress], record: StreamRecord,
               phase: Phase, checkpoints: str, first: int) -> None:
    """One phase's `fit`, its stream from step `first` (its backup's, or its first epoch's)."""
    train = streams.train_from(first)
    backup = StepAndEpochBackup(checkpoints, save_freq=config.fit.checkpoint_every, backed_up=record.backed_up)
    callbacks = [backup, *watchers]
    callbacks += [StopAtStep(config.fit.steps)] if config.fit.steps else []
    board = _tensorboard(root, streams) if placement.is_chief else None  # others would repeat the chief's
    callbacks += [board] if board else []
    with corrupt_shards_named(streams.train_files + streams.eval_files, task.train_manifest.compression), \
            _ended_on_error(board):
        model.fit(train, initial_epoch=phase.first_epoch, epochs=phase.end_epoch,
                  steps_per_epoch=streams.steps_per_epoch,
                  validation_data=streams.eval,
                  callbacks=callbacks, verbose=0)  # StepProgress reports instead of Keras' bar


@contextlib.contextmanager
def _ended_on_error(board: keras.callbacks.TensorBoard | None) -> Iterator[None]:
    """Ends the TensorBoard callback when `fit` raises, as Keras does only when it returns.

    The callback makes its writer this thread's default, with a `record_if` on its own step count, in
    on_train_begin, and undoes that in on_train_end, which a failed fit never reaches. Left in place,
    every later summary in the process (the input-rate scalars, the next trial of a search) was
    recorded only when that dead step count happened to be a multiple of the logging interval.
    """
    try:
        yield
    except BaseException:
        if board is not None and board._prev_summary_state:  # pushed by on_train_begin; empty if fit never began
            board.on_train_end()
        raise


def _prepare_phase(model: keras.Model, task: TrainingTask, config: TrainerConfig, placement: Placement,
                   phase: Phase, end_step: int, steps_per_epoch: int) -> None:
    """A backbone's layers frozen or unfrozen for `phase`, and a fresh optimizer at its learning rate, its
    schedule over the phase's steps (up to `end_step`, counted over epochs from 0)."""
    with placement.strategy.scope():
        if config.model.is_backbone:
            freeze_for(model, phase, config.fit.fine_tune_layers)
        compile_model(model, task, config, phase.learning_rate, end_step - phase.first_epoch * steps_per_epoch,
                      steps_per_epoch)


def tensorboard_step_every(steps_per_epoch: int) -> int:
    """Per-step TensorBoard scalars about 10 times an epoch, at least every 100 steps."""
    return max(1, min(100, steps_per_epoch // 10))


def _tensorboard(root: str, streams: Streams) -> keras.callbacks.TensorBoard:
    return keras.callbacks.TensorBoard(storage.join(root, TENSORBOARD), write_graph=False, profile_batch=0,
                                       update_freq=tensorboard_step_every(streams.steps_per_epoch))

