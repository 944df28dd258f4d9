"""The default `preprocessing_fn`, chosen from the roles of ExampleGen's features.

- image: pixels (raw, png or jpeg storage, decoded in the graph) → float32 [B, H, W, C],
  standardized per channel, (x - mean_c) / std_c, with mean and variance over every pixel of the
  whole analyze split (full-pass `tft.mean` of each image's channel means of x and x²);
  a channel with zero variance is only centred. Transform stores the image's bytes as they are:
  the Trainer and the served model run this graph where they read the image.
- mask: class ids as int64 [B, H, W, C], values unchanged. The number of classes K is the
  `mask_classes` option or else train's largest id + 1 (`tft.max`); the range [0, K-1] becomes
  the feature's int domain in the transformed schema, and the materializer fails the run on any
  id outside it in any split (an eval id never seen in train fails without `mask_classes`).
- string label: integer ids from a vocabulary computed on train (`tft.compute_and_apply_vocabulary`,
  ids by decreasing frequency, saved as the asset `vocab_<label>` of the transform graph) with one
  OOV bucket: a label unseen in train gets id = vocabulary size. Transform counts those per split
  and reports them (or fails, `unseen_labels="fail"`); they never pass unnoticed.
- integer and float labels, and metadata of any type: carried through unchanged (for slicing).
- boxes (role "boxes", lists of any length): not inputs of the graph; Transform writes them unchanged
  beside its outputs (raw_input.carried_names), and the Trainer reads them as ExampleGen wrote them.

    fn = make_preprocessing_fn(read_manifest("runs/examples").features, {"mask": 3})
    # then: tft_beam.AnalyzeDataset(fn)
"""
from __future__ import annotations

from typing import Callable, Mapping

import tensorflow as tf
import tensorflow_transform as tft

from ..core.box_schema import BOX_ROLE
from ..core.manifest import FeatureSpec, Manifest
from ..core.reader import decode_batch
from ..core.errors import ConfigError

VOCABULARY_PREFIX = "vocab_"
NUM_OOV_BUCKETS = 1
PreprocessingFn = Callable[[dict[str, tf.Tensor]], dict[str, tf.Tensor]]


def vocabulary_name(feature: str) -> str:
    """The asset name of a string label's vocabulary in the transform graph."""
    return f"{VOCABULARY_PREFIX}{feature}"


def vocabulary_labels(features: Mapping[str, FeatureSpec]) -> list[str]:
    """The string labels the default preprocessing maps through a vocabulary."""
    return [name for name, spec in features.items() if spec.role == "label" and spec.dtype == "string"]


def decode_pixels(blobs: tf.Tensor, spec: FeatureSpec) -> tf.Tensor:
    """A batch of stored images (raw bytes, PNG or JPEG) → [B, H, W, C] of the feature's dtype."""
    return decode_batch({spec.name: blobs}, Manifest({spec.name: spec}, {}, ""))[spec.name]


def standardize_per_channel(pixels: tf.Tensor, channels: int) -> tf.Tensor:
    """(x - mean_c) / std_c with full-pass statistics of every pixel of channel c.

    Each image is reduced to its channel means of x and x² first; every image has the same pixel
    count, so the full-pass mean of those is the pixel mean, and var = E[x²] - E[x]². Handing the
    analyzers every pixel (tft.mean and tft.var over [B*H*W, C]) made the analysis of 224-px photos
    ~4x slower than their decode.
    """
    # float64: float32 sums lose ~1e-5 relative over a million pixels already.
    values = tf.cast(pixels, tf.float64)
    image_means = tf.reduce_mean(values, axis=[1, 2])  # [B, C]
    image_squares = tf.reduce_mean(tf.square(values), axis=[1, 2])
    mean = tft.mean(image_means, reduce_instance_dims=False)
    variance = tf.maximum(tft.mean(image_squares, reduce_instance_dims=False) - tf.square(mean), 0.0)
    std = tf.sqrt(variance)
    safe_std = tf.where(std > 0, std, tf.ones_like(std))
    return (tf.cast(pixels, tf.float32) - tf.cast(mean, tf.float32)) / tf.cast(safe_std, tf.float32)


def class_ids(pixels: tf.Tensor, num_classes: int | None) -> tf.Tensor:
    """Mask pixels as int64 ids whose schema domain is [0, K-1] (K given, or train's max + 1)."""
    ids = tf.cast(pixels, tf.int64)
    top = tf.constant(num_classes - 1, tf.int64) if num_classes is not None else tft.max(ids)
    tft.schema_inference.set_tensor_schema_override(ids, tf.constant(0, tf.int64), top)
    return ids


def _check_mask_classes(features: Mapping[str, FeatureSpec], mask_classes: Mapping[str, int]) -> None:
    masks = sorted(name for name, spec in features.items() if spec.role == "mask")
    unknown = sorted(set(mask_classes) - set(masks))
    if unknown:
        raise ConfigError(f"mask_classes names {unknown}, which are not masks of the examples (masks: {masks})")


def make_preprocessing_fn(features: Mapping[str, FeatureSpec], mask_classes: Mapping[str, int]) -> PreprocessingFn:
    """The default `preprocessing_fn` for examples with these manifest features."""
    _check_mask_classes(features, mask_classes)
    specs = dict(features)

    def preprocessing_fn(inputs: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        outputs = {}
        for name, spec in specs.items():
            if spec.role == BOX_ROLE:  # carried outside the graph
                continue
            if spec.role == "image":
                outputs[name] = standardize_per_channel(decode_pixels(inputs[name], spec), spec.shape[2])
            elif spec.role == "mask":
                outputs[name] = class_ids(decode_pixels(inputs[name], spec), mask_classes.get(name))
            elif spec.role == "label" and spec.dtype == "string":
                outputs[name] = tft.compute_and_apply_vocabulary(
                    inputs[name], num_oov_buckets=NUM_OOV_BUCKETS, vocab_filename=vocabulary_name(name))
            else:
                outputs[name] = tf.identity(inputs[name])
        return outputs

    return preprocessing_fn
