"""The column specs of an earlier ingest, rebuilt from its manifest for a new index with the same columns.

Batch prediction prepares new rows exactly as the training rows were prepared: the same file
columns with the same resize, channels, EXIF handling, storage, dtype and shape (the manifest's
`features` and `ingest_ops`, and `options.max_pixels`). Only the columns named are rebuilt, at
their positions in the new header, so a prediction index may lack the label and mask columns.

>>> from shardflow.core.manifest import FeatureSpec, Manifest
>>> m = Manifest({"x": FeatureSpec("x", "uint8", [8, 8, 1], "raw", "image")}, {}, "",
...              {"ingest_ops": {"x": {"resize": None, "resize_method": "bilinear", "channels": None,
...                                    "exif_orientation": "applied", "storage": "raw"}}})
>>> [c.position for c in columns_from_manifest(m, ["id", "x"], ["x"])]
[1]
"""
from __future__ import annotations

from ..core.errors import ConfigError
from ..core.manifest import Manifest
from .columns import ColumnSpec
from .config import DEFAULT_MAX_PIXELS
from .images import ImageRules


def _rules(manifest: Manifest, name: str, role: str) -> ImageRules:
    ops = (manifest.extra.get("ingest_ops") or {}).get(name)
    if ops is None:
        raise ConfigError(f"the training examples' manifest records no ingest ops for column {name!r}")
    resize = tuple(ops["resize"]) if ops.get("resize") else None
    max_pixels = int((manifest.extra.get("options") or {}).get("max_pixels") or DEFAULT_MAX_PIXELS)
    return ImageRules(max_pixels, ops.get("channels"), resize,  # type: ignore[arg-type]
                      nearest=role == "mask" or ops.get("resize_method") == "nearest",
                      exif_transpose=str(ops.get("exif_orientation", "applied")) == "applied",
                      letterbox=ops.get("resize_mode") == "letterbox")


def columns_from_manifest(manifest: Manifest, header: list[str], names: list[str]) -> list[ColumnSpec]:
    """ColumnSpecs of the `names` features of `manifest`, placed at their positions in `header`.

    ConfigError when the header lacks one of them or the manifest does not know it.
    """
    specs = []
    for name in names:
        if name not in manifest.features:
            raise ConfigError(f"column {name!r} is not a feature of the training examples "
                              f"(features {sorted(manifest.features)})")
        if name not in header:
            raise ConfigError(f"the index has no column {name!r}, which the model reads (header {header})")
        feature = manifest.features[name]
        position = header.index(name)
        if feature.is_file:
            specs.append(ColumnSpec(name, position, feature.role, feature.dtype, tuple(feature.shape),
                                    feature.encoding, _rules(manifest, name, feature.role)))
        else:
            specs.append(ColumnSpec(name, position, feature.role, feature.dtype))
    return specs
