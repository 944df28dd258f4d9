"""The manifest: what a component's output directory holds. Its presence means the output is complete.

Written last and atomically by ExampleGen (and later Transform); every reader starts here.

>>> spec = FeatureSpec(name="label", dtype="int64", shape=[], encoding="value", role="label")
>>> FeatureSpec.from_json(spec.to_json()) == spec
True
"""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .errors import ShardflowError
from . import storage

MANIFEST_NAME = "manifest.json"


class IncompleteOutputError(ShardflowError, FileNotFoundError):
    """The directory has no manifest: the run that wrote it did not finish."""


class ShardMismatchError(ShardflowError, ValueError):
    """The shard files differ from what the manifest records: resized, unlisted, or counts that disagree."""


class MissingShardError(ShardMismatchError, FileNotFoundError):
    """A shard file the manifest lists is not there."""


@dataclass(frozen=True)
class FeatureSpec:
    """One feature of the examples. Images: `shape` is [H, W, C] and `encoding` says how bytes are stored."""

    name: str
    dtype: str  # uint8 | uint16 | int64 | float32 | string
    shape: list[int]
    encoding: str  # raw | png | jpeg | value
    role: str  # image | mask | label | metadata

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> "FeatureSpec":
        return cls(**{k: obj[k] for k in ("name", "dtype", "shape", "encoding", "role")})

    @property
    def is_file(self) -> bool:
        return self.role in ("image", "mask")


@dataclass(frozen=True)
class ShardInfo:
    path: str  # relative to the output directory
    num_examples: int
    bytes: int


@dataclass(frozen=True)
class SplitInfo:
    num_examples: int
    shards: list[ShardInfo]
    label_counts: dict[str, dict[str, int]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "num_examples": self.num_examples,
            "shards": [asdict(s) for s in self.shards],
            "label_counts": self.label_counts,
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> "SplitInfo":
        shards = [ShardInfo(**s) for s in obj["shards"]]
        return cls(obj["num_examples"], shards, obj.get("label_counts", {}))


@dataclass(frozen=True)
class Manifest:
    """What a reader needs (features, shards, compression) plus the provenance of the run."""

    features: dict[str, FeatureSpec]
    splits: dict[str, SplitInfo]
    compression: str  # "" or "GZIP"
    extra: dict[str, Any] = field(default_factory=dict)  # rejected, inputs, options, version, ...

    def shard_paths(self, root: str | Path, split: str) -> list[str]:
        """Shard locations: relative entries below `root` (a local path or a URI), absolute ones as they are.

        A span window's union manifest lists the spans' shards by absolute path or URI.

        >>> m = Manifest({}, {"t": SplitInfo(2, [ShardInfo("Split-t/a", 1, 9), ShardInfo("s3://b/span/x", 1, 9)])}, "")
        >>> m.shard_paths("s3://b/out", "t")
        ['s3://b/out/Split-t/a', 's3://b/span/x']
        """
        if split not in self.splits:
            raise KeyError(f"split {split!r} not in manifest (has {sorted(self.splits)})")
        return [s.path if storage.is_remote(s.path) or os.path.isabs(s.path) else storage.join(root, *s.path.split("/"))
                for s in self.splits[split].shards]

    def to_json(self) -> dict[str, Any]:
        return {
            **self.extra,
            "features": {n: f.to_json() for n, f in self.features.items()},
            "splits": {n: s.to_json() for n, s in self.splits.items()},
            "compression": self.compression,
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> "Manifest":
        rest = {k: v for k, v in obj.items() if k not in ("features", "splits", "compression")}
        features = {n: FeatureSpec.from_json(f) for n, f in obj["features"].items()}
        splits = {n: SplitInfo.from_json(s) for n, s in obj["splits"].items()}
        return cls(features, splits, obj.get("compression", ""), rest)


def read_manifest(output_dir: str | Path) -> Manifest:
    try:
        return Manifest.from_json(storage.read_json(storage.join(output_dir, MANIFEST_NAME)))
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        raise IncompleteOutputError(
            f"{output_dir} has no {MANIFEST_NAME}: it is not a complete shardflow output "
            "(the run that wrote it failed or is still running)"
        ) from None
