"""Raw parsed features → what the model takes, one function for training and for serving.

Training and the exported serving signature call the same `RawToModel`, so a served model sees
exactly the preprocessing it was trained with:

- with a transform graph: the tf.Transform layer (per-channel standardization, vocabularies, …);
- without: uint8/uint16 pixels scaled to [0, 1], string labels looked up in the sorted vocabulary;
- `raw_pixels` (a pretrained backbone, which applies its own `preprocess_input`): the image is its
  pixels scaled to [0, 1] even with a transform graph, which then serves the target alone, so
  Transform's standardization and the backbone's preprocessing never both apply.

In training the input stream (core/input_stream.py) decodes what `reader_decodes` names, and
`training_pair` is its transform stage: a stored image that the graph reads as bytes (raw examples
with a transform graph, or Transform's compact output, whose pixels stay in their stored encoding)
goes through the tf.Transform layer; materialized values are taken as they are. The stream calls
it on a chunk of records, or on one record as a batch of one.

    to_model = RawToModel(task, tft_layer=None)
    image, target = to_model.training_pair(batch)   # float32 [B, H, W, C], int32 [B]

A detection task's target is its padded boxes (box_stream.padded_boxes), read from the examples as they are
(the box features are never transformed); its image goes the classifier's way.
"""
from __future__ import annotations

import tensorflow as tf

from ..core.box_schema import DETECTION_TASK
from ..core.errors import ConfigError
from ..core.image_decode import CODED
from ..core.manifest import Manifest
from ..core.reader import decode_batch
from ..core.serving_image import at_stored_layout, canonical_sized, stored_bytes
from .box_stream import padded_boxes
from .task import TrainingTask

_PIXEL_MAX = {"uint8": 255.0, "uint16": 65535.0}


