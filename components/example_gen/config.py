"""ExampleGen's options: one frozen dataclass that checks itself and names the bad value.

>>> cfg = ExampleGenConfig(indexes=(IndexSpec("data/all.csv"),), data_root="data", output="out")
>>> cfg.split_weights
(('train', 9), ('eval', 1))
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..core import storage, uri
from ..core.errors import ConfigError  # noqa: F401  (re-exported: callers catch it from here too)
from ..core.letterbox import MODES as LETTERBOX_MODES
from .box_index import IMAGE_COLUMN, box_format
from .csv_index import read_header
from .spans import has_span_pattern

REJECTS_FILE = "rejects.jsonl"  # beside manifest.json: every rejected row (CSV, row, file, reason), whole or absent
STORAGES = ("raw", "png", "jpeg")
COMPRESSIONS = ("", "GZIP")
CHANNEL_MODES = ("gray", "rgb")
ROLE_OVERRIDES = ("image", "mask", "label", "metadata")
NEAR_DUPLICATE_MODES = ("off", "warn", "fail")
BOX_UNITS = ("normalized", "pixels", "auto")  # box_types.UNITS, checked here to name the option
BOX_RESIZE_MODES = LETTERBOX_MODES  # a box index's images under --resize: aspect kept and padded, or stretched
DEFAULT_NEAR_DUPLICATE_DISTANCE = 10  # bits of 64: recall 0.99, 0.05 % false pairs (docs/near-duplicates.md)
MAX_NEAR_DUPLICATE_DISTANCE = 20  # the search's cost grows steeply beyond
DEFAULT_MAX_PIXELS = 89_478_485  # PIL's own decompression-bomb limit (1024 * 1024 * 1024 // 4 // 3)
_SPLIT_NAME = re.compile(r"^[A-Za-z0-9_]+$")


@dataclass(frozen=True)
class IndexSpec:
    """One CSV index; `split` is None when rows are split by hashing."""

    path: str
    split: str | None = None

    @classmethod
    def parse(cls, text: str) -> "IndexSpec":
        """`train=dir/train.csv` or `dir/all.csv`."""
        name, sep, path = text.partition("=")
        if sep and _SPLIT_NAME.match(name):
            return cls(path=path, split=name)
        return cls(path=text)


@dataclass(frozen=True, kw_only=True)
class ExampleGenConfig:
    indexes: tuple[IndexSpec, ...]
    data_root: str
    output: str
    split_weights: tuple[tuple[str, int], ...] = (("train", 9), ("eval", 1))
    split_key: str | None = None
    roles: tuple[tuple[str, str], ...] = ()  # column → role overrides
    resize: tuple[tuple[str, tuple[int, int]], ...] = ()  # column ("*" for all images) → (H, W)
    channels: tuple[tuple[str, str], ...] = ()  # column ("*") → gray | rgb
    storage: tuple[tuple[str, str], ...] = ()  # column ("*") → raw | png | jpeg
    compression: str = ""
    shard_size_mb: float = 128.0
    num_shards: int | None = None
    min_shards: int = 1
    max_reject_fraction: float = 0.01
    max_pixels: int = DEFAULT_MAX_PIXELS
    keep_exif_orientation: bool = False  # True: pixels as stored, EXIF orientation not applied
    rows_per_chunk: int | None = None  # None: chosen from the row count
    beam_args: tuple[str, ...] = ()
    progress_seconds: float = 15.0
    spans: int = 1  # with {SPAN}/{YYYY}{MM}{DD} in the index paths: the newest N spans form the window
    span_store: str | None = None  # where each span's output is kept and reused across runs
    near_duplicates: str = "warn"  # perceptual-hash pairs across splits: off | warn | fail
    near_duplicate_distance: int = DEFAULT_NEAR_DUPLICATE_DISTANCE  # Hamming bits of the 64-bit dct hash
    box_units: str = "auto"  # a box index's coordinates: normalized | pixels | auto (decided per file)
    max_boxes: int = 100  # a box index's image with more boxes is rejected (the TF OD API's default)
    box_resize: str = "letterbox"  # a box index's images: letterbox | stretch (core/letterbox.py; docs/trainer.md)

    @property
    def uses_spans(self) -> bool:
        return any(has_span_pattern(index.path) for index in self.indexes)

    def __post_init__(self) -> None:
        self._check_indexes()
        self._check_splits()
        self._check_columns()
        if self.compression not in COMPRESSIONS:
            raise ConfigError(f"compression must be one of {COMPRESSIONS}, got {self.compression!r}")
        if not self.shard_size_mb > 0:
            raise ConfigError(f"shard_size_mb must be > 0, got {self.shard_size_mb!r}")
        if self.num_shards is not None and self.num_shards < 1:
            raise ConfigError(f"num_shards must be >= 1, got {self.num_shards!r}")
        if self.min_shards < 1:
            raise ConfigError(f"min_shards must be >= 1, got {self.min_shards!r}")
        if not 0.0 <= self.max_reject_fraction <= 1.0:
            raise ConfigError(f"max_reject_fraction must be within [0, 1], got {self.max_reject_fraction!r}")
        if self.max_pixels < 1:
            raise ConfigError(f"max_pixels must be >= 1, got {self.max_pixels!r}")
        if self.rows_per_chunk is not None and self.rows_per_chunk < 1:
            raise ConfigError(f"rows_per_chunk must be >= 1, got {self.rows_per_chunk!r}")
        self._check_near_duplicates()
        self._check_boxes()

    def _check_boxes(self) -> None:
        if self.box_units not in BOX_UNITS:
            raise ConfigError(f"box_units must be one of {BOX_UNITS}, got {self.box_units!r}")
        if isinstance(self.max_boxes, bool) or not isinstance(self.max_boxes, int) or self.max_boxes < 1:
            raise ConfigError(f"max_boxes must be an integer >= 1, got {self.max_boxes!r}")
        if self.box_resize not in BOX_RESIZE_MODES:
            raise ConfigError(f"box_resize must be one of {BOX_RESIZE_MODES}, got {self.box_resize!r}")

    def _check_near_duplicates(self) -> None:
        if self.near_duplicates not in NEAR_DUPLICATE_MODES:
            raise ConfigError(f"near_duplicates must be one of {NEAR_DUPLICATE_MODES}, got {self.near_duplicates!r}")
        distance = self.near_duplicate_distance
        if isinstance(distance, bool) or not isinstance(distance, int) or not 0 <= distance <= MAX_NEAR_DUPLICATE_DISTANCE:
            raise ConfigError(f"near_duplicate_distance must be an integer within [0, {MAX_NEAR_DUPLICATE_DISTANCE}], "
                              f"got {distance!r}")

    def _check_indexes(self) -> None:
        if not self.indexes:
            raise ConfigError("at least one --index is required")
        named = [i.split is not None for i in self.indexes]
        if any(named) and not all(named):
            raise ConfigError("--index values must all name a split (train=a.csv) or none of them may")
        if not any(named) and len(self.indexes) > 1:
            raise ConfigError("several --index files without split names: name their splits (train=a.csv)")
        if self.uses_spans:
            self._check_spans()
            return
        if self.spans != 1 or self.span_store is not None:
            raise ConfigError("spans/span_store need index paths with {SPAN} or {YYYY}{MM}{DD}, "
                              f"got {[i.path for i in self.indexes]}")
    def _check_spans(self) -> None:
        if not all(has_span_pattern(index.path) for index in self.indexes):
            raise ConfigError(f"either every index path has a span pattern or none: {[i.path for i in self.indexes]}")
        if isinstance(self.spans, bool) or not isinstance(self.spans, int) or self.spans < 1:
            raise ConfigError(f"spans must be an integer >= 1, got {self.spans!r}")
        if not self.span_store:
            raise ConfigError("index paths with spans need span_store (--span-store DIR): the place each span's "
                              "shards are kept, so a span is encoded once and reused by later runs")

    def check_inputs(self) -> None:
        """The checks that touch files or buckets; `run()` calls this first (ConfigError naming the location)."""
        if self.uses_spans:  # the span's own run checks its concrete index files and data root
            if _contains(self.output, str(self.span_store)):
                raise ConfigError(f"span_store {self.span_store!r} must not be inside output {self.output!r}")
            return
        for index in self.indexes:
            if not _probe(storage.is_file, index.path):
                what = "is a directory, not a CSV file" if _probe(storage.is_dir, index.path) else "does not exist"
                raise ConfigError(f"index file {index.path!r} {what}")
        if not _probe(storage.is_dir, self.data_root):
            kind = "a prefix with objects below it" if uri.is_remote(self.data_root) else "a directory"
            raise ConfigError(f"data_root {self.data_root!r} is not {kind}")
        if _contains(self.output, self.data_root):
            raise ConfigError(f"output {self.output!r} would contain or replace data_root {self.data_root!r}")
        for index in self.indexes:  # per-column options naming no column: refused before any work
            is_box = _probe(box_format, index.path) is not None  # a box index's examples have one column
            self.check_column_names([IMAGE_COLUMN] if is_box else read_header(index.path))

    def _check_splits(self) -> None:
        names = [n for n, _ in self.split_weights]
        if len(set(names)) != len(names) or not names:
            raise ConfigError(f"split names must be unique and non-empty, got {names!r}")
        for name, weight in self.split_weights:
            if not _SPLIT_NAME.match(name):
                raise ConfigError(f"split name {name!r} must match {_SPLIT_NAME.pattern}")
            if weight < 1:
                raise ConfigError(f"split weight of {name!r} must be >= 1, got {weight!r}")
        if self.split_key is not None and self.hash_split is False:
            raise ConfigError("--split-key applies only to a single index without a split name")

    def _check_columns(self) -> None:
        for column, role in self.roles:
            if role not in ROLE_OVERRIDES:
                raise ConfigError(f"role of column {column!r} must be one of {ROLE_OVERRIDES}, got {role!r}")
        for column, (height, width) in self.resize:
            if height < 1 or width < 1:
                raise ConfigError(f"resize of {column!r} must be positive HxW, got {height}x{width}")
        for column, mode in self.channels:
            if mode not in CHANNEL_MODES:
                raise ConfigError(f"channels of {column!r} must be one of {CHANNEL_MODES}, got {mode!r}")
        for column, storage in self.storage:
            if storage not in STORAGES:
                raise ConfigError(f"storage of {column!r} must be one of {STORAGES}, got {storage!r}")

    def check_column_names(self, header: list[str]) -> None:
        """Every per-column option names a column of the index header ("*": every image column)."""
        for option, table, every in (("--role", self.roles, ()), ("--resize", self.resize, ("*",)),
                                     ("--channels", self.channels, ("*",)), ("--storage", self.storage, ("*",))):
            unknown = sorted({column for column, _ in table} - set(header) - set(every))
            if unknown:
                raise ConfigError(f"{option} names columns {unknown} that the index header {header} lacks")

    @property
    def hash_split(self) -> bool:
        """True when one unnamed index is split by hashing rows."""
        return self.indexes[0].split is None

    @property
    def split_names(self) -> tuple[str, ...]:
        if self.hash_split:
            return tuple(n for n, _ in self.split_weights)
        return tuple(dict.fromkeys(i.split for i in self.indexes))  # type: ignore[misc]

    def per_column(self, table: tuple[tuple[str, object], ...], column: str, default: object) -> object:
        """The value set for `column`, else for "*", else `default`."""
        values = dict(table)
        return values.get(column, values.get("*", default))


def _contains(outer: str, inner: str) -> bool:
    """True when `inner` is `outer` or lies below it (local paths compared after resolving symlinks)."""
    if uri.is_remote(outer) or uri.is_remote(inner):
        outer, inner = outer.rstrip("/"), inner.rstrip("/")
        return inner == outer or inner.startswith(outer + "/")
    real_outer, real_inner = Path(uri.local_path(outer)).resolve(), Path(uri.local_path(inner)).resolve()
    return real_inner == real_outer or real_inner.is_relative_to(real_outer)


def _probe(check: Callable[[str], bool], location: str) -> bool:
    """`check(location)`; a store that refuses (no such bucket, no access) is a ConfigError, not a traceback."""
    try:
        return check(location)
    except Exception as err:  # noqa: BLE001  (object-store clients raise their own error types)
        raise ConfigError(f"cannot read {location!r}: {type(err).__name__}: {err}") from None
