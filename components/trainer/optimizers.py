"""The optimizer of a training phase: Adam, its learning rate over the phase's steps, and a moving average.

The recipe's parts are FitOptions' `learning_rate` (the peak), `schedule`, `warmup_epochs` and `ema_momentum`; an
option left None is the task's choice (`task_recipe`). Classifiers and segmenters keep Adam at a constant rate, as before, so the
same flags give the same weights. A detector's defaults are what won on its benchmarks (docs/trainer.md#detection).

- **Warm-up**: the rate climbs linearly from 0 over the first `warmup_epochs`: Adam's first steps, with its
  second-moment estimate still near zero, are the largest, and a freshly initialised head's gradients the wildest.
- **Cosine**: then decays to 0 at the phase's last step (Loshchilov & Hutter's SGDR without restarts), as
  YOLOv8's and Model Garden's detection recipes do; a constant rate keeps the last epochs' updates as coarse
  as the first.
- **EMA**: Keras keeps the average among the optimizer's variables (so a backup and its exact resume carry it)
  and overwrites the trained weights with it when `fit` ends; validation during training sees the raw weights.
  Its momentum ramps up as `tf.train.ExponentialMovingAverage`'s with `num_updates` does, min(momentum, (1 + t) /
  (10 + t)) at step t: Keras' fixed momentum keeps momentum^t of the random initial weights in the average (0.78 of
  it after 250 steps at 0.999), while the ramp averages over about the last tenth of the steps taken.

The schedule is a function of the optimizer's step count, which the backups restore: a resumed run continues
on the same curve.

    >>> rate = learning_rate(0.01, "cosine", phase_steps=100, warmup_steps=10)
    >>> [round(float(rate(step)), 4) for step in (0, 5, 10, 55, 100)]
    [0.0, 0.005, 0.01, 0.005, 0.0]
    >>> learning_rate(0.01, "constant", phase_steps=100, warmup_steps=0)
    0.01
"""
from __future__ import annotations

import math
from typing import NamedTuple

import tensorflow as tf
import tf_keras as keras

from ..core.box_schema import DETECTION_TASK


class Recipe(NamedTuple):
    learning_rate: float
    schedule: str
    warmup_epochs: float
    ema_momentum: float


CONSTANT = Recipe(1e-3, "constant", 0.0, 0.0)
# A detector's, measured one change at a time on the demo boxes (docs/trainer.md#the-recipe): cosine from 0.002
# after a warm-up epoch +0.031 AP over a constant 0.001; EMA alone +0.010 but -0.046 beside the cosine, so it is off.
DETECTION = Recipe(2e-3, "cosine", 1.0, 0.0)


def task_recipe(kind: str, learning_rate: float | None, schedule: str | None, warmup_epochs: float | None,
                ema_momentum: float | None) -> Recipe:
    """The options given, the task's defaults for those left None.

    >>> task_recipe("classification", None, None, None, None)
    Recipe(learning_rate=0.001, schedule='constant', warmup_epochs=0.0, ema_momentum=0.0)
    >>> task_recipe("detection", 0.01, "constant", None, 0.0)
    Recipe(learning_rate=0.01, schedule='constant', warmup_epochs=1.0, ema_momentum=0.0)
    """
    default = DETECTION if kind == DETECTION_TASK else CONSTANT
    return Recipe(float(learning_rate if learning_rate is not None else default.learning_rate),
                  schedule if schedule is not None else default.schedule,
                  float(warmup_epochs if warmup_epochs is not None else default.warmup_epochs),
                  float(ema_momentum if ema_momentum is not None else default.ema_momentum))


# Examples per replica and step when --batch-size is not given. A detector's 4, measured on the demo boxes (10
# epochs, 1,600 images at 96 px; docs/trainer.md#the-recipe): AP 0.725 at 4, 0.685 at 8, 0.650 at 16, 0.584 at 32
# and 0.500 at 64, for 364-371 CPU-s each: its 250 steps at 64 were what limited it. On a GPU a larger batch fills
# the device; give it with --batch-size. Other tasks keep the 64 their figures were taken at.
TASK_BATCH = {DETECTION_TASK: 4}
DEFAULT_BATCH = 64


