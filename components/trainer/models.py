"""The built-in models: a LeNet-style classifier and a small U-Net, both tf-keras (Keras 2).

tf-keras, not Keras 3: Keras 3 breaks MultiWorkerMirroredStrategy with TF 2.16. Import this module
after `TF_USE_LEGACY_KERAS=1` is set (the `shardflow` command and the tests set it).

Both take float32 images (already standardized by Transform, or scaled to [0, 1] by the Trainer)
and return probabilities (softmax), uncompiled:

    from shardflow.trainer.models import lenet, unet

    model = lenet(input_name="x", image_shape=(28, 28, 1), num_classes=10)
    model.output_shape        # (None, 10)
    seg = unet(input_name="img", image_shape=(32, 32, 3), num_classes=2)
    seg.output_shape          # (None, 32, 32, 2)
"""
from __future__ import annotations

import tf_keras as keras


def lenet(input_name: str, image_shape: tuple[int, int, int], num_classes: int) -> keras.Model:
    """LeNet-5 with ReLU and max pooling; `padding="same"` so 28×28 and larger images both fit."""
    inputs = keras.Input(shape=image_shape, name=input_name, dtype="float32")
    x = keras.layers.Conv2D(6, 5, padding="same", activation="relu")(inputs)
    x = keras.layers.MaxPooling2D(2)(x)
    x = keras.layers.Conv2D(16, 5, padding="same", activation="relu")(x)
    x = keras.layers.MaxPooling2D(2)(x)
    x = keras.layers.Flatten()(x)
    x = keras.layers.Dense(120, activation="relu")(x)
    x = keras.layers.Dense(84, activation="relu")(x)
    # float32 softmax even under mixed precision, where the layers above compute in float16.
    outputs = keras.layers.Dense(num_classes, activation="softmax", dtype="float32", name="probabilities")(x)
    return keras.Model(inputs, outputs, name="lenet")


def unet(input_name: str, image_shape: tuple[int, int, int], num_classes: int, base_filters: int = 16,
         depth: int = 2) -> keras.Model:
    """A small U-Net: `depth` down/up levels; height and width must be divisible by 2**depth."""
    height, width = image_shape[0], image_shape[1]
    if height % 2**depth or width % 2**depth:
        raise ValueError(f"unet: image {height}x{width} is not divisible by {2**depth} (depth {depth}); "
                         f"resize at ingest (--resize) or use a smaller depth")
    inputs = keras.Input(shape=image_shape, name=input_name, dtype="float32")
    x, skips = inputs, []
    for level in range(depth):
        x = _conv_block(x, base_filters * 2**level)
        skips.append(x)
        x = keras.layers.MaxPooling2D(2)(x)
    x = _conv_block(x, base_filters * 2**depth)
    for level in reversed(range(depth)):
        x = keras.layers.Conv2DTranspose(base_filters * 2**level, 2, strides=2, padding="same")(x)
        x = keras.layers.Concatenate()([x, skips[level]])
        x = _conv_block(x, base_filters * 2**level)
    outputs = keras.layers.Conv2D(num_classes, 1, activation="softmax", dtype="float32", name="probabilities")(x)
    return keras.Model(inputs, outputs, name="unet")


def _conv_block(x: keras.layers.Layer, filters: int) -> keras.layers.Layer:
    x = keras.layers.Conv2D(filters, 3, padding="same", activation="relu")(x)
    return keras.layers.Conv2D(filters, 3, padding="same", activation="relu")(x)
