"""ExampleGen's box indexes (issue 54): recognised by their file type and columns, read whole in the launcher
into one example per image (box_index.py), each image given its split, and cut into chunks of images that the
workers encode (box_rows.py) as they encode chunks of CSV rows.

Recognised without a flag, as a mask column is by its name: a `.json` index is COCO; a CSV whose header names
box columns (xmin, YMin, ...) is the header layout; a headerless CSV whose first record has the AutoML layout
(`[set,]path,label,x_min,y_min,,,x_max,y_max,,`) is the AutoML one; a `.yaml` is a YOLO data.yaml (given alone: it
names the splits, its `val` is eval); a `.txt` under `ImageSets/Main/` beside `Annotations/` is a VOC list. Every
index of a run has one format.

Splits, as for a table of files: an index named by its split (`train=train.csv`) puts every image in it; one
unnamed index takes each image's set column (TRAIN, VALIDATION, TEST → train, eval, test; UNASSIGNED or no
set column: the image's path hashed with --split weights). A set value not known is `unknown_split` on each
of the image's rows. An image's rows always share its split: the same image is never in two splits.
"""
from __future__ import annotations

import contextlib
import dataclasses
import gc
from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterator

from ..core.box_schema import BOX_DTYPES, BOX_FEATURES, BOX_ROLE
from .box_features import BoxFigures, label_map
from .box_index import (BoxIndex, BoxIndexOptions, BoxReject, ImageBoxes, box_format, read_box_csv, read_coco,
                        read_voc, read_yolo)
from .columns import SAMPLE_ROWS, ColumnSpec
from .config import ConfigError, ExampleGenConfig, IndexSpec
from .csv_index import Chunk
from .splitting import SplitAssigner

SET_SPLITS = {"train": "train", "training": "train", "validation": "eval", "val": "eval", "eval": "eval",
              "test": "test"}  # a set column's values (lowercased by the reader) → ExampleGen's split names


def box_column_specs() -> list[ColumnSpec]:
    """The eight box features as columns read from no cell (position -1): lists of any length."""
    return [ColumnSpec(name, -1, BOX_ROLE, BOX_DTYPES[name], (-1,)) for name in BOX_FEATURES]


def first_row(image: ImageBoxes) -> int:
    """The row an image's example names in provenance: its first row (0: a COCO image without annotations)."""
    return image.rows[0] if image.rows else 0


@dataclass(frozen=True)
class BoxSource:
    """A run's box indexes as read, split, with the label map of every class they name."""

    format: str
    indexes: tuple[BoxIndex, ...]
    labels: dict[str, int]
    split_names: tuple[str, ...]
    options: BoxIndexOptions

    @property
    def num_images(self) -> int:
        return sum(len(index.images) for index in self.indexes)

    def samples(self) -> list[list[str]]:
        """Rows of the one-column table [image] that column detection and the work estimate sample."""
        return [[image.path] for index in self.indexes for image in index.images[:SAMPLE_ROWS]][:SAMPLE_ROWS]

    def chunks(self, images_per_chunk: int) -> list[Chunk]:
        """Chunks of `images_per_chunk` images per index; an index's first chunk carries the rows it rejected."""
        chunks: list[Chunk] = []
        for index_id, index in enumerate(self.indexes):
            images = index.images
            groups = [images[at:at + images_per_chunk] for at in range(0, len(images), images_per_chunk)]
            if not groups and index.rejects:
                groups = [()]
            own = [Chunk(index_id, number, index.index, 0, 0, 0, sum(len(i.rows) for i in group)
                         + (len(index.rejects) if number == 0 else 0), 0, None, tuple(group),
                         index.rejects if number == 0 else ()) for number, group in enumerate(groups)]
            if sum(c.num_rows for c in own) != index.rows or not index.reconciled:  # the reader's count, again
                raise RuntimeError(f"{index.index}: rows do not reconcile: {index.counts()}")
            chunks += own
        return chunks

    def manifest_entry(self, figures: dict[str, BoxFigures]) -> dict[str, Any]:
        """manifest.extra[BOXES_KEY]: the label map, units, max boxes and format (core/box_schema.py), and per
        split the box figures (`figures`) and per index where its rows went (`indexes`)."""
        return {"label_map": dict(self.labels), "units": self.indexes[0].units if self.indexes else "normalized",
                "max_boxes": self.options.max_boxes, "format": self.format,
                "figures": {split: figures.get(split, BoxFigures()).as_json() for split in self.split_names},
                "indexes": [{"path": index.index, "units": index.units, "units_decision": index.units_decision,
                             **index.counts(),
                             "rejected_by_reason": index.rejected_by_reason()} for index in self.indexes]}


