"""Pretrained backbones from `tf_keras.applications`: a classifier head, or a U-Net decoder, on them.

The model takes what every shardflow model takes, float32 pixels in [0, 1] (the served model's
input range does not change), and applies the backbone's own `preprocess_input` inside the graph
(scaling to its range, channel order, mean subtraction), after repeating a gray channel to RGB.
So the exported SavedModel carries the preprocessing its weights were trained with, and Transform's
image standardization is not applied before it (features.RawToModel's `raw_pixels`).

    spec = backbone_spec("mobilenet_v2")
    model = classifier(spec, "image", (96, 96, 3), num_classes=5, weights="none", alpha=0.35)
    model.get_layer(BACKBONE).trainable    # False until fine-tuning unfreezes its top layers

`weights`: "imagenet" (Keras downloads them where the network allows), "none", or a file written
by `save_weights` of the headless backbone (.h5, or a TF checkpoint prefix), local or s3:// / gs://.
"""
from __future__ import annotations

import importlib
import inspect
import os
import random
import tempfile
from dataclasses import dataclass
from typing import Callable

import tensorflow as tf
import tf_keras as keras

from ..core import storage
from ..core.cloud_env import enable_tensorflow_filesystems
from ..core.errors import ConfigError
from .config import GENERIC_BACKBONE

BACKBONE = "backbone"  # the backbone's layer name in every model built here
# name -> tf_keras.applications constructor; the generic form takes any other constructor by name.
NAMED = {"mobilenet_v2": "MobileNetV2", "efficientnet_b0": "EfficientNetB0", "resnet50": "ResNet50"}
# The U-Net encoder's skip connections (strides 2, 4, 8, 16) and its bottom (stride 32).
MOBILENET_V2_SKIPS = ("block_1_expand_relu", "block_3_expand_relu", "block_6_expand_relu", "block_13_expand_relu")
MOBILENET_V2_BOTTOM = "block_16_project"
SEGMENTATION_BACKBONES = {"unet_mobilenet_v2": "MobileNetV2"}
# A detector's feature map (detector.py) by stride: the expansion of the first block of the next stage, as the
# U-Net's skips are cut. Stride 8 from DETECTION_STRIDE_8_FROM pixels on (a 28 x 28 grid at 224 px), stride 4
# below (small images keep a fine grid: 24 x 24 at 96 px, as the tiny backbone's).
DETECTION_CUTS = {"MobileNetV2": {4: "block_3_expand_relu", 8: "block_6_expand_relu"},
                  "EfficientNetB0": {4: "block3a_expand_activation", 8: "block4a_expand_activation"}}
DETECTION_STRIDE_8_FROM = 192


@dataclass(frozen=True)
class BackboneSpec:
    """A tf_keras.applications constructor and the module whose `preprocess_input` goes with it."""

    name: str
    constructor: str
    module: str  # e.g. tf_keras.src.applications.mobilenet_v2

    def build(self, shape: tuple[int, int, int], alpha: float, weights: str | None = None) -> keras.Model:
        """The headless backbone; `weights` None or "imagenet" (Keras' own loading)."""
        build = getattr(keras.applications, self.constructor)
        kwargs = {"alpha": alpha} if "alpha" in inspect.signature(build).parameters else {}
        if alpha != 1.0 and not kwargs:
            raise ConfigError(f"backbone_alpha applies to MobileNet backbones only, not {self.name!r}")
        return build(input_shape=shape, include_top=False, weights=weights, **kwargs)


def backbone_spec(model: str) -> BackboneSpec:
    """The spec of `--model`; ConfigError naming an unknown constructor."""
    constructor = NAMED.get(model) or SEGMENTATION_BACKBONES.get(model) or model[len(GENERIC_BACKBONE):]
    build = getattr(keras.applications, constructor, None)
    if not callable(build) or not constructor[:1].isupper():
        known = sorted(n for n in dir(keras.applications) if n[:1].isupper())
        raise ConfigError(f"model {model!r}: tf_keras.applications has no {constructor!r} (e.g. {', '.join(known[:6])})")
    return BackboneSpec(model, constructor, build.__module__)


