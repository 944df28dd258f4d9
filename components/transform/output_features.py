"""How each `preprocessing_fn` output is stored, described as manifest features the reader can decode.

Rules (the reader parses scalars, and decodes [H, W, C] arrays stored as raw little-endian bytes):

- a scalar (shape [] or [1]) of int64, float32 or string: a plain value ("value" encoding); it keeps
  the role of the input feature of the same name when that was a label, else it is metadata;
- a float32 [H, W, C] named like an input image, when Transform keeps images compact (the default
  preprocessing): the input's stored bytes, unchanged (JPEG, PNG or raw uint8). The graph's
  per-pixel arithmetic is applied where the pixels are read: by the Trainer's input pipeline and in
  the served model (`applied_at_read` in the manifest). A float32 pixel is 4 bytes where a JPEG
  pixel is ~0.15: materialized floats made Transform's output 28x ExampleGen's. Masks of the
  default preprocessing (ids unchanged) are kept as their stored bytes too, range-checked;
- any other float32 [H, W, C]: raw float32 bytes, role image (or the input's file role);
- an int64 [H, W, C]: named like an input mask it is stored as a PNG of that mask's dtype
  (uint8/uint16, every value range-checked when written), otherwise as raw int64 bytes;
- anything else (other ranks, string arrays, sparse or ragged outputs) is refused with a message.

>>> import tensorflow as tf
>>> out = output_feature("x", tf.io.FixedLenFeature([8, 8, 3], tf.float32), None)
>>> (out.dtype, out.shape, out.encoding, out.role)
('float32', [8, 8, 3], 'raw', 'image')
>>> photo = FeatureSpec("x", "uint8", [8, 8, 3], "jpeg", "image")
>>> output_feature("x", tf.io.FixedLenFeature([8, 8, 3], tf.float32), photo, applied_at_read=True).encoding
'jpeg'
"""
from __future__ import annotations

from typing import Collection, Mapping

import tensorflow as tf
from tensorflow_metadata.proto.v0 import schema_pb2
from tensorflow_transform.tf_metadata import schema_utils

from ..core.manifest import FeatureSpec
from ..core.errors import ConfigError

_DTYPES = {tf.float32: "float32", tf.int64: "int64", tf.string: "string"}


def _scalar(name: str, dtype: str, source: FeatureSpec | None) -> FeatureSpec:
    role = "label" if source is not None and source.role == "label" else "metadata"
    return FeatureSpec(name, dtype, [], "value", role)


def _array(name: str, dtype: str, shape: list[int], source: FeatureSpec | None) -> FeatureSpec:
    file_role = source.role if source is not None and source.is_file else None
    if dtype == "float32":
        return FeatureSpec(name, "float32", shape, "raw", file_role or "image")
    if file_role == "mask" and source is not None and source.dtype in ("uint8", "uint16"):
        return FeatureSpec(name, source.dtype, shape, "png", "mask")
    return FeatureSpec(name, "int64", shape, "raw", file_role or "mask")


def output_feature(name: str, spec: object, source: FeatureSpec | None, applied_at_read: bool = False) -> FeatureSpec:
    """The manifest feature for one transformed feature spec; ConfigError when it cannot be stored.

    `applied_at_read`: the feature is stored as its input's bytes (see `applied_at_read_names`).
    """
    if applied_at_read and source is not None:
        return source
    if not isinstance(spec, tf.io.FixedLenFeature):
        raise ConfigError(f"preprocessing output {name!r} is a {type(spec).__name__} (variable length); "
                          "shardflow stores fixed-shape features: return a dense tensor")
    dtype = _DTYPES.get(spec.dtype)
    shape = [int(d) for d in spec.shape]
    if dtype is None:
        raise ConfigError(f"preprocessing output {name!r} has dtype {spec.dtype.name}; use float32, int64 or string")
    if shape in ([], [1]):
        return _scalar(name, dtype, source)
    if len(shape) == 3 and dtype != "string":
        return _array(name, dtype, shape, source)
    raise ConfigError(f"preprocessing output {name!r} has shape {shape} and dtype {dtype}: shardflow stores "
                      "scalars and numeric [H, W, C] arrays; reshape it (e.g. tf.reshape(x, [-1, H, W, 1]))")


def output_features(schema: schema_pb2.Schema, inputs: Mapping[str, FeatureSpec],
                    applied_at_read: Collection[str] = ()) -> dict[str, FeatureSpec]:
    """Manifest features for every output of the transformed schema, in name order."""
    specs = schema_utils.schema_as_feature_spec(schema).feature_spec
    if not specs:
        raise ConfigError("the preprocessing_fn returned no features")
    return {name: output_feature(name, specs[name], inputs.get(name), name in applied_at_read) for name in sorted(specs)}


def applied_at_read_names(schema: schema_pb2.Schema, inputs: Mapping[str, FeatureSpec]) -> list[str]:
    """Outputs kept as their input file's stored bytes: [H, W, C] arrays named like an input image or mask.

    Only for the default preprocessing, whose image output depends on that input alone (the
    Trainer and the served model then run the graph on the image bytes by themselves) and whose
    mask output is the mask's ids unchanged (range-checked when written).
    """
    specs = schema_utils.schema_as_feature_spec(schema).feature_spec
    kept = {"image": tf.float32, "mask": tf.int64}
    return sorted(name for name, spec in specs.items()
                  if isinstance(spec, tf.io.FixedLenFeature) and len(spec.shape) == 3 and name in inputs
                  and spec.dtype == kept.get(inputs[name].role))


def int_domains(schema: schema_pb2.Schema) -> dict[str, tuple[int, int]]:
    """name → (min, max) for every feature whose int domain has both bounds (filled in after analysis)."""
    domains = {}
    for feature in schema.feature:
        if feature.HasField("int_domain") and feature.int_domain.HasField("min") and feature.int_domain.HasField("max"):
            domains[feature.name] = (int(feature.int_domain.min), int(feature.int_domain.max))
    return domains
