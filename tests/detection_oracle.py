"""An oracle detector for tests: a SavedModel under the detection contract that answers each example's TRUE boxes.

    model = export_oracle(tmp / "oracle", ["disc", "square"], image_size=(96, 96))
    model = export_oracle(tmp / "swapped", names, image_size=(96, 96), faults=OracleFaults(swap_axes=True))
    model = export_oracle(tmp / "o", names, image_size=(96, 96), known_images={jpeg_bytes: box_example(...)})

`serving_default` takes `examples` (serialized tf.Examples carrying core/box_schema.py's box features; the
image feature is not read) and `serving_image` takes `images` (encoded image files): both answer the OD API's
outputs (`DETECTION_OUTPUTS`): `detection_boxes` [N, 100, 4] normalised (ymin, xmin, ymax, xmax),
`detection_scores` [N, 100] descending, `detection_classes` [N, 100] label map ids (from 1, as stored),
`num_detections` [N]; rows past the count are zeros. Beside it, shardflow_model.json (task "detection",
label BOX_TARGET, class_names in label map id order) and label_map.pbtxt, as the Trainer's export writes them
(ids 1..K unless `label_map` says others: the oracle serves the stored ids as they are).
`renumbered_examples` copies an ExampleGen output with other label map ids (COCO's kind: 3, 7, 12).

An image has no boxes of its own: `serving_image` answers the boxes of the example `known_images` gives for
the image's exact bytes (none for an unknown image), normalised to the image as sent (any size).

Faults (`OracleFaults`), planted on the answered boxes, all deterministic per example (noise comes from a hash
of the example's bytes and the box's slot, never from the batch it arrives in):
- `shift_pixels`: every box moved down and right by this many pixels (needs `image_size` for `serving_default`);
- `swap_axes`: boxes answered (xmin, ymin, xmax, ymax): the swapped-axis convention;
- `drop_class`: a label map id never answered;
- `random_scores`: scores in [0.01, 1] rounded to hundredths (ties happen) instead of `score`;
- `jitter`: each side moved by up to this fraction of its box's side;
- `extra_boxes`: false positives per image, at hashed places with hashed classes.
"""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import tensorflow as tf

from shardflow.core.box_schema import (BBOX, BOX_TARGET, BOXES_KEY, CLASS_LABEL, CLASS_TEXT, DETECTION_TASK,
                                       IS_CROWD, MAX_DETECTIONS, LabelMap)
from shardflow.core.label_map_file import write_label_map
from shardflow.core.manifest import MANIFEST_NAME, read_manifest
from shardflow.core.model_info import (IMAGE_INPUT, IMAGE_SIGNATURE, SERVING_INPUT, SERVING_SIGNATURE, ModelInfo,
                                       write_model_info)

_BUCKETS = 1_000_003  # hash buckets of the uniform noise: steps of ~1e-6


@dataclass(frozen=True)
class OracleFaults:
    """What the oracle gets wrong on purpose (the module's docstring); the default is a perfect model."""

    shift_pixels: float = 0.0
    swap_axes: bool = False
    drop_class: int | None = None
    random_scores: bool = False
    jitter: float = 0.0
    extra_boxes: int = 0


def box_example(boxes: np.ndarray | Sequence[Sequence[float]], label_ids: Sequence[int],
                class_names: Sequence[str] | None = None) -> bytes:
    """A serialized tf.Example with only the box features: normalised (ymin, xmin, ymax, xmax) rows and their
    label map ids (from 1); `class_names` (label map order) fills the class texts."""
    rows = np.asarray(boxes, np.float32).reshape(-1, 4)
    ids = [int(i) for i in label_ids]
    texts = [(class_names[i - 1] if class_names else str(i)).encode() for i in ids]
    feature = {name: tf.train.Feature(float_list=tf.train.FloatList(value=rows[:, k].tolist()))
               for k, name in enumerate(BBOX)}
    feature[CLASS_LABEL] = tf.train.Feature(int64_list=tf.train.Int64List(value=ids))
    feature[CLASS_TEXT] = tf.train.Feature(bytes_list=tf.train.BytesList(value=texts))
    feature[IS_CROWD] = tf.train.Feature(int64_list=tf.train.Int64List(value=[0] * len(ids)))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def _uniform(keys: tf.Tensor, slots: tf.Tensor, tag: str) -> tf.Tensor:
    """[N, S] uniform in [0, 1): a hash of (example key, tag, slot), the same whatever the batch."""
    rows, columns = tf.shape(keys)[0], tf.shape(slots)[0]
    key_text = tf.broadcast_to(tf.strings.as_string(keys)[:, None], [rows, columns])
    slot_text = tf.broadcast_to(tf.strings.as_string(slots)[None, :], [rows, columns])
    joined = tf.strings.join([key_text, tf.fill([rows, columns], f":{tag}:"), slot_text])
    return tf.cast(tf.strings.to_hash_bucket_fast(joined, _BUCKETS), tf.float32) / _BUCKETS