# Train-time ops when --augment is not given. A detector's is a left-right flip, as YOLO's recipe flips
# (docs/trainer.md#the-recipe). 10 epochs in batches of 4, AP on the demo boxes (1,600 at 96 px) 0.725 without,
# 0.723 flip, 0.736 flip,crop; on the mixed set (900 of 64-200 px letterboxed to 128) 0.524, 0.564 and 0.534: the
# crop lost on the set of mixed sizes, where shardflow is furthest behind YOLO. Other tasks augment only if asked.
TASK_AUGMENT = {DETECTION_TASK: ("flip",)}


def task_augment(kind: str, augment: tuple[str, ...] | None) -> tuple[str, ...]:
    """The ops given (`()`: none), else the task's.

    >>> task_augment("detection", None), task_augment("classification", None), task_augment("detection", ())
    (('flip',), (), ())
    """
    return augment if augment is not None else TASK_AUGMENT.get(kind, ())


# A detector's box loss when --box-loss is not given: CenterNet's L1 plus 1 - GIoU of the box at each centre
# (detector.py). 10 epochs of 4 with the flip, AP on the mixed set (900 of 64-200 px letterboxed to 128) 0.564 with
# L1 alone, 0.595 with GIoU (AP75 0.641 -> 0.684, AP50 0.860 -> 0.855): the boxes sit better where shardflow was
# furthest behind YOLO; on the demo boxes (1,600 at 96 px) 0.723 and 0.744. Other tasks have no box loss.
TASK_BOX_LOSS = {DETECTION_TASK: "giou"}


def task_box_loss(kind: str, box_loss: str | None) -> str | None:
    """The box loss given, else the task's (None: the task has none).

    >>> task_box_loss("detection", None), task_box_loss("detection", "l1"), task_box_loss("classification", None)
    ('giou', 'l1', None)
    """
    return box_loss if box_loss is not None else TASK_BOX_LOSS.get(kind)


def task_batch_size(kind: str, batch_size: int | None) -> int:
    """The batch size given, else the task's default.

    >>> task_batch_size("detection", None), task_batch_size("classification", None), task_batch_size("detection", 8)
    (4, 64, 8)
    """
    return batch_size if batch_size is not None else TASK_BATCH.get(kind, DEFAULT_BATCH)


def is_plain(recipe: Recipe) -> bool:
    """Whether the recipe is Adam at a constant rate (the optimizer `compile` gets before the phases are known)."""
    return recipe._replace(learning_rate=CONSTANT.learning_rate) == CONSTANT


def learning_rate(peak: float, schedule: str, phase_steps: int, warmup_steps: int
                  ) -> float | keras.optimizers.schedules.LearningRateSchedule:
    """`peak` as is (constant, no warm-up), or a schedule over the phase's optimizer steps (module docstring)."""
    if schedule == "constant" and not warmup_steps:
        return peak
    warmup_steps = min(warmup_steps, phase_steps)
    # CosineDecay's alpha is the floor as a share of the peak: 1 keeps the peak after the warm-up (constant).
    return keras.optimizers.schedules.CosineDecay(
        0.0 if warmup_steps else peak, decay_steps=max(phase_steps - warmup_steps, 1),
        alpha=1.0 if schedule == "constant" else 0.0, warmup_target=peak if warmup_steps else None,
        warmup_steps=warmup_steps)


def adam(peak: float, recipe: Recipe = CONSTANT, phase_steps: int = 0, steps_per_epoch: int = 0) -> keras.optimizers.Adam:
    """Adam at `peak` under `recipe` for a phase of `phase_steps` steps of `steps_per_epoch` each."""
    warmup_steps = math.ceil(recipe.warmup_epochs * steps_per_epoch)
    rate = learning_rate(peak, recipe.schedule, phase_steps, warmup_steps) if phase_steps else peak
    if recipe.ema_momentum:
        return RampedEmaAdam(rate, use_ema=True, ema_momentum=recipe.ema_momentum)
    return keras.optimizers.Adam(rate)


class RampedEmaAdam(keras.optimizers.Adam):
    """Adam whose weights' moving average has a momentum ramping up to `ema_momentum` (module docstring)."""

    def _update_model_variables_moving_average(self, var_list: list[tf.Variable]) -> None:
        step = tf.cast(self.iterations, tf.float32)
        momentum = tf.minimum(tf.cast(self.ema_momentum, tf.float32), (1.0 + step) / (10.0 + step))

        def update_average(average: tf.Variable, var: tf.Variable) -> None:
            average.assign(momentum * average + (1.0 - momentum) * var)

        for var in var_list:
            average = self._model_variables_moving_average[self._index_dict[self._var_key(var)]]
            self._distribution_strategy.extended.update(average, update_average, args=(var,), group=False)