def read_boxes(config: ExampleGenConfig) -> BoxSource | None:
    """The run's box indexes, read and split; None when its indexes are tables of files."""
    formats = [box_format(index.path) for index in config.indexes]
    if not any(formats):
        return None
    if len(set(formats)) > 1:
        raise ConfigError(f"the index files mix formats {dict(zip((i.path for i in config.indexes), formats))}: "
                          f"give every split's boxes in one format (COCO JSON, YOLO, VOC, or CSV)")
    if config.split_key is not None:
        raise ConfigError("--split-key does not apply to a box index: an image's rows share the image's split")
    if config.keep_exif_orientation:
        raise ConfigError("--keep-exif-orientation does not apply to a box index: boxes are drawn on the upright "
                          "image, as labelling tools show it")
    options = BoxIndexOptions(units=config.box_units, max_boxes=config.max_boxes)
    assigner = SplitAssigner(config.split_weights, (0,))
    indexes, hashed = [], False
    with _collector_paused():
        for spec in config.indexes:
            index = _read_index(spec, str(formats[0]), options, config.data_root)
            hashed = hashed or any(image.split is None for image in index.images) and spec.split is None
            indexes.append(_split_images(index, spec.split, assigner))
    _check_units(indexes)
    return BoxSource(str(formats[0]), tuple(indexes), _run_label_map(indexes), _split_names(config, indexes, hashed),
                     options)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """The garbage collector off while an index is read: its rows make tens of thousands of objects without a
    cycle, whose allocations set off full collections of everything the launcher imported (~10 % of the read).

    >>> with _collector_paused():
    ...     gc.isenabled()
    False
    >>> gc.isenabled()
    True
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _read_index(spec: IndexSpec, layout: str, options: BoxIndexOptions, data_root: str) -> BoxIndex:
    """One index file read by its format's reader; a YOLO data.yaml holds every split, so it takes no split name."""
    if layout == "yolo":
        if spec.split is not None:
            raise ConfigError(f"{spec.path}: a YOLO data.yaml names its own splits (train, val, test): give it alone "
                              f"as --index {spec.path}, without {spec.split}=")
        return read_yolo(spec.path, options, data_root)
    if layout == "voc":
        return read_voc(spec.path, options, spec.split, data_root)
    return read_coco(spec.path, options, spec.split) if layout == "coco" else read_box_csv(spec.path, options)


def _check_units(indexes: list[BoxIndex]) -> None:
    """Indexes of one run read in different units are refused: one of them is probably misread."""
    units = {index.index: index.units for index in indexes}
    if len(set(units.values())) > 1:
        raise ConfigError(f"the index files disagree on units {units}: pass --box-units normalized or pixels if that "
                          "is what they hold")


def _run_label_map(indexes: list[BoxIndex]) -> dict[str, int]:
    """The files' own label maps (COCO's ids, YOLO's names), which must agree; else names sorted from 1."""
    own = [index for index in indexes if index.category_ids]
    if not own:
        return label_map([name for index in indexes for name in index.labels])
    merged: dict[str, int] = {}
    for index in own:
        for name, number in index.category_ids.items():
            if merged.setdefault(name, number) != number:
                raise ConfigError(f"{index.index}: class {name!r} has id {number}, another index file gives it id "
                                  f"{merged[name]}: one label map per run")
    shared = [number for number, count in Counter(merged.values()).items() if count > 1]
    if shared:
        names = sorted(name for name, number in merged.items() if number == shared[0])
        raise ConfigError(f"the index files give id {shared[0]} to {names}: one label map per run")
    return dict(sorted(merged.items(), key=lambda item: item[1]))


def _split_names(config: ExampleGenConfig, indexes: list[BoxIndex], hashed: bool) -> tuple[str, ...]:
    """The named indexes' splits; else the hash splits (when an image was hashed) and the set column's splits."""
    if not config.hash_split:
        return config.split_names
    used = {image.split for index in indexes for image in index.images}
    from_set = [name for name in dict.fromkeys(SET_SPLITS.values()) if name in used]
    return tuple(dict.fromkeys([*(config.split_names if hashed else ()), *from_set]))


def _split_images(index: BoxIndex, named: str | None, assigner: SplitAssigner) -> BoxIndex:
    """Each image's split (module docstring); an unknown set value rejects the image's rows. The reader's rejects
    of a named index take its split."""
    rejects = [dataclasses.replace(r, split=named) if named and r.split is None else r for r in index.rejects]
    images = []
    for image in index.images:
        split = named or (SET_SPLITS.get(image.split) if image.split is not None else assigner.assign([image.path]))
        if split is None:
            rejects += [BoxReject(row, image.split, "split", image.path, "unknown_split",
                                  f"set {image.split!r} is not TRAIN, VALIDATION, TEST or UNASSIGNED",
                                  index=index.index) for row in image.rows]
            continue
        images.append(dataclasses.replace(image, split=split))
    return dataclasses.replace(index, images=tuple(images), rejects=tuple(sorted(rejects, key=lambda r: r.row)))
