"""Exports a tf_keras model as a contract-conforming shardflow model (see `shardflow.core.model_info`).

    model = keras.Sequential([...])                 # takes float32 images scaled to [0, 1]
    export_model(model, tmp / "model", examples_dir, "x",
                 ModelInfo(task="classification", label="y", num_classes=3, class_names=["a", "b", "c"]))

The `serving_default` signature takes `examples` (tf.string [N] serialized raw tf.Examples),
parses the image feature with the manifest's feature spec, scales uint8 pixels to float32 / 255
and returns `probabilities` and `class_ids` (their arg-max), as the Trainer's export does.

Two hand-set models make exact tests possible (deterministic, imperfect on purpose):
`band_model` scores 8x8 images by the brightness of row bands, `threshold_model` labels each
pixel by its brightness band.
"""
from __future__ import annotations

import socket
from pathlib import Path

import numpy as np
import tensorflow as tf
import tf_keras as keras

from shardflow.core.manifest import Manifest, read_manifest
from shardflow.core.model_info import SERVING_INPUT, SERVING_SIGNATURE, ModelInfo, write_model_info
from shardflow.core.reader import decode_batch, feature_spec


def export_model(model: keras.Model, model_dir: Path, examples_dir: Path, image: str, info: ModelInfo) -> Path:
    """Writes the SavedModel and shardflow_model.json into `model_dir`; returns `model_dir`."""
    manifest = read_manifest(examples_dir)
    spec = feature_spec(manifest, [image])
    subset = Manifest({image: manifest.features[image]}, {}, manifest.compression)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name=SERVING_INPUT)])
    def serve(examples: tf.Tensor) -> dict[str, tf.Tensor]:
        pixels = decode_batch(tf.io.parse_example(examples, spec), subset)[image]
        probabilities = model(tf.cast(pixels, tf.float32) / 255.0, training=False)
        return {"probabilities": probabilities, "class_ids": tf.argmax(probabilities, axis=-1)}

    module = tf.Module()
    # Only the variables are tracked: the signature is all a shardflow model needs, and saving the
    # Keras object too would trace every layer's call (seconds per export).
    module.weights = list(model.variables)
    module.serve = serve
    tf.saved_model.save(module, str(model_dir), signatures={SERVING_SIGNATURE: serve})
    write_model_info(model_dir, info)
    return model_dir


def band_model(classes: int, pixels_per_row: int, scale: float = 20.0) -> keras.Model:
    """8x8 gray → logit k = scale × mean of the first `pixels_per_row` pixels of rows 3k and 3k+1 (k < 3).

    Classes beyond 3 get logit 0 (never predicted against brighter bands); fewer drop bands.
    """
    inputs = keras.Input((8, 8, 1), name="x")
    outputs = keras.layers.Dense(classes, activation="softmax")(keras.layers.Flatten()(inputs))
    model = keras.Model(inputs, outputs)
    weights = np.zeros((64, classes), np.float32)
    for k in range(min(classes, 3)):
        for row in (3 * k, 3 * k + 1):
            weights[row * 8:row * 8 + pixels_per_row, k] = scale / (2 * pixels_per_row)
    model.layers[-1].set_weights([weights, np.zeros(classes, np.float32)])
    return model


def threshold_model(shape: tuple[int, int, int], cuts: tuple[float, float]) -> keras.Model:
    """Per pixel (values 0..255): class 0 below cuts[0], 1 up to cuts[1], 2 above; class 3 never.

    A 1x1 convolution with logits 0, s(x − a), s(2x − a − b), −10s: arg-max is the brightness band.
    """
    inputs = keras.Input(shape, name="image")
    outputs = keras.layers.Conv2D(4, 1, activation="softmax")(inputs)
    model = keras.Model(inputs, outputs)
    low, high = cuts[0] / 255, cuts[1] / 255
    kernel = 50.0 * np.array([0, 1, 2, 0], np.float32).reshape(1, 1, 1, 4)
    bias = 50.0 * np.array([0, -low, -(low + high), -10], np.float32)
    model.layers[-1].set_weights([kernel, bias])
    return model


def free_ports(count: int) -> list[int]:
    """`count` distinct free TCP ports on 127.0.0.1 (all bound at once, so none repeats): a TF_CONFIG cluster."""
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


# A user model file for photo runs: pooling and one dense layer, so a 224-px or 512-px run is about the input.
SMALL_PHOTO_MODEL = '''
import tf_keras as keras

def small(features, num_classes, task):
    inputs = keras.Input(shape=tuple(features["x"].shape), name="x")
    pooled = keras.layers.GlobalAveragePooling2D()(keras.layers.AveragePooling2D(8)(inputs))
    return keras.Model(inputs, keras.layers.Dense(num_classes, activation="softmax")(pooled))
'''


def small_photo_examples(folder: Path, rows: int, min_shards: int) -> Path:
    """`rows` rows over 48 benchmark photos (testkit/photo_data.py) through ExampleGen as 224-px RGB JPEG,
    in folder/examples, with SMALL_PHOTO_MODEL beside it as folder/small_model.py (function `small`)."""
    from testkit.photo_data import ensure_photo_index, ensure_photos
    from shardflow.example_gen import ExampleGenConfig, IndexSpec
    from shardflow.example_gen import run as example_gen

    root = ensure_photos(folder / "photos", count=48)
    out = folder / "examples"
    example_gen(ExampleGenConfig(indexes=(IndexSpec(str(ensure_photo_index(root, rows)), "train"),),
                                 data_root=str(root), output=str(out), resize=(("*", (224, 224)),),
                                 channels=(("*", "rgb"),), storage=(("*", "jpeg"),), min_shards=min_shards),
                echo=lambda _: None)
    (folder / "small_model.py").write_text(SMALL_PHOTO_MODEL)
    return out