def _true_boxes(examples: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """Padded boxes [N, K, 4], label ids [N, K] (int64) and the real-box mask [N, K] of the examples."""
    spec = {name: tf.io.RaggedFeature(tf.float32) for name in BBOX}
    spec[CLASS_LABEL] = tf.io.RaggedFeature(tf.int64)
    parsed = tf.io.parse_example(examples, spec)
    boxes = tf.stack([parsed[name].to_tensor(shape=[None, None]) for name in BBOX], axis=-1)
    labels = parsed[CLASS_LABEL].to_tensor()
    real = tf.sequence_mask(parsed[CLASS_LABEL].row_lengths(), tf.shape(labels)[1])
    boxes = tf.reshape(boxes, [tf.shape(labels)[0], tf.shape(labels)[1], 4])
    return boxes, labels, real


def _moved(boxes: tf.Tensor, keys: tf.Tensor, faults: OracleFaults, size: tf.Tensor) -> tf.Tensor:
    """The true boxes with the jitter, shift and axis swap planted; size float32 [N, 2] (height, width)."""
    count = tf.shape(boxes)[1]
    if faults.jitter:
        slots = tf.range(count * 4, dtype=tf.int64)
        # [N, count, 4], N told: with no box in the whole batch (count 0), -1 would make N zero too
        noise = tf.reshape(_uniform(keys, slots, "jitter") * 2 - 1, [tf.shape(boxes)[0], count, 4])
        sides = tf.tile(boxes[..., 2:] - boxes[..., :2], [1, 1, 2])
        boxes = boxes + faults.jitter * noise * sides
    if faults.shift_pixels:
        pixel = tf.tile(1.0 / size, [1, 2])[:, None, :]
        boxes = boxes + faults.shift_pixels * pixel
    if faults.swap_axes:
        boxes = tf.gather(boxes, [1, 0, 3, 2], axis=-1)
    return tf.clip_by_value(boxes, 0.0, 1.0)


def _extras(keys: tf.Tensor, faults: OracleFaults, num_classes: int) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """`extra_boxes` false positives per image: boxes [N, E, 4], label ids [N, E], scores [N, E]."""
    extra = faults.extra_boxes
    corner = tf.reshape(_uniform(keys, tf.range(extra * 2, dtype=tf.int64), "corner") * 0.7, [-1, extra, 2])
    side = tf.reshape(0.05 + _uniform(keys, tf.range(extra * 2, dtype=tf.int64), "side") * 0.25, [-1, extra, 2])
    labels = 1 + tf.cast(_uniform(keys, tf.range(extra, dtype=tf.int64), "class") * num_classes, tf.int64)
    scores = _uniform(keys, tf.range(extra, dtype=tf.int64), "fp_score") * 0.8
    return tf.concat([corner, corner + side], axis=-1), labels, scores


def _scores(keys: tf.Tensor, real: tf.Tensor, faults: OracleFaults, score: float) -> tf.Tensor:
    if not faults.random_scores:
        return tf.fill(tf.shape(real), tf.constant(score, tf.float32))
    drawn = _uniform(keys, tf.range(tf.shape(real)[1], dtype=tf.int64), "score")
    return tf.round(0.01 + drawn * 99.0) / 100.0  # hundredths in [0.01, 1]: ties within and across images


def _served(boxes: tf.Tensor, labels: tf.Tensor, scores: tf.Tensor, real: tf.Tensor) -> dict[str, tf.Tensor]:
    """The OD API's outputs: the real rows by descending score (stable), MAX_DETECTIONS of them, zeros past."""
    ranked = tf.where(real, scores, -1.0)
    padding = tf.maximum(MAX_DETECTIONS - tf.shape(ranked)[1], 0)
    ranked = tf.pad(ranked, [[0, 0], [0, padding]], constant_values=-1.0)
    boxes = tf.pad(boxes, [[0, 0], [0, padding], [0, 0]])
    labels = tf.pad(labels, [[0, 0], [0, padding]])
    order = tf.argsort(ranked, axis=1, direction="DESCENDING", stable=True)[:, :MAX_DETECTIONS]
    kept = tf.gather(ranked, order, batch_dims=1) >= 0
    return {"detection_boxes": tf.where(kept[..., None], tf.gather(boxes, order, batch_dims=1), 0.0),
            "detection_scores": tf.where(kept, tf.gather(ranked, order, batch_dims=1), 0.0),
            "detection_classes": tf.where(kept, tf.cast(tf.gather(labels, order, batch_dims=1), tf.float32), 0.0),
            "num_detections": tf.reduce_sum(tf.cast(kept, tf.float32), axis=1)}


def oracle_answers(examples: tf.Tensor, size: tf.Tensor, faults: OracleFaults, num_classes: int,
                   score: float = 1.0) -> dict[str, tf.Tensor]:
    """The oracle's outputs for serialized examples; `size` float32 [N, 2]: each image's (height, width)."""
    boxes, labels, real = _true_boxes(examples)
    keys = tf.strings.to_hash_bucket_fast(examples, 2**62)
    scores = _scores(keys, real, faults, score)
    boxes = _moved(boxes, keys, faults, size)
    if faults.drop_class is not None:
        real = real & (labels != faults.drop_class)
    if faults.extra_boxes:
        extra_boxes, extra_labels, extra_scores = _extras(keys, faults, num_classes)
        boxes, labels = tf.concat([boxes, extra_boxes], 1), tf.concat([labels, extra_labels], 1)
        scores = tf.concat([scores, extra_scores], 1)
        real = tf.concat([real, tf.ones_like(extra_labels, tf.bool)], 1)
    return _served(boxes, labels, scores, real)


class _Oracle(tf.Module):
    def __init__(self, class_count: int, faults: OracleFaults, score: float, image_size: tuple[int, int] | None,
                 known_images: Mapping[bytes, bytes]) -> None:
        super().__init__()
        self.class_count, self.faults, self.score = class_count, faults, score
        self.image_size = image_size
        images, examples = list(known_images), [known_images[key] for key in known_images]
        self.known = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
            tf.constant(images or [b""], tf.string), tf.range(max(len(images), 1), dtype=tf.int64)), default_value=-1)
        self.known_examples = tf.constant(examples + [box_example(np.zeros((0, 4)), [])], tf.string)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name=SERVING_INPUT)])
    def serve_examples(self, examples: tf.Tensor) -> dict[str, tf.Tensor]:
        height, width = self.image_size or (1, 1)  # only a shift reads the size (export_oracle checks)
        size = tf.tile(tf.constant([[height, width]], tf.float32), [tf.shape(examples)[0], 1])
        return oracle_answers(examples, size, self.faults, self.class_count, self.score)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name=IMAGE_INPUT)])
    def serve_images(self, images: tf.Tensor) -> dict[str, tf.Tensor]:
        def shape(image: tf.Tensor) -> tf.Tensor:
            return tf.cast(tf.shape(tf.io.decode_image(image, channels=3, expand_animations=False))[:2], tf.float32)

        size = tf.map_fn(shape, images, fn_output_signature=tf.TensorSpec([2], tf.float32))
        found = self.known.lookup(images)
        unknown = tf.shape(self.known_examples, out_type=tf.int64)[0] - 1
        examples = tf.gather(self.known_examples, tf.where(found >= 0, found, unknown))
        return oracle_answers(examples, size, self.faults, self.class_count, self.score)


