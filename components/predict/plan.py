"""What predict reads, decided once by the driver: work units, how a worker prepares them, the row count.

A CSV index is prepared with the column specs the model was trained with: the model's
`shardflow_model.json` names its raw training examples (`raw_examples`), whose manifest holds the
features and ingest ops (see `example_gen.manifest_columns`). The rows are counted by a separate
scan of the index (`count_rows`), which the run's predictions and rejects must add up to.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any, Callable

from ..core import storage
from ..core.errors import ConfigError
from ..core.example_rows import NoProvenanceError, read_example_rows
from ..core.manifest import IncompleteOutputError, Manifest, read_manifest
from ..core.model_info import ModelInfo
from ..example_gen.columns import SAMPLE_ROWS
from ..example_gen.csv_index import count_rows, plan_chunks, read_head
from ..example_gen.data_root import open_data_root
from ..example_gen.manifest_columns import columns_from_manifest
from ..example_gen.work_estimate import estimate_work
from .config import PredictConfig
from .sources import Batching, EncodeRowsFn, RowsPlan, Shard, read_counts, read_shard

MAX_ROWS_PER_CHUNK = 1000  # one element of the Reshuffle: a few seconds of photo preparation
MIN_ROWS_PER_CHUNK = 32


@dataclass
class Inputs:
    units: list[Any]  # chunks or shards: the elements Beam spreads over workers
    prepare: Any  # a DoFn or a function: unit → (key, serialized example)
    rows: int  # counted independently of the pipeline
    sources: tuple[str, ...]  # source id → the index file or shard named in each output row
    describe: dict[str, Any]
    reject_files: list[str] = field(default_factory=list)
    counts: Callable[[], list[dict[str, Any]]] = lambda: []
    work_seconds: float = 0.0
    gil_free: float = 0.0


def rows_per_chunk(config: PredictConfig, rows: int) -> int:
    """Enough chunks for every core several times over, each small enough to spread evenly, and at
    least a batch (batches never span chunks)."""
    if config.rows_per_chunk:
        return config.rows_per_chunk
    per_core = math.ceil(rows / (4 * (os.cpu_count() or 1)))
    return max(config.batch_limit, min(MAX_ROWS_PER_CHUNK, max(MIN_ROWS_PER_CHUNK, per_core)))


def batching(config: PredictConfig) -> Batching:
    return Batching(config.batch_limit, int(config.max_batch_mb * (1 << 20)))


def training_manifest(info: ModelInfo, model: str) -> Manifest:
    """The manifest of the raw examples the model was trained on (its column specs and ingest ops)."""
    raw = info.extra.get("raw_examples")
    if not raw:
        raise ConfigError(f"model {model!r} does not record its training examples (raw_examples in its "
                          f"shardflow_model.json): predict from ExampleGen output with --examples instead")
    try:
        return read_manifest(raw)
    except IncompleteOutputError as err:
        raise ConfigError(f"model {model!r}: its training examples {raw!r} are gone or incomplete, so the "
                          f"column specs are unknown ({err})") from None


def model_columns(manifest: Manifest, info: ModelInfo, header: list[str]) -> list[str]:
    """The columns to prepare: the model's input image (every image feature when it is not recorded),
    and any metadata column of training that the index also has. Never the label or the mask."""
    images = [n for n, f in manifest.features.items() if f.role == "image"]
    wanted = info.extra.get("input")
    names = [wanted] if wanted in images else images
    return names + [n for n, f in manifest.features.items() if f.role == "metadata" and n in header]


def plan_index(config: PredictConfig, info: ModelInfo, staging: str) -> Inputs:
    index, data_root = str(config.index), str(config.data_root)
    manifest = training_manifest(info, config.model)
    rows = count_rows(index)
    header, chunks = plan_chunks(index, 0, rows_per_chunk(config, rows))
    names = model_columns(manifest, info, header)
    columns = columns_from_manifest(manifest, header, names)
    root = open_data_root(data_root)
    work = estimate_work(columns, read_head(index, SAMPLE_ROWS)[1], root, rows)
    plan = RowsPlan(tuple(columns), data_root if storage.is_remote(data_root) else os.path.realpath(data_root),
                    staging, batching(config))
    return Inputs(chunks, EncodeRowsFn(plan), rows, (index,),
                  {"index": index, "data_root": data_root, "columns": names,
                   "training_examples": info.extra.get("raw_examples")},
                  reject_files=[plan.rejects_path(c) for c in chunks],
                  counts=lambda: [read_counts(plan, c) for c in chunks],
                  work_seconds=work.seconds, gil_free=work.gil_free)


def plan_examples(config: PredictConfig) -> Inputs:
    examples, split = str(config.examples), config.split
    manifest = read_manifest(examples)
    if split not in manifest.splits:
        raise ConfigError(f"split {split!r} is not in {examples} (has {sorted(manifest.splits)})")
    info = manifest.splits[split]
    paths = manifest.shard_paths(examples, split)
    keep = None if config.folds is None else config.folds.mask(info.num_examples)
    starts = [sum(s.num_examples for s in info.shards[:i]) for i in range(len(info.shards))]
    files = _record_files(examples, manifest, split)
    shards = [Shard(i, path, manifest.compression, batching(config),
                    None if keep is None else keep[start:start + shard.num_examples],
                    None if files is None else tuple(files[start:start + shard.num_examples]))
              for i, (path, start, shard) in enumerate(zip(paths, starts, info.shards))]
    shards = [shard for shard in shards if shard.keep is None or shard.keep.any()]
    rows = int(info.num_examples if keep is None else keep.sum())
    describe = {"examples": examples, "split": split,
                **({} if config.folds is None else {"folds": config.folds.to_json()})}
    return Inputs(shards, read_shard, rows, tuple(s.path for s in info.shards), describe,
                  counts=lambda: [{"rows": rows, "rejected": {}}])


def _record_files(examples: str, manifest: Manifest, split: str) -> list[str] | None:
    """Each record's file path in reading order (ExampleGen's provenance), so a row names its image; None for
    an output that records none."""
    try:
        return list(read_example_rows(examples, manifest, split).paths)
    except NoProvenanceError:
        return None


def first_examples(inputs: Inputs) -> list[bytes]:
    """The first batch's examples of the first work unit, prepared as a worker prepares them. The
    generator is closed after that batch, before a CSV chunk's staging files would be written."""
    unit = inputs.units[0]
    prepare = inputs.prepare
    if hasattr(prepare, "setup"):  # a DoFn
        prepare.setup()
        batches = prepare.process(unit)
    else:
        batches = prepare(unit)
    try:
        return [example for _, example in next(iter(batches), [])]
    finally:
        getattr(batches, "close", lambda: None)()
