"""The training recipe (trainer/optimizers.py, detector.py's GIoU): its options checked, the moving average and the
schedule as the optimizer applies them, and the box loss on planted boxes."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from shardflow.core.errors import ConfigError
from shardflow.trainer.config import FitOptions, ModelOptions
from shardflow.trainer.detector import BOX, SIZE, centernet_loss_parts, centre_giou, generalized_iou
from shardflow.trainer.detector_targets import detection_targets
from shardflow.trainer.optimizers import Recipe, adam

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("options, named", [
    ({"schedule": "linear"}, "'linear'"), ({"warmup_epochs": -1}, "-1"), ({"ema_momentum": 1.0}, "1.0"),
    ({"ema_momentum": True}, "True")])
def test_bad_recipe_values_are_refused_naming_them(options: dict, named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        FitOptions(epochs=1, **options)
    with pytest.raises(ConfigError, match="'mse'"):
        ModelOptions(box_loss="mse")


def _trained_weights(optimizer: keras.optimizers.Optimizer, steps: int) -> tuple[list[np.ndarray], np.ndarray]:
    """A one-weight linear model fitted `steps` steps on a fixed batch: the weight after each step, and at the end."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1, use_bias=False)])
    model.compile(optimizer=optimizer, loss="mse")
    seen: list[np.ndarray] = []
    record = keras.callbacks.LambdaCallback(on_train_batch_end=lambda *_: seen.append(model.get_weights()[0].copy()))
    initial = model.get_weights()[0].copy()
    model.fit(np.ones((4, 1)), np.full((4, 1), 3.0), batch_size=4, epochs=steps, verbose=0, callbacks=[record])
    return [initial, *seen], model.get_weights()[0]


def test_the_model_ends_with_the_ramped_moving_average_of_its_weights() -> None:
    steps, momentum = 30, 0.9
    history, final = _trained_weights(adam(0.1, Recipe(0.1, "constant", 0.0, momentum)), steps)
    average = history[0]
    for step, weight in enumerate(history[1:]):  # the average updated after each step t with its own momentum
        rate = min(momentum, (1 + step) / (10 + step))
        average = rate * average + (1 - rate) * weight
    np.testing.assert_allclose(final, average, rtol=1e-5)
    assert abs(final.item() - history[-1].item()) > 1e-3  # not the last raw weight


def test_warm_up_then_cosine_move_the_weights_by_the_scheduled_rates() -> None:
    """Plain Adam moves a weight by about its rate each step (m/sqrt(v) ~ 1 on a steady gradient): the steps taken
    follow the schedule, 0 at the start, the peak after the warm-up, near 0 at the end."""
    history, _ = _trained_weights(adam(0.01, Recipe(0.01, "cosine", 1.0, 0.0), phase_steps=20, steps_per_epoch=4), 20)
    moves = np.abs(np.diff(np.ravel(history)))
    assert moves[0] == 0.0  # step 0 at rate 0
    assert moves[4] == pytest.approx(0.01, rel=0.02)  # the warm-up's end: the peak
    assert moves[12] == pytest.approx(0.01 * (1 + np.cos(np.pi * 8 / 16)) / 2, rel=0.05)
    assert moves[-1] < 0.0005


def _targets() -> dict[str, tf.Tensor]:
    boxes = tf.constant([[[0.1, 0.2, 0.5, 0.4], [0.6, 0.5, 0.9, 0.95]]])
    return detection_targets(boxes, tf.constant([[0, 1]]), tf.constant([2]), 16, 2)


def _outputs_from(targets: dict[str, tf.Tensor], size_scale: float = 1.0) -> dict[str, tf.Tensor]:
    """Head maps holding the true sizes (times `size_scale`) and offsets at the true centre cells."""
    def at_centres(values: tf.Tensor) -> tf.Tensor:
        flat = tf.scatter_nd(tf.reshape(targets["indices"], [-1, 1]), tf.reshape(values, [-1, 2]), [256, 2])
        return tf.reshape(flat, [1, 16, 16, 2])
    return {"heatmap": targets["heatmap"], SIZE: at_centres(targets[SIZE] * size_scale),
            "offset": at_centres(targets["offset"])}


def test_giou_is_one_for_the_true_boxes_and_falls_as_the_sizes_go_wrong() -> None:
    targets = _targets()
    np.testing.assert_allclose(centre_giou(_outputs_from(targets), targets, (16, 16)).numpy(), [[1.0, 1.0]], atol=1e-5)
    half = centre_giou(_outputs_from(targets, 0.5), targets, (16, 16)).numpy()
    np.testing.assert_allclose(half, [[0.25, 0.25]], atol=1e-5)  # a box of half the sides inside: IoU = GIoU = 1/4
    assert float(centernet_loss_parts(targets, _outputs_from(targets, 0.5))[BOX]) == pytest.approx(0.75, abs=1e-5)


def test_giou_of_disjoint_boxes_is_negative_and_its_loss_pulls_the_size_up() -> None:
    assert float(generalized_iou(tf.constant([0., 0., 1., 1.]), tf.constant([0., 2., 1., 3.]))) == pytest.approx(-1 / 3)
    targets = _targets()
    outputs = _outputs_from(targets, 0.5)
    with tf.GradientTape() as tape:
        tape.watch(outputs[SIZE])
        loss = centernet_loss_parts(targets, outputs)[BOX]
    gradient = tape.gradient(loss, outputs[SIZE]).numpy().reshape(-1, 2)[targets["indices"].numpy().ravel()]
    assert (gradient < 0).all()  # growing the too-small boxes lowers the loss
