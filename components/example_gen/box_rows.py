"""A box index's chunk encoded in a worker: each image one Example (its image as ExampleGen stores an image
column, plus the box features of core/box_schema.py), or a reject on every row of it.

An image that does not decode rejects each of its rows with the decode's code and reason, and so does a declared
size the decoded image refutes (`size_mismatch`); a box that reaches past the decoded image (`box_past_image`)
or is under one pixel of it (`box_below_pixel`) rejects its own row and the image's other rows as
`image_rejected`, naming it (box_index.py's rule: an image is kept whole or not at all; box_groups.image_rejects).
Rows are the index's own numbers, so rejects.jsonl names the rows of the file as the index reader's rejects do.
"""
from __future__ import annotations

from typing import Any, Iterator

import numpy as np

from ..core.box_schema import BBOX, CLASS_TEXT
from .box_features import BoxesUnfit, BoxFigures, box_features
from .box_frame import stored_frame
from .box_groups import image_rejects
from .box_index import BoxReject, ImageBoxes
from .box_ingest import first_row
from .csv_index import Chunk, Record
from .data_root import BadCell
from .reject import Reject
from .rows import Encoded, RowEncoder


def box_outcomes(encoder: RowEncoder, chunk: Chunk, labels: dict[str, int]) -> Iterator[tuple[int, Encoded | Reject]]:
    """(rows it stands for, outcome) of every row of a box chunk: the reader's rejects, then each image's example
    or rejects. A COCO image without annotations stands for no row: its reject is listed with row 0."""
    for reject in chunk.rejects:
        yield 1, reject
    for image in chunk.images or ():
        outcome = encode_image_boxes(encoder, image, labels)
        if isinstance(outcome, Encoded):
            yield len(image.rows), outcome
        else:
            yield from ((1 if reject.row else 0, reject) for reject in outcome)


def encode_image_boxes(encoder: RowEncoder, image: ImageBoxes, labels: dict[str, int]) -> Encoded | list[Reject]:
    """The image's example, or one reject per row of it."""
    faults: dict[int, tuple[str, str]] = {}

    def add(size: tuple[int, int]) -> dict[str, Any]:
        try:
            return stored_frame(box_features(image, size, labels), size, encoder.primary.rules)  # type: ignore[union-attr]
        except BoxesUnfit as unfit:
            faults.update(unfit.faults)
            raise BadCell(*next(iter(unfit.faults.values()))) from None

    outcome = encoder.encode(Record(first_row(image), [image.path]), image.split, add)
    if isinstance(outcome, Encoded):
        return outcome
    rows = image.rows or (0,)
    if not faults:
        return _named(image, [Reject(row, image.split, outcome.column, image.path, outcome.code, outcome.reason)
                              for row in rows])
    own = {row: Reject(row, image.split, None, image.path, code, reason) for row, (code, reason) in faults.items()}
    others = image_rejects([row for row in rows if row not in own], image.split, image.path, own[min(own)])
    by_row = {**own, **{reject.row: reject for reject in others}}
    return _named(image, [by_row[row] for row in rows])


def _named(image: ImageBoxes, rejects: list[Reject]) -> list[Reject]:
    """The image's rejects naming its own annotation file (a YOLO label file, a VOC XML) when it has one."""
    return [BoxReject(**vars(reject), index=image.source) for reject in rejects] if image.source else rejects


def add_figures(figures: BoxFigures, values: dict[str, Any]) -> None:
    """An encoded example's boxes (its values, normalised) counted into its split's figures."""
    # Columns as Python floats zipped into corners: np.stack and astype cost more than these few boxes.
    corners = list(zip(*(np.asarray(values[name]).tolist() for name in BBOX)))
    figures.add_corners(corners, tuple(name.decode("utf-8") for name in values[CLASS_TEXT]))
