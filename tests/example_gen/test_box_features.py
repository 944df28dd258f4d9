"""Boxes as TF OD API features: normalised by the decoded size, unchanged by a resize (which stretches the
image: the box still encloses its pixels), parsed back by TensorFlow as written; and a split's box figures."""
from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from shardflow.core.example_proto import encode_example
from shardflow.example_gen.box_features import (BBOX, BOX_FEATURES, CLASS_LABEL, CLASS_TEXT, BoxFigures,
                                                 BoxPastImage, box_features, label_map)
from shardflow.example_gen.box_types import Box, ImageBoxes
from shardflow.example_gen.images import ImageRules, decode_sized

pytestmark = pytest.mark.unit


def _image(boxes: tuple[Box, ...], classes: tuple[str, ...]) -> ImageBoxes:
    return ImageBoxes("a.png", "train", boxes, classes, tuple(range(1, len(boxes) + 1)), (False,) * len(boxes))


def test_a_pixel_box_still_encloses_its_pixels_after_the_resize() -> None:
    pixels = np.zeros((60, 90, 3), np.uint8)
    pixels[12:36, 30:66] = 255  # rows 12..35, columns 30..65: outer edges 12, 36 and 30, 66
    data = io.BytesIO()
    Image.fromarray(pixels).save(data, format="PNG")
    box = Box(12, 30, 36, 66, normalized=False)
    _, size = decode_sized(data.getvalue(), ImageRules(10_000_000, None, None))
    features = box_features(_image((box,), ("cat",)), size, {"cat": 1})
    ymin, xmin, ymax, xmax = (float(features[name][0]) for name in BBOX)
    assert (ymin, xmin, ymax, xmax) == pytest.approx((12 / 60, 30 / 90, 36 / 60, 66 / 90), abs=1e-7)  # float32
    resized, _ = decode_sized(data.getvalue(), ImageRules(10_000_000, None, (40, 40)))
    bright = np.argwhere(np.asarray(resized)[..., 0] > 127)
    (top, left), (bottom, right) = bright.min(axis=0), bright.max(axis=0) + 1  # outer edges in the 40x40 image
    assert abs(top - ymin * 40) <= 1 and abs(bottom - ymax * 40) <= 1  # within the resampling's pixel
    assert abs(left - xmin * 40) <= 1 and abs(right - xmax * 40) <= 1


def test_a_pixel_box_past_its_image_is_refused_with_its_reason() -> None:
    with pytest.raises(BoxPastImage, match="past the image's 90x60"):
        box_features(_image((Box(0, 0, 30, 91, normalized=False),), ("cat",)), (60, 90), {"cat": 1})


def test_tensorflow_parses_the_features_as_written_negatives_included() -> None:
    import tensorflow as tf

    labels = label_map(["dog", "cat", "cat"])
    assert labels == {"cat": 1, "dog": 2}
    spec = {name: tf.io.VarLenFeature(tf.string if name == CLASS_TEXT else tf.int64 if "class/label" in name
                                      or "crowd" in name else tf.float32) for name in BOX_FEATURES}
    written = [_image((Box(0.1, 0.2, 0.5, 0.6), Box(0.0, 0.0, 1.0, 1.0)), ("dog", "cat")), _image((), ())]
    for image in written:
        features = box_features(image, (10, 10), labels)
        parsed = tf.io.parse_single_example(encode_example(features), spec)
        for name in BOX_FEATURES:
            values = tf.sparse.to_dense(parsed[name]).numpy().tolist()
            expected = list(features[name])
            assert values == expected  # float32 written, float32 read
    assert box_features(written[0], (10, 10), labels)[CLASS_LABEL].tolist() == [2, 1]


def test_box_figures_count_and_merge() -> None:
    first, second = BoxFigures(), BoxFigures()
    first.add([Box(0.0, 0.0, 0.04, 0.04), Box(0.0, 0.0, 0.5, 0.5)], ("cat", "dog"))
    second.add([], ())
    second.add([Box(0.0, 0.0, 1.0, 1.0)], ("cat",))
    figures = first.merge(second).as_json()
    assert figures["images"] == 3 and figures["boxes"] == 3
    assert figures["boxes_per_image"] == {"0": 1, "1": 1, "2": 1}
    assert figures["boxes_per_class"] == {"cat": 2, "dog": 1}
    assert figures["box_side_fraction"] == {"0-0.05": 1, "0.05-0.1": 0, "0.1-0.2": 0, "0.2-0.4": 0, "0.4-1": 2}
