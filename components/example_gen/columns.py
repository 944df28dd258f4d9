"""Column roles and types, detected from a sample of rows and overridable per column.

A column whose cells name image files (.png/.jpg/.jpeg) is an image column, or a mask column when
its name says so (mask, msk, seg). Other columns are typed int, float or string from their cells;
one of them is the label (named y/label/class/target, or the only non-file column), the rest are
metadata carried into every example for slicing. A column whose cells name files with another
extension (or none) is an image column when the files are PNG or JPEG, else an error naming it.

Integer cells are plain decimal integers (`-12`, not `1_000` or `١٢`); float cells are decimals
with an optional exponent, or nan/inf.

>>> guess_value_dtype(["1", "2"]), guess_value_dtype(["1", "2.5"]), guess_value_dtype(["a"])
('int64', 'float32', 'string')
>>> guess_value_dtype(["1_000", "2_000"]), parse_value("-7", "int64")
('string', -7)
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from ..core.box_schema import BOX_FEATURES, BOX_ROLE
from ..core.manifest import FeatureSpec
from .box_index import IMAGE_COLUMN, box_format
from .cell_values import IMAGE_EXTENSIONS, LABEL_NAMES, parse_value  # noqa: F401  (re-exported)
from .config import ConfigError, ExampleGenConfig
from .csv_index import read_head
from .data_root import BadCell, DataRoot, RemoteDataRoot, open_data_root
from .images import ImageRules, decode, sniff_format
from .spans import resolve_spans

_MASK_NAME = re.compile(r"(mask|msk|seg)", re.IGNORECASE)
# Formats named in the error for a column of files shardflow cannot decode.
_OTHER_FORMATS = ((b"II*\x00", "TIFF"), (b"MM\x00*", "TIFF"), (b"GIF8", "GIF"), (b"BM", "BMP"),
                  (b"RIFF", "RIFF (WebP?)"), (b"%PDF", "PDF"), (b"\x00\x00\x00", "ISO media (HEIC/AVIF?)"))
FILE_PROBES = 3  # cells of a value column tried as files under the data root
SAMPLE_ROWS = 50  # rows whose cells decide each column's role and type


@dataclass(frozen=True)
class ColumnSpec:
    """How one CSV column becomes one feature."""

    name: str
    position: int
    role: str  # image | mask | label | metadata
    dtype: str  # uint8 | uint16 for files; int64 | float32 | string for values
    shape: tuple[int, ...] = ()  # (H, W, C) for files
    storage: str = "value"  # raw | png | jpeg for files
    rules: ImageRules | None = None

    @property
    def is_file(self) -> bool:
        return self.role in ("image", "mask")

    def feature_spec(self) -> FeatureSpec:
        return FeatureSpec(self.name, self.dtype, list(self.shape), self.storage, self.role)


def guess_value_dtype(cells: list[str]) -> str:
    """The narrowest type that at least 90 % of the sampled cells parse as.

    A majority rule, so that one bad value among the sampled rows is rejected as a bad value
    instead of turning the whole column into strings.
    """
    values = [c for c in cells if c]
    if not values:
        return "string"
    for dtype in ("int64", "float32"):
        parsed = 0
        for value in values:
            try:
                parse_value(value, dtype)
                parsed += 1
            except ValueError:
                pass
        if parsed * 10 >= len(values) * 9:
            return dtype
    return "string"


def _looks_like_files(cells: list[str]) -> bool:
    values = [c for c in cells if c]
    hits = sum(c.lower().endswith(IMAGE_EXTENSIONS) for c in values)
    return bool(values) and hits * 2 >= len(values)


def _format_name(data: bytes, cell: str) -> str:
    for magic, name in _OTHER_FORMATS:
        if data.startswith(magic):
            return name
    base = cell.rpartition("/")[2]
    return f"extension .{base.rpartition('.')[2]}" if "." in base else "format not recognised"


def _names_images(name: str, cells: list[str], root: DataRoot | RemoteDataRoot) -> bool:
    """Whether a column without image extensions names PNG/JPEG files under the data root (sniffed).

    Files of another format are a ConfigError naming the column and the format: left as strings,
    the column would silently become metadata."""
    probed = list(dict.fromkeys(c for c in cells if c))[:FILE_PROBES]
    files = []
    for cell in probed:
        try:
            files.append((cell, root.read(cell)))
        except BadCell:
            continue
    if not files or len(files) * 2 < len(probed):
        return False
    unreadable = []
    for cell, data in files:
        try:
            sniff_format(data)
        except BadCell:
            unreadable.append((cell, _format_name(data, cell)))
    if len(unreadable) * 2 < len(files):
        return True
    cell, form = unreadable[0]
    raise ConfigError(f"column {name!r} names files that are not PNG or JPEG ({form}, e.g. {cell!r}): convert "
                      f"them to PNG or JPEG, or pass --role {name}=metadata to keep the paths as strings")


def _base_roles(header: list[str], samples: list[list[str]], overrides: dict[str, str],
                root: DataRoot | RemoteDataRoot) -> dict[str, str]:
    roles: dict[str, str] = {}
    for position, name in enumerate(header):
        cells = [row[position] for row in samples]
        if name in overrides:
            roles[name] = overrides[name]
        elif _looks_like_files(cells) or _names_images(name, cells, root):
            roles[name] = "mask" if _MASK_NAME.search(name) else "image"
        else:
            roles[name] = "value"
    values = [n for n, r in roles.items() if r == "value"]
    named = [n for n in values if n.lower() in LABEL_NAMES]
    has_label = "label" in roles.values()
    # "The only non-file column" counts columns set to metadata by --role: demoting y must not
    # promote another column to label.
    non_file = [n for n, r in roles.items() if r not in ("image", "mask")]
    for name in values:
        is_label = not has_label and (name in named[:1] or (not named and len(non_file) == 1))
        roles[name] = "label" if is_label else "metadata"
    return roles


def _probe_shape(name: str, cells: list[str], root: DataRoot | RemoteDataRoot,
                 rules: ImageRules) -> tuple[str, tuple[int, ...]]:
    """The most common dtype and HxWxC among the column's sampled files that decode.

    The majority, not the first file: one odd file early in the index must not make every
    other row a reject."""
    found: Counter[tuple[str, tuple[int, ...]]] = Counter()
    reasons = []
    for cell in cells:
        try:
            pixels = decode(root.read(cell), rules)
            found[(str(pixels.dtype), tuple(int(d) for d in pixels.shape))] += 1
        except BadCell as err:
            reasons.append(err.reason)
    if not found:
        raise ConfigError(f"column {name!r}: none of the {len(cells)} sampled files could be read ({reasons[:3]})")
    return found.most_common(1)[0][0]


def detect_roles(header: list[str], samples: list[list[str]], config: ExampleGenConfig,
                 root: DataRoot | RemoteDataRoot) -> dict[str, str]:
    """Each column's role (image | mask | label | metadata) from the header and sampled rows; decodes no image."""
    data_like = [name for name in header if name.lower().endswith(IMAGE_EXTENSIONS)]
    if data_like:  # a headerless CSV: its first data row was read as the header
        raise ConfigError(f"the index has no header row: its first row names image files ({data_like[0]!r}); "
                          f"add a header row such as image,label")
    config.check_column_names(header)
    return _base_roles(header, samples, dict(config.roles), root)


