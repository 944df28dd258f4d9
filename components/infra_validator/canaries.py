"""What the probe feeds each signature: the Evaluator's canaries, and the model's signatures as saved.

The Evaluator keeps the first examples it scored (`canaries.tfrecord`, serialized tf.Examples) and
its probabilities for them (`canary_predictions.npy`). `serving_default` takes the examples as they
are (`examples`); `serving_image` takes encoded image files (`images`): the bytes of the canaries'
image feature, the model's `input` (shardflow_model.json) — as stored when ExampleGen stored a PNG or
JPEG, re-encoded losslessly as PNG when it stored raw pixels (a client sends a file, never raw bytes).
The signatures and their input names are read from `saved_model.pb` without loading the model.
"""
from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np

from ..core import storage
from ..core.manifest import FeatureSpec, read_manifest
from ..core.model_info import IMAGE_INPUT, SERVING_INPUT, read_model_info
from ..core.pixel_codec import decode_pixels, encode_pixels
from ..core.tfrecord import iter_records
from ..evaluator.outputs import CANARIES, CANARY_PREDICTIONS
from .errors import InfraValidationError


@dataclass(frozen=True)
class Canaries:
    records: list[bytes]  # serialized tf.Examples, in the order the Evaluator scored them
    probabilities: np.ndarray | None  # the Evaluator's, one row (or [H, W, C] block) per record; None: not read


def read_canaries(evaluation: str, with_probabilities: bool = True) -> Canaries:
    """The canaries, and the Evaluator's probabilities for them unless `with_probabilities` is False (a kind that
    is judged without a stored answer: `Task.needs_canary_predictions`)."""
    with storage.open_read(storage.join(evaluation, CANARIES)) as stream:
        records = list(iter_records(stream, storage.join(evaluation, CANARIES)))
    if not with_probabilities:
        if not records:
            raise InfraValidationError(f"evaluation {evaluation}: no canary examples")
        return Canaries(records, None)
    probabilities = np.load(io.BytesIO(storage.read_bytes(storage.join(evaluation, CANARY_PREDICTIONS))))
    if not records or len(records) != len(probabilities):
        raise InfraValidationError(f"evaluation {evaluation}: {len(records)} canary examples for "
                         f"{len(probabilities)} rows of probabilities")
    return Canaries(records, probabilities)


def saved_signatures(model: str) -> dict[str, list[str]]:
    """{signature name: its input names} of the SavedModel's serving meta graph, read from saved_model.pb."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel.FromString(storage.read_bytes(storage.join(model, "saved_model.pb")))
    graphs = [g for g in saved.meta_graphs if "serve" in g.meta_info_def.tags] or list(saved.meta_graphs)
    if not graphs:
        return {}
    return {name: sorted(signature.inputs) for name, signature in graphs[0].signature_def.items()
            if not name.startswith("__")}  # __saved_model_init_op is no serving signature


def image_bytes(records: list[bytes], feature: FeatureSpec) -> list[bytes]:
    """The encoded image file in each canary's image `feature` (PNG made from raw-stored pixels)."""
    from tensorflow.core.example import example_pb2

    images = []
    for index, record in enumerate(records):
        values = example_pb2.Example.FromString(record).features.feature[feature.name].bytes_list.value
        if len(values) != 1:
            raise InfraValidationError(f"canary {index} has {len(values)} values in feature {feature!r}, "
                                       "not one encoded image")
        if feature.encoding == "raw":
            pixels = decode_pixels(values[0], "raw", feature.dtype, tuple(feature.shape))
            images.append(encode_pixels(pixels, "png"))
        else:
            images.append(values[0])
    return images


def image_feature(model: str, examples: str) -> FeatureSpec | str:
    """The model's image feature as the evaluated examples store it, or why it cannot be told."""
    name = read_model_info(model).extra.get("input")
    if not name:
        return "the model names no image feature (shardflow_model.json 'input')"
    features = read_manifest(examples).features
    if name not in features or not features[name].is_file:
        return f"{name!r} is not an image feature of the evaluated examples {examples}"
    return features[name]


def signature_inputs(model: str, canaries: Canaries,
                     examples: str) -> tuple[dict[str, tuple[str, list[bytes]]], list[str]]:
    """({signature: (input name, values)} for every signature a canary can feed, [why the others cannot]).

    `examples`: the examples the Evaluator scored (their manifest says how images are stored).
    """
    fed: dict[str, tuple[str, list[bytes]]] = {}
    problems = []
    for name, inputs in sorted(saved_signatures(model).items()):
        if inputs == [SERVING_INPUT]:
            fed[name] = (SERVING_INPUT, canaries.records)
        elif inputs == [IMAGE_INPUT]:
            feature = image_feature(model, examples)
            if isinstance(feature, str):
                problems.append(f"signature {name!r} takes images, but {feature}")
                continue
            fed[name] = (IMAGE_INPUT, image_bytes(canaries.records, feature))
        else:
            problems.append(f"signature {name!r} takes {inputs}: no canary can feed it, so it cannot be checked")
    return fed, problems
