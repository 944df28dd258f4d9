"""What validation reads from an ExampleGen output: per-split statistics, reconciled with the manifest.

    manifest = read_manifest("s3://bucket/runs/examples")
    stats = load_split_statistics("s3://bucket/runs/examples", manifest, baseline="train")   # train first
    stats["eval"].datasets[0].num_examples
"""
from __future__ import annotations

from tensorflow_metadata.proto.v0 import statistics_pb2

from ..core.errors import ShardflowError
from ..core import storage
from ..core.manifest import Manifest
from ..core.statistics_io import UnreadableProtoError, read_statistics

Statistics = statistics_pb2.DatasetFeatureStatisticsList


class StatisticsMismatchError(ShardflowError, ValueError):
    """A statistics file is missing, unreadable, or does not describe the split the manifest lists."""


def statistics_path(examples: str, manifest: Manifest, split: str) -> str:
    """Where ExampleGen recorded the split's statistics (manifest "statistics"), else its default place."""
    relative = manifest.extra.get("statistics", {}).get(split, f"statistics/{split}.pb")
    return storage.join(examples, *relative.split("/"))


def _load(path: str, split: str) -> Statistics:
    try:
        stats = read_statistics(path)
    except FileNotFoundError:
        raise StatisticsMismatchError(f"split {split!r}: statistics file {path} does not exist") from None
    except UnreadableProtoError as err:
        raise StatisticsMismatchError(f"split {split!r}: {err}") from None
    if len(stats.datasets) != 1:
        raise StatisticsMismatchError(f"split {split!r}: {path} holds {len(stats.datasets)} datasets, expected 1")
    return stats


def load_split_statistics(examples: str, manifest: Manifest, baseline: str) -> dict[str, Statistics]:
    """Every split's statistics, baseline first; each must count the examples the manifest counts."""
    order = [baseline] + [s for s in manifest.splits if s != baseline]
    loaded = {}
    for split in order:
        path = statistics_path(examples, manifest, split)
        stats = _load(path, split)
        counted, listed = stats.datasets[0].num_examples, manifest.splits[split].num_examples
        if counted != listed:
            raise StatisticsMismatchError(
                f"split {split!r}: {path} counts {counted} examples, the manifest lists {listed}: "
                "the statistics are not those of these examples")
        loaded[split] = stats
    return loaded
