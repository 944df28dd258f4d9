"""Letterboxing: an (h, w) image scaled to fit (H, W) with its aspect kept, centred, the rest padded with `PAD`.

The geometry is `tf.image.resize_with_pad`'s, in its own float32 arithmetic (ratio = max(w / W, h / H); the
content floor(h / ratio) x floor(w / ratio); the top and left paddings floor((H - h / ratio) / 2) and
floor((W - w / ratio) / 2)), so ExampleGen (Pillow, without TensorFlow) and the served graph (that op itself,
core/serving_image.py) put every image's pixels in the same rows and columns; the Trainer's
`box_augment.unletterbox_boxes` undoes `letterboxed_boxes` in the serving graph (tested against it).

The padding is 0 (black), not Ultralytics' grey 114: it is what `resize_with_pad` and the TF Object Detection
API's `pad_to_max_dimension` write, so the served graph is the one standard op, and 0 is what the detector's
zero-padded convolutions already see past the image's edges (pixels reach the model scaled to [0, 1]).

A box normalised on the source's outer pixel edges maps exactly: the resize puts the source's outer edges on
the content's (Pillow and TensorFlow both resize with half-pixel centres), so a fraction f of the source's
width lands at (left + f * width) / W.

>>> letterbox_layout((100, 300), (128, 128))  # a wide image: full width, bands above and below
Layout(top=42, left=0, height=42, width=128)
>>> letterbox_window((100, 300), (128, 128))  # where the image lies, normalised: what a reader maps back with
(0.328125, 0.0, 0.65625, 1.0)
>>> letterbox_layout((64, 64), (64, 64))  # at the target size: the identity
Layout(top=0, left=0, height=64, width=64)
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

PAD = 0  # the padding's value in every channel
MODES = ("letterbox", "stretch")  # ExampleGen's --box-resize: aspect kept and padded, or the image stretched


class Layout(NamedTuple):
    """The content's place in the (H, W) frame: its top and left padding and its size, in pixels."""

    top: int
    left: int
    height: int
    width: int


def letterbox_layout(source: tuple[int, int], target: tuple[int, int]) -> Layout:
    """Where an image of `source` (h, w) lies once letterboxed into `target` (H, W) (module docstring).

    A side of 0 pixels (an image more than H or W times as long as it is wide) is returned as 0: callers refuse it.
    """
    height, width = np.float32(source[0]), np.float32(source[1])
    target_h, target_w = np.float32(target[0]), np.float32(target[1])
    ratio = max(width / target_w, height / target_h)
    resized_h, resized_w = height / ratio, width / ratio
    top = max(0, int(np.floor((target_h - resized_h) / np.float32(2))))
    left = max(0, int(np.floor((target_w - resized_w) / np.float32(2))))
    return Layout(top, left, int(np.floor(resized_h)), int(np.floor(resized_w)))


def letterbox_window(source: tuple[int, int], target: tuple[int, int]) -> tuple[float, float, float, float]:
    """(ymin, xmin, ymax, xmax) of the image's content in the letterboxed frame, normalised to the frame."""
    top, left, height, width = letterbox_layout(source, target)
    return top / target[0], left / target[1], (top + height) / target[0], (left + width) / target[1]


def letterboxed_boxes(boxes: np.ndarray, source: tuple[int, int], target: tuple[int, int]) -> np.ndarray:
    """Boxes [..., 4] (ymin, xmin, ymax, xmax) normalised on the (h, w) source → normalised on the letterboxed frame.

    >>> letterboxed_boxes(np.array([[0.0, 0.5, 1.0, 1.0]]), (100, 300), (128, 128)).tolist()
    [[0.328125, 0.5, 0.65625, 1.0]]
    """
    ymin, xmin, ymax, xmax = letterbox_window(source, target)
    scale = np.array([ymax - ymin, xmax - xmin] * 2)
    return np.asarray(boxes, np.float64) * scale + np.array([ymin, xmin] * 2)


def source_boxes(boxes: np.ndarray, source: tuple[int, int], target: tuple[int, int]) -> np.ndarray:
    """`letterboxed_boxes`' inverse: boxes [..., 4] normalised on the letterboxed frame → on the (h, w) source,
    clipped to [0, 1] (a box may reach into the padding, which is outside the source).

    >>> source_boxes(np.array([[0.25, 0.5, 0.75, 1.0]]), (100, 300), (128, 128)).round(4).tolist()
    [[0.0, 0.5, 1.0, 1.0]]
    """
    ymin, xmin, ymax, xmax = letterbox_window(source, target)
    scale = np.array([ymax - ymin, xmax - xmin] * 2)
    return np.clip((np.asarray(boxes, np.float64) - np.array([ymin, xmin] * 2)) / scale, 0.0, 1.0)
