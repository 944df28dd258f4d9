"""A box index's boxes moved into the frame of the image as stored: letterboxed images (`--box-resize
letterbox`, core/letterbox.py) hold the source in a window of the frame, so each box normalised on the source
is moved into that window; a stretched image (`--box-resize stretch`) keeps every normalised box as it is.

>>> from shardflow.example_gen.images import ImageRules
>>> features = {name: np.array([0.0, 0.5], np.float32) for name in BBOX[:2]}
>>> features.update({name: np.array([1.0, 1.0], np.float32) for name in BBOX[2:]})
>>> moved = stored_frame(features, (100, 300), ImageRules(10**6, resize=(128, 128), letterbox=True))
>>> moved[BBOX[0]].tolist(), moved[BBOX[1]].tolist(), moved[BBOX[2]].tolist()
([0.328125, 0.4921875], [0.0, 0.5], [0.65625, 0.65625])
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..core.box_schema import BBOX
from ..core.letterbox import letterboxed_boxes
from .images import ImageRules


def stored_frame(features: dict[str, Any], source: tuple[int, int], rules: ImageRules | None) -> dict[str, Any]:
    """`features` with their corners (BBOX, normalised on the `source` (h, w) image as decoded, EXIF orientation
    applied) normalised on the stored image instead; the same dict when the image is not letterboxed."""
    if rules is None or not rules.letterbox or not rules.resize:
        return features
    corners = np.stack([np.asarray(features[name], np.float64) for name in BBOX], axis=-1).reshape(-1, 4)
    moved = letterboxed_boxes(corners, source, rules.resize).astype(np.float32)
    return {**features, **{name: np.ascontiguousarray(moved[:, i]) for i, name in enumerate(BBOX)}}