class RawToModel(tf.Module):
    """Maps parsed raw features (files still as stored bytes) to model inputs and targets."""

    def __init__(self, task: TrainingTask, tft_layer: tf.keras.layers.Layer | None, raw_pixels: bool = False) -> None:
        super().__init__(name="raw_to_model")
        self.task = task
        self.tft_layer = tft_layer
        self.raw_pixels = raw_pixels and tft_layer is not None  # without a graph the pixels are raw anyway
        self.vocabulary_table = _vocabulary_table(task.label_vocabulary) if tft_layer is None else None
        names = [n for n in (task.input_name, task.target) if n in task.raw_manifest.features]  # boxes: no feature
        self._raw_subset = Manifest({n: task.raw_manifest.features[n] for n in names}, {}, "")
        at_read = task.train_manifest.extra.get("applied_at_read", []) if task.materialized else [task.input_name]
        # The image reaches the model through the graph: raw examples, or Transform's compact output.
        self.image_through_graph = tft_layer is not None and task.input_name in at_read
        if self.raw_pixels and task.materialized and not self.image_through_graph:
            raise ConfigError(f"a pretrained backbone needs the image's pixels, but Transform wrote {task.input_name!r} "
                              "as transformed values; train on ExampleGen's output (with --transform) or keep "
                              "Transform's default image preprocessing")

    @property
    def reader_decodes(self) -> list[str]:
        """The file features the reader decodes for `training_pair` (the graph decodes the others itself)."""
        if self.tft_layer is None:
            return [self.task.input_name, self.task.target]
        if self.raw_pixels:  # the stored pixels are decoded; the graph reads only the raw target
            return [self.task.input_name] + ([self.task.target] if self.task.materialized else [])
        names = [] if self.image_through_graph else [self.task.input_name]
        return names + ([self.task.target] if self.task.materialized else [])

    def training_pair(self, batch: dict[str, tf.Tensor]) -> tuple[tf.Tensor, tf.Tensor]:
        """(image, class ids) from a batch the reader decoded as `reader_decodes` says."""
        name, target, kind = self.task.input_name, self.task.target, self.task.kind
        if kind == DETECTION_TASK:
            return self._detection_pair(batch)
        if self.tft_layer is None:
            image = tf.cast(batch[name], tf.float32) / _PIXEL_MAX[self.task.raw_input_spec.dtype]
            raw_target = batch[target]
            if self.vocabulary_table is not None:
                raw_target = self.vocabulary_table.lookup(raw_target)
            return image, class_ids(raw_target, kind)
        if self.raw_pixels:
            image = self._scaled(batch[name])
            if self.task.materialized:
                return image, class_ids(batch[target], kind)
            return image, class_ids(self.tft_layer({target: batch[target]})[target], kind)
        if self.task.materialized:
            image = self.image(batch) if self.image_through_graph else tf.cast(batch[name], tf.float32)
            return image, class_ids(batch[target], kind)
        return self.inputs_and_target(batch)

    def _detection_pair(self, batch: dict[str, tf.Tensor]) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
        """(image, padded boxes): the image as a classifier's, the boxes as stored (ids made class indices)."""
        name = self.task.input_name
        if self.tft_layer is None or self.raw_pixels:
            image = self._scaled(batch[name])
        elif self.image_through_graph:
            image = self.image(batch)
        else:
            image = tf.cast(batch[name], tf.float32)
        return image, padded_boxes(batch, self.task.max_boxes, self.task.label_map.ids)

    def image(self, parsed: dict[str, tf.Tensor]) -> tf.Tensor:
        """float32 [B, H, W, C] model input from the raw image bytes alone (serving has no labels)."""
        name = self.task.input_name
        if self.tft_layer is not None and not self.raw_pixels:
            return tf.cast(self.tft_layer({name: parsed[name]})[name], tf.float32)
        return self._scaled(decode_batch({name: parsed[name]}, self._raw_subset)[name])

    def _scaled(self, pixels: tf.Tensor) -> tf.Tensor:
        return tf.cast(pixels, tf.float32) / _PIXEL_MAX[self.task.raw_input_spec.dtype]

    @property
    def serves_any_size(self) -> bool:
        """True when encoded files of any size can be turned into this model's input (uint8 images)."""
        spec = self.task.raw_input_spec
        return spec.dtype == "uint8" and spec.shape[2] in (1, 3, 4)

    @property
    def letterbox(self) -> bool:
        """Whether ingest letterboxed the image (ingest_ops' `resize_mode`; core/letterbox.py) rather than stretched it."""
        return self._ingest_ops.get("resize_mode") == "letterbox"

    @property
    def _ingest_ops(self) -> dict:
        return (self.task.raw_manifest.extra.get("ingest_ops") or {}).get(self.task.input_name) or {}

    def image_from_files(self, blobs: tf.Tensor) -> tf.Tensor:
        """float32 model input from encoded image files of any size [B] (serving): ingest's ops, then `image`."""
        return self.image_and_sizes(blobs)[0]

    def image_and_sizes(self, blobs: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """`image_from_files`' input, and each file's (h, w) as decoded, EXIF orientation applied (int32 [B, 2]).

        A batch whose files all have the stored layout (the Evaluator's, stored examples) takes
        `image` directly, as training does (their sizes: the stored one); any other goes through
        `canonical_sized` first. Raw-stored pixels always do: a file is never the stored bytes then.
        """
        spec, name = self.task.raw_input_spec, self.task.input_name
        exif = self._ingest_ops.get("exif_orientation", "applied") == "applied"
        if spec.encoding not in CODED:
            return self._image_from_canonical(blobs, exif)
        fits = tf.map_fn(lambda blob: at_stored_layout(blob, tuple(spec.shape), exif), blobs,
                         fn_output_signature=tf.TensorSpec([], tf.bool))
        stored = tf.tile(tf.constant([spec.shape[:2]], tf.int32), tf.stack([tf.shape(blobs)[0], 1]))
        return tf.cond(tf.reduce_all(fits), lambda: (self.image({name: blobs}), stored),
                       lambda: self._image_from_canonical(blobs, exif))

    def _image_from_canonical(self, blobs: tf.Tensor, exif: bool) -> tuple[tf.Tensor, tf.Tensor]:
        spec = self.task.raw_input_spec
        pixels, sizes = tf.map_fn(lambda blob: canonical_sized(blob, tuple(spec.shape), exif, self.letterbox), blobs,
                                  fn_output_signature=(tf.TensorSpec(spec.shape, tf.uint8), tf.TensorSpec([2], tf.int32)))
        if self.tft_layer is None or self.raw_pixels:
            return tf.cast(pixels, tf.float32) / _PIXEL_MAX["uint8"], sizes
        return self.image({self.task.input_name: stored_bytes(pixels, spec.encoding)}), sizes

    def inputs_and_target(self, parsed: dict[str, tf.Tensor]) -> tuple[tf.Tensor, tf.Tensor]:
        """(image, class ids): ids are int32 [B] for labels, [B, H, W] for masks."""
        name, target = self.task.input_name, self.task.target
        if self.raw_pixels:
            return self.image(parsed), class_ids(self.tft_layer({target: parsed[target]})[target], self.task.kind)
        if self.tft_layer is not None:
            out = self.tft_layer({name: parsed[name], target: parsed[target]})
            return tf.cast(out[name], tf.float32), class_ids(out[target], self.task.kind)
        return self.image(parsed), self.target(parsed)

    def target(self, parsed: dict[str, tf.Tensor]) -> tf.Tensor:
        """Class ids from the raw target alone (without a transform graph)."""
        raw_target = parsed[self.task.target]
        if self.task.kind == "segmentation":
            raw_target = decode_batch({self.task.target: raw_target}, self._raw_subset)[self.task.target]
        elif self.vocabulary_table is not None:
            raw_target = self.vocabulary_table.lookup(raw_target)
        return class_ids(raw_target, self.task.kind)


def class_ids(target: tf.Tensor, kind: str) -> tf.Tensor:
    """int32 ids: labels [B] (a trailing [1] dropped), masks [B, H, W] (the channel dropped)."""
    target = tf.cast(target, tf.int32)
    if kind == "segmentation":
        return tf.squeeze(target, axis=-1) if target.shape.rank == 4 else target
    return tf.reshape(target, [-1])


def _vocabulary_table(vocabulary: list[str] | None) -> tf.lookup.StaticHashTable | None:
    if vocabulary is None:
        return None
    initializer = tf.lookup.KeyValueTensorInitializer(
        tf.constant(vocabulary, tf.string), tf.range(len(vocabulary), dtype=tf.int64))
    # An unseen string gets the OOV id len(vocabulary), as Transform's one OOV bucket does.
    return tf.lookup.StaticHashTable(initializer, default_value=len(vocabulary))