def index_roles(config: ExampleGenConfig) -> dict[str, str]:
    """The roles ExampleGen will detect, known before it runs: from the first SAMPLE_ROWS rows of the first
    index (of the newest span, with span patterns). Costs a read of the file's start, and a few file probes.
    A box index (box_ingest.py): its examples' features, the image and the eight box features (role "boxes")."""
    indexes, data_root = config.indexes, config.data_root
    if config.uses_spans:
        newest = resolve_spans(config.indexes, config.data_root, 1)[-1]
        indexes, data_root = newest.indexes, newest.data_root
    if box_format(indexes[0].path) is not None:
        return {IMAGE_COLUMN: "image", **dict.fromkeys(BOX_FEATURES, BOX_ROLE)}
    header, samples = read_head(indexes[0].path, SAMPLE_ROWS)
    return detect_roles(header, samples, config, open_data_root(data_root))


def detect_columns(header: list[str], samples: list[list[str]], config: ExampleGenConfig) -> list[ColumnSpec]:
    """The column specs of an index, from its header and sampled rows (cells as parsed)."""
    root = open_data_root(config.data_root)
    roles = detect_roles(header, samples, config, root)
    specs = []
    for position, name in enumerate(header):
        role = roles[name]
        cells = [row[position] for row in samples if row[position]]
        if role in ("image", "mask"):
            specs.append(_file_column(name, position, role, cells, root, config))
        else:
            specs.append(ColumnSpec(name, position, role, guess_value_dtype(cells)))
    return specs


def _file_column(name: str, position: int, role: str, cells: list[str], root: DataRoot | RemoteDataRoot,
                 config: ExampleGenConfig) -> ColumnSpec:
    is_mask = role == "mask"
    resize = config.per_column(config.resize, name, None)
    channels = None if is_mask else config.per_column(config.channels, name, None)
    rules = ImageRules(config.max_pixels, channels, resize, nearest=is_mask,  # type: ignore[arg-type]
                       exif_transpose=not config.keep_exif_orientation)
    storage = str(config.per_column(config.storage, name, "raw"))
    if is_mask and storage == "jpeg":
        raise ConfigError(f"column {name!r} is a mask: jpeg storage would change its class ids; use raw or png")
    dtype, shape = _probe_shape(name, cells[:20], root, rules)
    if storage == "jpeg" and (dtype != "uint8" or shape[2] not in (1, 3)):
        raise ConfigError(f"column {name!r}: jpeg storage needs uint8 with 1 or 3 channels, got {dtype} {shape}")
    return ColumnSpec(name, position, role, dtype, shape, storage, rules)
