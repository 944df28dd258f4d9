"""tf_keras's code is left unconverted by autograph, the user's own functions are still converted, and the
training is the same (components/trainer/keras_autograph.py)."""
from __future__ import annotations

import pytest

import tensorflow as tf
import tf_keras as keras
from tensorflow.python.autograph.impl import conversion

from shardflow.trainer.distribution import deterministic_ops
from shardflow.trainer.keras_autograph import leave_tf_keras_unconverted

pytestmark = pytest.mark.unit  # in process, small generated tensors


def _user_step(x: tf.Tensor) -> tf.Tensor:
    return x * 2


def test_tf_keras_is_left_unconverted_and_user_code_is_not() -> None:
    leave_tf_keras_unconverted()
    leave_tf_keras_unconverted()  # idempotent: one rule
    from tensorflow.python.autograph.core import config
    assert sum(rule.matches("tf_keras") for rule in config.CONVERSION_RULES) == 1
    assert conversion.is_allowlisted(keras.Model.train_step)
    assert conversion.is_allowlisted(keras.layers.RandomFlip.call)
    assert not conversion.is_allowlisted(_user_step)


def test_a_model_trains_to_the_same_weights_with_the_rule() -> None:
    """The rule only skips rewriting Keras 2's code, which TensorFlow runs unconverted under the name `keras`."""
    def trained() -> list:
        keras.utils.set_random_seed(3)
        model = keras.Sequential([keras.layers.Input((8, 8, 1)), keras.layers.RandomFlip(seed=1),
                                  keras.layers.Conv2D(4, 3, activation="relu"), keras.layers.Flatten(),
                                  keras.layers.Dense(3, activation="softmax")])
        model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
        x = tf.random.stateless_uniform((64, 8, 8, 1), seed=(1, 2))
        y = tf.random.stateless_uniform((64,), seed=(3, 4), maxval=3, dtype=tf.int32)
        with deterministic_ops(True):  # restored after: the rest of this test process runs as it would alone
            model.fit(x, y, batch_size=16, epochs=2, verbose=0)
        return model.get_weights()

    from tensorflow.python.autograph.core import config
    rules = config.CONVERSION_RULES
    try:
        config.CONVERSION_RULES = tuple(rule for rule in rules if not rule.matches("tf_keras"))
        converted = trained()
        leave_tf_keras_unconverted()
        unconverted = trained()
    finally:
        config.CONVERSION_RULES = rules
    for a, b in zip(converted, unconverted):
        assert (a == b).all()
