"""What Transform records beside the shards: per-split totals, vocabularies, unseen labels, the summary.

    splits = split_infos(source, result["shards"], result["batches"])
    vocabularies = vocabulary_info(out.staged("transform_graph"), ["label"])   # a path or URI
    unseen = unseen_labels(splits, vocabularies)        # {"eval": {"label": 3}}
"""
from __future__ import annotations

from collections import Counter
from typing import Any

import tensorflow_transform as tft

from ..core.errors import ShardflowError
from ..core import storage
from ..core.config_record import recorded_options
from ..core.manifest import Manifest, ShardInfo, SplitInfo
from .config import TransformConfig
from .materialize import BatchResult
from .output_features import int_domains
from .preprocessing import NUM_OOV_BUCKETS, vocabulary_name


class UnseenLabelsError(ShardflowError, RuntimeError):
    """Labels absent from the analyze split's vocabulary, with `unseen_labels="fail"`; no manifest written."""


def split_infos(source: Manifest, splits: tuple[str, ...], shards: list[tuple[str, ShardInfo]],
                batches: list[BatchResult]) -> dict[str, SplitInfo]:
    """Shards and label counts per split; every input example must come out exactly once."""
    infos = {}
    for split in splits:
        split_shards = sorted((s for name, s in shards if name == split), key=lambda s: s.path)
        written = sum(s.num_examples for s in split_shards)
        expected = source.splits[split].num_examples
        parts = sum(b.part.num_records for b in batches if b.split == split)
        if not written == parts == expected:
            raise RuntimeError(f"split {split}: {expected} input examples, {parts} transformed, {written} in shards")
        labels: dict[str, Counter] = {}
        for batch in batches:
            if batch.split == split:
                for name, counts in batch.label_counts.items():
                    labels.setdefault(name, Counter()).update(counts)
        infos[split] = SplitInfo(expected, split_shards, {n: dict(sorted(c.items())) for n, c in labels.items()})
    return infos


def vocabulary_info(graph_dir: str, labels: list[str]) -> dict[str, dict[str, Any]]:
    """For each vocabulary-mapped label: the asset file (relative to the output), size and OOV id."""
    output = tft.TFTransformOutput(graph_dir)
    info = {}
    for label in labels:
        name = vocabulary_name(label)
        size = int(output.vocabulary_size_by_name(name))
        asset = storage.relative_to(output.vocabulary_file_by_name(name), graph_dir)
        info[label] = {"file": f"{storage.basename(graph_dir)}/{asset}", "size": size,
                       "num_oov_buckets": NUM_OOV_BUCKETS, "oov_id": size, "num_classes": size + NUM_OOV_BUCKETS}
    return info


def mask_classes(graph_dir: str, masks: list[str]) -> dict[str, int]:
    """The number of classes of each mask, from its int domain in the transformed schema."""
    domains = int_domains(tft.TFTransformOutput(graph_dir).transformed_metadata.schema)
    return {name: domains[name][1] + 1 for name in masks if name in domains}


def unseen_labels(splits: dict[str, SplitInfo], vocabularies: dict[str, dict[str, Any]]) -> dict[str, dict[str, int]]:
    """{split: {label: examples whose label got the OOV id}}, only where there are some."""
    unseen: dict[str, dict[str, int]] = {}
    for split, info in splits.items():
        for label, vocab in vocabularies.items():
            count = info.label_counts.get(label, {}).get(str(vocab["oov_id"]), 0)
            if count:
                unseen.setdefault(split, {})[label] = count
    return unseen


def unseen_message(unseen: dict[str, dict[str, int]], analyze_split: str) -> str:
    where = "; ".join(f"split {s}: " + ", ".join(f"{n} examples of {label!r}" for label, n in c.items())
                      for s, c in sorted(unseen.items()))
    return f"labels not in the vocabulary of split {analyze_split!r}: {where}"


def options_json(config: TransformConfig) -> dict[str, Any]:
    """The run's options for the manifest: no credentials (Beam's secret flags are redacted)."""
    return recorded_options(config)


# Transformed output larger than this many times ExampleGen's is called out in the report.
SIZE_WARNING_RATIO = 1.5


def output_size(source: Manifest, splits: dict[str, SplitInfo]) -> dict[str, float]:
    """Bytes of the transformed shards against ExampleGen's shards of the same splits."""
    written = sum(s.bytes for split in splits.values() for s in split.shards)
    read = sum(s.bytes for name in splits for s in source.splits[name].shards)
    return {"bytes": written, "input_bytes": read, "ratio": round(written / read, 3) if read else 0.0}


def size_line(manifest: Manifest) -> str | None:
    """A warning when the output grew far beyond its input (float pixels a preprocessing_fn returned)."""
    size = manifest.extra.get("size") or {}
    if size.get("ratio", 0) <= SIZE_WARNING_RATIO:
        return None
    floats = sorted(n for n, f in manifest.features.items() if f.dtype == "float32" and f.shape)
    return (f"WARNING: the output is {size['ratio']:.1f}x ExampleGen's bytes ({size['bytes'] / 1e6:,.0f} MB "
            f"against {size['input_bytes'] / 1e6:,.0f} MB): float32 arrays {floats} are stored per pixel; "
            "return them from the graph only where the Trainer needs them materialized")


def summary_text(manifest: Manifest, elapsed: float) -> str:
    extra = manifest.extra
    lines = []
    total_examples = total_bytes = 0
    for name, split in manifest.splits.items():
        size = sum(s.bytes for s in split.shards)
        total_examples, total_bytes = total_examples + split.num_examples, total_bytes + size
        lines.append(f"split {name}: {split.num_examples:,} examples in {len(split.shards)} shards, {size / 1e6:.1f} MB")
    for label, vocab in extra["vocabularies"].items():
        lines.append(f"vocabulary of {label!r}: {vocab['size']} values (OOV id {vocab['oov_id']}), {vocab['file']}")
    if extra["unseen_labels"]:
        lines.append("WARNING: " + unseen_message(extra["unseen_labels"], extra["analyze_split"]) + " (OOV id)")
    for mask, classes in extra["mask_classes"].items():
        lines.append(f"mask {mask!r}: {classes} classes")
    if extra.get("applied_at_read"):
        lines.append(f"kept as stored bytes, transformed where read: {extra['applied_at_read']}")
    warning = size_line(manifest)
    if warning:
        lines.append(warning)
    rate = total_examples / elapsed if elapsed > 0 else 0.0
    lines.append(f"{total_bytes / 1e6:.1f} MB written in {elapsed:.1f} s ({rate:,.0f} examples/s), "
                 f"runner {extra['runner']}")
    return "\n".join(lines)
