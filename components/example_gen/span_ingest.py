"""Incremental ingestion over a window of spans: each span is encoded once, the window is a union manifest.

A span's output lives in the span store under a key made of the span, the SHA-256 of its index
files' bytes and ExampleGen's options: rerunning with the same span, data and options finds the
complete output there (its manifest exists) and reuses it; changed data or options get a new key.
The window's output directory holds only a union manifest whose shard paths point into the store
(absolute paths or URIs), so Transform, Trainer and Evaluator read all spans' shards with no copying.
Patterns, data roots, the store and the output may each be local or s3:// / gs://.

    manifest = run_spans(config)   # config.indexes hold {SPAN}; config.spans, config.span_store set
    manifest.extra["spans"]        # [{"span": "1", "dir": ..., "reused": True, ...}, ...]

Statistics and schema stay per span: data validation checks the newest span (`newest_span.dir`).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from typing import Callable

from ..core import storage, uri
from ..core.errors import ConfigError
from ..core.example_rows import PROVENANCE_KEY
from ..core.manifest import MANIFEST_NAME, Manifest, ShardInfo, SplitInfo, read_manifest
from .config import ExampleGenConfig
from .report import options_json
from .spans import Span, resolve_spans


def span_digest(span: Span, config: ExampleGenConfig) -> str:
    """What decides whether a stored span can be reused: its index bytes and the ingest options."""
    digest = hashlib.sha256()
    options = {k: v for k, v in options_json(config).items()
               if k not in ("data_root", "output", "beam_args", "progress_seconds", "spans", "span_store")}
    digest.update(json.dumps(options, sort_keys=True, default=str).encode())
    for index in span.indexes:
        digest.update(f"{index.split}={uri.basename(index.path)}".encode())
        digest.update(storage.read_bytes(index.path))
    return digest.hexdigest()


def _absolute(location: str) -> str:
    """A local path made absolute (symlinks resolved), a URI as it is."""
    return location if uri.is_remote(location) else os.path.realpath(uri.local_path(location))


def run_spans(config: ExampleGenConfig, ingest: Callable[[ExampleGenConfig, Callable], Manifest],
              echo: Callable[[str], None] = print) -> Manifest:
    """Ingests the window's missing spans with `ingest` (ExampleGen's run), then writes the union manifest."""
    started = time.time()
    store = _absolute(str(config.span_store))
    window = resolve_spans(config.indexes, config.data_root, config.spans)
    entries = []
    for span in window:
        target = storage.join(store, f"span-{span.key}-{span_digest(span, config)[:16]}")
        reused = storage.is_file(storage.join(target, MANIFEST_NAME))
        if reused:
            echo(f"example-gen: span {span.key} already ingested with these options: reusing {target}")
        else:
            echo(f"example-gen: span {span.key}: ingesting into {target}")
            ingest(dataclasses.replace(config, indexes=span.indexes, data_root=span.data_root, output=target,
                                       spans=1, span_store=None), echo)
        entries.append({"span": span.key, "dir": target, "reused": reused})
    manifest = union_manifest([read_manifest(e["dir"]) for e in entries], entries)
    manifest.extra["seconds"] = round(time.time() - started, 3)
    storage.write_json(storage.join(config.output, MANIFEST_NAME), manifest.to_json())
    counts = {s: i.num_examples for s, i in manifest.splits.items()}
    echo(f"example-gen: window of spans {[e['span'] for e in entries]} "
         f"({sum(e['reused'] for e in entries)} reused): {counts}")
    return manifest


def union_manifest(manifests: list[Manifest], entries: list[dict]) -> Manifest:
    """One manifest over all spans; their features, splits and compression must agree."""
    first = manifests[0]
    for manifest, entry in zip(manifests[1:], entries[1:]):
        if manifest.features != first.features or manifest.compression != first.compression:
            raise ConfigError(f"span {entry['span']} has features {sorted(manifest.features)} / compression "
                              f"{manifest.compression!r}, span {entries[0]['span']} has {sorted(first.features)} / "
                              f"{first.compression!r}: spans of one window must have the same columns and options")
    splits = {}
    for name in first.splits:
        shards, counts = [], {}
        for manifest, entry in zip(manifests, entries):
            info = manifest.splits.get(name)
            if info is None:
                raise ConfigError(f"span {entry['span']} has no split {name!r} (has {sorted(manifest.splits)})")
            shards += [ShardInfo(storage.join(entry["dir"], s.path), s.num_examples, s.bytes) for s in info.shards]
            for label, values in info.label_counts.items():
                merged = counts.setdefault(label, {})
                for value, count in values.items():
                    merged[value] = merged.get(value, 0) + count
        splits[name] = SplitInfo(sum(s.num_examples for s in shards), shards, counts)
    for manifest, entry in zip(manifests, entries):
        entry["examples"] = {s: i.num_examples for s, i in manifest.splits.items()}
    extra = {k: v for k, v in manifests[-1].extra.items()
             if k not in ("statistics", "schema", "rejects_file", "seconds", PROVENANCE_KEY)}
    provenance = _union_provenance(manifests, entries, list(splits))
    if provenance is not None:
        extra[PROVENANCE_KEY] = provenance
    near = extra.get("near_duplicates") or {}
    if near.get("file"):  # the newest span's pair list stays in its own directory: name it in full
        extra["near_duplicates"] = {**near, "file": storage.join(entries[-1]["dir"], near["file"])}
    extra.update({"spans": entries, "newest_span": entries[-1],
                  "rows": sum(m.extra.get("rows", 0) for m in manifests),
                  "accepted": sum(m.extra.get("accepted", 0) for m in manifests),
                  "rejected": sum(m.extra.get("rejected", 0) for m in manifests)})
    return Manifest(features=dict(first.features), splits=splits, compression=first.compression, extra=extra)


def _union_provenance(manifests: list[Manifest], entries: list[dict], splits: list[str]) -> dict | None:
    """Each split's provenance pieces, span after span as the shards are, named by absolute location
    (each piece names its own span's index files); None when a span predates provenance."""
    if any(PROVENANCE_KEY not in m.extra for m in manifests):
        return None
    union: dict[str, list[dict]] = {split: [] for split in splits}
    for manifest, entry in zip(manifests, entries):
        for split in splits:
            for piece in manifest.extra[PROVENANCE_KEY].get(split, []):
                file = piece["file"]
                absolute = file if uri.is_remote(file) or os.path.isabs(file) else storage.join(entry["dir"], file)
                union[split].append({**piece, "file": absolute})
    return union