def export_oracle(model_dir: str | os.PathLike, class_names: Sequence[str], *, faults: OracleFaults = OracleFaults(),
                  score: float = 1.0, image_size: tuple[int, int] | None = None,
                  known_images: Mapping[bytes, bytes] | None = None,
                  label_map: Mapping[str, int] | None = None) -> Path:
    """Writes the oracle SavedModel (both signatures) and its shardflow_model.json; returns `model_dir`.

    `class_names`: the label map's names in id order (id 1 first). `image_size`: (height, width) of the
    examples' images, which `serving_default` needs to shift boxes by pixels. `known_images`: encoded image
    bytes → the serialized example (`box_example`) whose boxes `serving_image` answers for them.
    """
    if faults.shift_pixels and image_size is None:
        raise ValueError("a shift in pixels needs image_size (height, width) for serving_default")
    oracle = _Oracle(len(class_names), faults, score, image_size, dict(known_images or {}))
    tf.saved_model.save(oracle, os.fspath(model_dir), signatures={
        SERVING_SIGNATURE: oracle.serve_examples, IMAGE_SIGNATURE: oracle.serve_images})
    labels = LabelMap(label_map) if label_map is not None else LabelMap.of_names(class_names)
    if list(labels.names) != list(class_names):
        raise ValueError(f"class_names {list(class_names)} are not the label map's names in id order {labels.names}")
    info = ModelInfo(task=DETECTION_TASK, label=BOX_TARGET, num_classes=len(class_names),
                     class_names=list(class_names),
                     extra={"oracle": repr(faults), "label_map": dict(labels.ids_by_name)})
    write_label_map(model_dir, labels)
    write_model_info(model_dir, info)
    return Path(model_dir)


def renumbered_examples(examples: Path, output: Path, new_ids: Mapping[int, int]) -> Path:
    """A copy of an uncompressed box ExampleGen output whose label map ids (and every record's class labels) are
    `new_ids[old]`: single-byte ids, so each shard keeps the size its manifest records."""
    shutil.copytree(examples, output)
    manifest = read_manifest(output)
    if manifest.compression:
        raise ValueError("renumbered_examples rewrites uncompressed shards only")
    for split in manifest.splits:
        for path in manifest.shard_paths(str(output), split):
            records = [tf.train.Example.FromString(r.numpy()) for r in tf.data.TFRecordDataset(path)]
            with tf.io.TFRecordWriter(path) as writer:
                for example in records:
                    labels = example.features.feature[CLASS_LABEL].int64_list.value
                    labels[:] = [new_ids[i] for i in labels]
                    writer.write(example.SerializeToString())
    raw = json.loads((output / MANIFEST_NAME).read_text())
    raw[BOXES_KEY]["label_map"] = {name: new_ids[i] for name, i in raw[BOXES_KEY]["label_map"].items()}
    (output / MANIFEST_NAME).write_text(json.dumps(raw))
    return output
