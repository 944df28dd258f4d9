"""The manifest's provenance fields and the human summary printed at the end of a run."""
from __future__ import annotations

from typing import Any

from ..core import storage
from ..core.box_schema import BOXES_KEY
from ..core.config_record import recorded_options
from ..core.letterbox import PAD
from ..core.hashing import sha256_of  # noqa: F401  (re-exported)
from ..core.manifest import Manifest
from .columns import ColumnSpec
from .config import ExampleGenConfig
from .near_duplicates import describe_pair


def options_json(config: ExampleGenConfig) -> dict[str, Any]:
    """The run's options for the manifest: no credentials (Beam's secret flags are redacted)."""
    return recorded_options(config, leave_out=("indexes",))


def ingest_ops(columns: list[ColumnSpec]) -> dict[str, dict[str, Any]]:
    """What was applied once at ingest, per file column (the Trainer records train-time ops apart)."""
    ops = {}
    for column in columns:
        if column.rules is not None:
            ops[column.name] = {
                "resize": list(column.rules.resize) if column.rules.resize else None,
                "resize_method": "nearest" if column.rules.nearest else "bilinear",
                # letterbox: aspect kept, centred, padded with `pad` (core/letterbox.py); what serving_image repeats
                "resize_mode": "letterbox" if column.rules.letterbox else "stretch",
                **({"pad": PAD} if column.rules.letterbox else {}),
                "channels": column.rules.channels,
                "exif_orientation": "applied" if column.rules.exif_transpose else "ignored (pixels as stored)",
                "storage": column.storage,
            }
    return ops


def summary_text(manifest: Manifest, elapsed: float, root: str = "") -> str:
    """The summary printed at the end of a run; `root`: the output, for the full paths of its lists."""
    extra = manifest.extra
    lines = [
        f"rows read: {extra['rows']:,}  accepted: {extra['accepted']:,}  rejected: {extra['rejected']:,}",
    ]
    for code, count in sorted(extra["rejected_by_reason"].items()):
        lines.append(f"  rejected {code}: {count:,}")
    if extra["rejected"]:
        lines.append(f"  details: {extra['rejects_file']}")
    total_bytes = 0
    for name, split in manifest.splits.items():
        size = sum(s.bytes for s in split.shards)
        total_bytes += size
        lines.append(f"split {name}: {split.num_examples:,} examples in {len(split.shards)} shards, {size / 1e6:.1f} MB")
    lines += box_lines(extra.get(BOXES_KEY))
    leakage = extra["leakage"]
    if leakage["count"]:
        lines.append(f"LEAKAGE: {leakage['count']} file contents appear in more than one split, e.g.:")
        for example in leakage["examples"]:
            where = ", ".join(f"{o['split']} row {o['row']} of {o['index']} ({o.get('path')})" for o in example["occurrences"])
            lines.append(f"  {where}")
    lines += near_duplicate_lines(extra.get("near_duplicates") or {}, root)
    rate = extra["rows"] / elapsed if elapsed > 0 else 0.0
    lines.append(f"{total_bytes / 1e6:.1f} MB written in {elapsed:.1f} s ({rate:,.0f} records/s), runner {extra['runner']}")
    return "\n".join(lines)


def box_lines(boxes: dict[str, Any] | None) -> list[str]:
    """A box index's lines of the summary: its classes, and each split's boxes and images without any."""
    if not boxes:
        return []
    lines = [f"boxes: {len(boxes['label_map'])} classes, {boxes['format']} index, {boxes['units']} units"]
    for split, figures in sorted(boxes["figures"].items()):
        empty = figures["boxes_per_image"].get("0", 0)
        lines.append(f"  split {split}: {figures['boxes']:,} boxes on {figures['images']:,} images "
                     f"({empty:,} without objects)")
    return lines


def near_duplicate_lines(report: dict[str, Any], root: str = "") -> list[str]:
    """The near-duplicate check's lines of the summary: pairs across splits with examples and the file
    listing them all, counts within."""
    if report.get("mode", "off") == "off":
        return []
    lines = []
    if report["count"]:
        more = " (the search stopped there: at least this many)" if report.get("truncated") else ""
        pairs = "pair" if report["count"] == 1 else "pairs"
        lines.append(f"NEAR-DUPLICATES: {report['count']} image {pairs} in different splits are altered copies "
                     f"(perceptual hashes within {report['distance']} bits){more}, e.g.:")
        lines += [f"  {describe_pair(example)}" for example in report["examples"]]
        if report.get("file"):  # absent from manifests written before the list existed
            lines.append(f"  every pair, by row: {storage.join(root, report['file']) if root else report['file']}")
    within = {split: count for split, count in report["within_split"].items() if count}
    if within:
        lines.append("near-duplicate pairs within a split: " + ", ".join(f"{s} {c}" for s, c in sorted(within.items())))
    low = report.get("low_detail") or {}  # absent from manifests written before small images were set aside
    if low.get("set_aside_across_splits"):
        lines.append(f"near-duplicates: {low['set_aside_across_splits']} look-alike pairs across splits not counted: "
                     f"images under 32 px a side count as copies only within {low['bits']} bits (their hashes cannot "
                     "tell a copy from a look-alike further apart; docs/near-duplicates.md)")
    return lines
