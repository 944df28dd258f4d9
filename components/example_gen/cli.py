"""`shardflow example-gen`: translates command-line flags into an ExampleGenConfig. Nothing else.

Flags it does not know are Beam pipeline options and pass through (e.g. `--runner ...DaskRunner`).
"""
from __future__ import annotations

import argparse
import re

from ..core.flag_parser import config_from_flags
from .box_index import is_yolo, yolo_root
from .config import (BOX_RESIZE_MODES, BOX_UNITS, DEFAULT_MAX_PIXELS, DEFAULT_NEAR_DUPLICATE_DISTANCE, NEAR_DUPLICATE_MODES, ConfigError,
                     ExampleGenConfig, IndexSpec)

_SIZE = re.compile(r"^(\d+)x(\d+)$")


def _column_value(text: str) -> tuple[str, str]:
    """`col=value` → (col, value); a bare `value` applies to every column ("*")."""
    column, sep, value = text.rpartition("=")
    return (column, value) if sep else ("*", value)


def _size(text: str) -> tuple[int, int]:
    match = _SIZE.match(text)
    if not match:
        raise ConfigError(f"--resize expects HxW such as 28x28, got {text!r}")
    return int(match.group(1)), int(match.group(2))


def _weight(text: str) -> tuple[str, int]:
    name, sep, weight = text.partition("=")
    if not sep or not weight.isdigit():
        raise ConfigError(f"--split expects NAME=WEIGHT such as train=9, got {text!r}")
    return name, int(weight)


def _data_root(args: argparse.Namespace) -> str:
    """--data-root, or the root a YOLO data.yaml given alone names (its `path`, as Ultralytics reads it)."""
    if args.data_root is not None:
        return args.data_root
    index = IndexSpec.parse(args.index[0])
    if len(args.index) == 1 and is_yolo(index.path):  # named (train=data.yaml): the reader says why not
        return yolo_root(index.path)
    raise ConfigError("--data-root is required (only a YOLO data.yaml given alone names its own root)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--index", action="append", required=True, metavar="[SPLIT=]CSV", help="index file; repeatable")
    add("--data-root", help="directory the index paths are relative to; nothing outside is read (required, but for "
                            "a YOLO data.yaml alone: default its `path`)")
    add("--output", required=True, help="output directory (TFX layout: Split-*/, manifest.json, ...)")
    add("--split", action="append", default=[], metavar="NAME=WEIGHT", help="hash split of one unnamed index (default train=9 eval=1)")
    add("--split-key", help="column whose value decides the split (rows sharing it share a split)")
    add("--role", action="append", default=[], metavar="COL=ROLE", help="override a detected role: image|mask|label|metadata")
    add("--resize", action="append", default=[], metavar="[COL=]HxW", help="resize at ingest (masks: nearest neighbour)")
    add("--channels", action="append", default=[], metavar="[COL=]gray|rgb", help="channel conversion at ingest")
    add("--storage", action="append", default=[], metavar="[COL=]raw|png|jpeg", help="how pixels are stored (default raw)")
    add("--gzip", action="store_true", help="GZIP-compress the shards")
    add("--shard-size-mb", type=float, default=128.0, help="target payload per shard (default 128)")
    add("--num-shards", type=int, help="fixed number of shards per split (instead of --shard-size-mb)")
    add("--min-shards", type=int, default=1, help="at least this many shards per split (multi-worker FILE sharding)")
    add("--max-reject-fraction", type=float, default=0.01, help="fail when more rows are rejected (default 0.01)")
    add("--max-pixels", type=int, default=DEFAULT_MAX_PIXELS, help="reject larger images (decompression bombs)")
    add("--keep-exif-orientation", action="store_true",
        help="store pixels as the file holds them (default: EXIF orientation applied, as viewers do)")
    add("--rows-per-chunk", type=int, help="rows per unit of Beam work (default: from the row count)")
    add("--progress-seconds", type=float, default=15.0, help="progress print interval")
    add("--spans", type=int, default=1, help="with {SPAN} or {YYYY}{MM}{DD} in --index: the newest N spans (default 1)")
    add("--span-store", help="where each span's shards are kept and reused (needed with span patterns)")
    add("--near-duplicates", choices=NEAR_DUPLICATE_MODES, default="warn",
        help="images in more than one split that are altered copies (perceptual hashes): report them (warn, "
             "default), fail the run (fail), or skip the hashing (off)")
    add("--near-duplicate-distance", type=int, default=DEFAULT_NEAR_DUPLICATE_DISTANCE, metavar="BITS",
        help=f"largest Hamming distance of two 64-bit hashes called near copies (default {DEFAULT_NEAR_DUPLICATE_DISTANCE})")

    add("--box-units", choices=BOX_UNITS, default="auto",
        help="a box index's coordinates: normalized (0-1), pixels, or auto (default: the layout's own units, else "
             "decided from the whole file, docs/detection.md)")
    add("--max-boxes", type=int, default=100, metavar="K",
        help="a box index's image with more boxes is rejected, every row of it (default 100)")
    add("--box-resize", choices=BOX_RESIZE_MODES, default="letterbox",
        help="a box index's images under --resize: letterbox (default: aspect kept, padded with 0, boxes moved "
             "into the padded frame) or stretch (docs/detection.md)")


def config_from_args(args: argparse.Namespace, extra: list[str]) -> ExampleGenConfig:
    """`extra` are Beam's own options (--runner, --direct_num_workers, ...)."""
    return config_from_flags(
        ExampleGenConfig, args, indexes=tuple(IndexSpec.parse(i) for i in args.index), data_root=_data_root(args),
        split_weights=tuple(_weight(s) for s in args.split) or (("train", 9), ("eval", 1)),
        roles=tuple(_column_value(r) for r in args.role),
        resize=tuple((c, _size(v)) for c, v in map(_column_value, args.resize)),
        channels=tuple(_column_value(c) for c in args.channels),
        storage=tuple(_column_value(s) for s in args.storage),
        compression="GZIP" if args.gzip else "", beam_args=tuple(extra))
