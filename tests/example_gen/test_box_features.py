"""Boxes as TF OD API features: normalised by the decoded size, unchanged by a resize (which stretches the
image: the box still encloses its pixels), parsed back by TensorFlow as written; and a split's box figures."""
from __future__ import annotations

import dataclasses
import io

import numpy as np
import pytest
from PIL import Image

from shardflow.core.example_proto import encode_example
from shardflow.example_gen.box_features import (BBOX, BOX_FEATURES, CLASS_LABEL, CLASS_TEXT, BoxFigures,
                                                 BoxesUnfit, box_features, decode_faults, label_map)
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
    with pytest.raises(BoxesUnfit, match="past the image's 90x60") as refused:
        box_features(_image((Box(0, 0, 30, 91, normalized=False),), ("cat",)), (60, 90), {"cat": 1})
    assert list(refused.value.faults) == [1] and refused.value.faults[1][0] == "box_past_image"


def test_a_box_under_one_decoded_pixel_is_a_reject_never_a_dot() -> None:
    """A 1.3 read as pixels on a 640-px image was a dot in the top-left corner: now its row is refused."""
    dot = Box(0.2, 0.1, 1.3, 0.5, normalized=False)  # a normalised row read as pixels: 0.4 x 1.1 pixels
    fine = Box(0.2, 0.1, 0.9, 0.5)  # normalised: 256 x 336 pixels of 640x480
    faults = decode_faults(_image((fine, dot), ("cat", "cat")), (480, 640))
    assert list(faults) == [2] and faults[2][0] == "box_below_pixel" and "0.4 x 1.1 pixels" in faults[2][1]
    thin = Box(0.5, 0.1, 0.5015, 0.9)  # 0.72 rows of a 480-row image
    assert decode_faults(_image((thin,), ("cat",)), (480, 640))[1][0] == "box_below_pixel"
    assert decode_faults(_image((Box(0.5, 0.1, 0.5021, 0.9),), ("cat",)), (480, 640)) == {}  # 1.008 rows: a box


def test_a_declared_size_the_decoded_image_refutes_rejects_every_row_naming_both_sizes() -> None:
    image = ImageBoxes("a.jpg", "train", (Box(10, 20, 50, 80, normalized=False), Box(1, 1, 9, 9, normalized=False)),
                       ("cat", "dog"), (3, 8), (False, False), declared=(100, 320))
    faults = decode_faults(image, (100, 160))
    assert sorted(faults) == [3, 8] and {code for code, _ in faults.values()} == {"size_mismatch"}
    assert "declares 320x100" in faults[3][1] and "decodes to 160x100" in faults[3][1]
    assert decode_faults(dataclasses.replace(image, declared=(100, 160)), (100, 160)) == {}
    negative = ImageBoxes("n.jpg", "train", (), (), (), (), declared=(5, 5))  # a COCO image without annotations
    assert decode_faults(negative, (6, 5)) == {0: ("size_mismatch", decode_faults(negative, (6, 5))[0][1])}


def test_each_box_area_is_counted_in_decoded_pixels() -> None:
    image = _image((Box(0.1, 0.2, 0.5, 0.6), Box(0, 0, 30, 45, normalized=False)), ("cat", "dog"))
    areas = box_features(image, (60, 90), {"cat": 1, "dog": 2})["image/object/area"]
    assert areas.dtype == np.float32 and areas.tolist() == pytest.approx([0.4 * 60 * 0.4 * 90, 30 * 45])


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