class BackbonePreprocess(keras.layers.Layer):
    """[0, 1] pixels → the backbone's input: gray repeated to RGB, ×255, then its `preprocess_input`."""

    def __init__(self, module: str, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.module = module
        self._preprocess: Callable = importlib.import_module(module).preprocess_input

    def call(self, pixels: tf.Tensor) -> tf.Tensor:
        if pixels.shape[-1] == 1:
            pixels = tf.repeat(pixels, 3, axis=-1)
        return self._preprocess(tf.cast(pixels, tf.float32) * 255.0)

    def get_config(self) -> dict:
        return {**super().get_config(), "module": self.module}


class SeededDropout(keras.layers.Layer):
    """Dropout whose masks come from (seed, the layer's own count of training calls).

    The count is a weight, so a backup carries it and a resumed run draws the masks the uninterrupted
    run would have drawn. Keras' Dropout keeps its random state outside every checkpoint: its masks
    start over in each process. The seed is drawn from Python's generator, which the run's seed sets.
    """

    def __init__(self, rate: float, seed: int | None = None, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.rate = float(rate)
        self.seed = random.randrange(1 << 31) if seed is None else int(seed)

    def build(self, input_shape: tf.TensorShape) -> None:
        self.calls = self.add_weight(name="calls", shape=(), dtype="int64", initializer="zeros", trainable=False,
                                     aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        super().build(input_shape)

    def call(self, inputs: tf.Tensor, training: bool | None = None) -> tf.Tensor:
        if not training or not self.rate:
            return inputs
        self.calls.assign_add(1)
        seed = tf.stack([tf.constant(self.seed, tf.int64), self.calls])
        return tf.nn.experimental.stateless_dropout(inputs, self.rate, seed=seed)

    def get_config(self) -> dict:
        return {**super().get_config(), "rate": self.rate, "seed": self.seed}


def _rgb(shape: tuple[int, int, int]) -> tuple[int, int, int]:
    if shape[2] not in (1, 3):
        raise ConfigError(f"a pretrained backbone takes gray or RGB images, not {shape[2]} channels "
                          "(ingest with --channels rgb)")
    return (shape[0], shape[1], 3)


def classifier(spec: BackboneSpec, input_name: str, shape: tuple[int, int, int], num_classes: int,
               weights: str, alpha: float = 1.0, dropout: float = 0.2) -> keras.Model:
    """Backbone (frozen, BatchNorm in inference mode) → global average pooling → dropout → softmax."""
    base = spec.build(_rgb(shape), alpha)
    load_weights(base, weights, spec, alpha)
    backbone = keras.Model(base.input, base.output, name=BACKBONE)
    backbone.trainable = False
    inputs = keras.Input(shape=shape, name=input_name, dtype="float32")
    x = BackbonePreprocess(spec.module, name="backbone_preprocess")(inputs)
    x = backbone(x, training=False)  # BatchNorm stays in inference mode, also once unfrozen
    x = keras.layers.GlobalAveragePooling2D()(x)
    x = SeededDropout(dropout, name="dropout")(x)
    outputs = keras.layers.Dense(num_classes, activation="softmax", dtype="float32", name="probabilities")(x)
    return keras.Model(inputs, outputs, name=f"{spec.name}_classifier")


def detection_features(spec: BackboneSpec, shape: tuple[int, int, int], weights: str,
                       alpha: float = 1.0) -> keras.Model:
    """The backbone cut at its stride-4 or stride-8 feature map (`DETECTION_CUTS`), named BACKBONE, frozen at first:
    what detector.build_detector puts its heads on (with BackbonePreprocess before it)."""
    cuts = DETECTION_CUTS.get(spec.constructor)
    if cuts is None:
        raise ConfigError(f"model {spec.name!r} has no detection feature map; detect with auto (the tiny backbone), "
                          f"{', '.join(n for n, c in NAMED.items() if c in DETECTION_CUTS)}")
    if shape[2] != 3:
        raise ConfigError(f"a pretrained detector takes RGB images, not {shape[2]} channel(s) (ingest with --channels rgb)")
    stride = 8 if min(shape[0], shape[1]) >= DETECTION_STRIDE_8_FROM else 4
    base = spec.build(shape, alpha)
    load_weights(base, weights, spec, alpha)
    backbone = keras.Model(base.input, base.get_layer(cuts[stride]).output, name=BACKBONE)
    backbone.trainable = False
    return backbone


def unet_on_backbone(spec: BackboneSpec, input_name: str, shape: tuple[int, int, int], num_classes: int,
                     weights: str, alpha: float = 1.0) -> keras.Model:
    """A U-Net whose encoder is MobileNetV2's features (the TF segmentation tutorial's), frozen at first."""
    height, width = shape[0], shape[1]
    if height % 32 or width % 32:
        raise ConfigError(f"model {spec.name!r}: image {height}x{width} is not divisible by 32; resize at ingest")
    base = spec.build(_rgb(shape), alpha)
    load_weights(base, weights, spec, alpha)
    encoder = keras.Model(base.input, [base.get_layer(n).output for n in MOBILENET_V2_SKIPS + (MOBILENET_V2_BOTTOM,)],
                          name=BACKBONE)
    encoder.trainable = False
    inputs = keras.Input(shape=shape, name=input_name, dtype="float32")
    *skips, x = encoder(BackbonePreprocess(spec.module, name="backbone_preprocess")(inputs), training=False)
    for skip, filters in zip(reversed(skips), (256, 128, 64, 32)):
        x = keras.layers.Conv2DTranspose(filters, 3, strides=2, padding="same", activation="relu")(x)
        x = keras.layers.Concatenate()([x, skip])
    x = keras.layers.Conv2DTranspose(num_classes, 3, strides=2, padding="same")(x)
    outputs = keras.layers.Softmax(dtype="float32", name="probabilities")(x)
    return keras.Model(inputs, outputs, name=f"{spec.name}")


def load_weights(backbone: keras.Model, weights: str, spec: BackboneSpec, alpha: float = 1.0) -> None:
    """`none`: as initialized; `imagenet`: Keras' download; else a weights file (local or URI) loaded into it."""
    if weights == "none":
        return
    if weights == "imagenet":
        _load_imagenet(backbone, spec, alpha)
        return
    enable_tensorflow_filesystems([weights])
    if weights.endswith((".h5", ".hdf5")):
        if not storage.is_file(weights):
            raise ConfigError(f"weights {weights!r}: no such file")
        with tempfile.TemporaryDirectory(prefix="shardflow-weights-") as scratch:
            local = os.path.join(scratch, "weights.h5")  # h5py reads local files only
            storage.copy_file(weights, local)
            _load_file(backbone, local, weights)
        return
    if not storage.is_file(f"{weights}.index"):
        raise ConfigError(f"weights {weights!r}: neither an .h5 file nor a TF checkpoint prefix (no {weights}.index)")
    _load_file(backbone, weights, weights)


def _load_file(backbone: keras.Model, path: str, named: str) -> None:
    try:
        backbone.load_weights(path)
    except (ValueError, KeyError, tf.errors.OpError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ConfigError(f"weights {named!r} do not fit the {backbone.name} backbone: {first}") from None


def _load_imagenet(backbone: keras.Model, spec: BackboneSpec, alpha: float) -> None:
    """The same constructor with weights='imagenet', its weights copied over (Keras caches the download)."""
    try:
        pretrained = spec.build(tuple(backbone.input_shape[1:]), alpha, weights="imagenet")
    except Exception as err:  # noqa: BLE001 — Keras raises a bare Exception on a failed fetch
        raise ConfigError(f"weights 'imagenet': Keras could not download the {spec.constructor} ImageNet weights "
                          f"({str(err).splitlines()[0][:160]}); pass a weights file with --weights PATH") from None
    backbone.set_weights(pretrained.get_weights())
