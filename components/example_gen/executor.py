"""ExampleGen's `run(config)`: CSV indexes of files → shards, statistics, schema, rejects, manifest.

>>> from shardflow.example_gen import ExampleGenConfig, IndexSpec, run   # doctest: +SKIP
>>> manifest = run(ExampleGenConfig(indexes=(IndexSpec("d/train.csv", "train"),),
...                                 data_root="d", output="out"))       # doctest: +SKIP
"""
from __future__ import annotations

import contextlib
import os
import pickle
import shutil
import time
from collections import Counter
from typing import Any, Callable

from ..core.errors import ShardflowError
from .. import __version__
from ..core import storage
from ..core.beam_options import local_pool_workers
from ..core.example_rows import PROVENANCE_DIR, PROVENANCE_KEY
from ..core.manifest import Manifest, ShardInfo, SplitInfo
from ..core.shard_writer import ShardSizing
from ..core.output_dir import OutputDir
from ..core.box_schema import BOXES_KEY
from .box_features import BoxFigures
from .box_ingest import BoxSource, read_boxes
from .columns import ColumnSpec
from .config import REJECTS_FILE, ConfigError, ExampleGenConfig, IndexSpec  # noqa: F401  (IndexSpec: doctest)
from .csv_index import Chunk
from .encode_chunks import ChunkResult, IngestPlan
from .leakage import find_leaks, locate_rows
from .local_pool import describe_pool, run_on_pool
from .near_duplicates import PAIRS_FILE, near_duplicates_report
from .provenance import write_provenance
from .statistics_process import StatisticsProcess
from ..core.progress import ProgressReporter
from .report import ingest_ops, options_json, sha256_of, summary_text
from ..core.statistics_io import write_schema
from .index_plan import plan_boxes, plan_table
from .work_estimate import WorkEstimate

OWNED = ("Split-*", "statistics", PROVENANCE_DIR)  # schema.pbtxt is rewritten by every run
# Written in place before the manifest, read without one when the run fails (too many rejects, or
# --near-duplicates fail): removed when a run starts, so what a failed run leaves is its own.
UNSTAGED = (REJECTS_FILE, PAIRS_FILE)


class TooManyRejectsError(ShardflowError, RuntimeError):
    """More rows were rejected than `max_reject_fraction` allows; no manifest was written."""


def _ingest_plan(config: ExampleGenConfig, header: list[str], columns: list[ColumnSpec], out: OutputDir,
                 boxes: BoxSource | None = None) -> IngestPlan:
    if config.split_key is not None:
        if config.split_key not in header:
            raise ConfigError(f"--split-key {config.split_key!r} is not a column of the index ({header})")
        key_positions: tuple[int, ...] = (header.index(config.split_key),)
    else:
        key_positions = tuple(c.position for c in columns if c.is_file) or tuple(range(len(header)))
    return IngestPlan(
        columns=tuple(columns),
        data_root=config.data_root if storage.is_remote(config.data_root) else os.path.realpath(config.data_root),
        staging_dir=out.staging,
        publish_root=out.publish_root,
        index_splits=tuple(i.split for i in config.indexes),
        split_weights=config.split_weights,
        split_key_positions=key_positions,
        perceptual_hashes=config.near_duplicates != "off",
        labels=tuple(boxes.labels.items()) if boxes is not None else (),
    )


def _execute(config: ExampleGenConfig, chunks: list[Chunk], plan: IngestPlan, work: WorkEstimate,
             echo: Callable[[str], None]) -> tuple[dict[str, Any], str]:
    """Encodes the chunks and writes the shards on the local pool, or on Beam when the flags name a runner or mode."""
    total_rows = sum(c.num_rows for c in chunks)
    sizing = ShardSizing(compression=config.compression, shard_size_mb=config.shard_size_mb,
                         num_shards=config.num_shards, min_shards=config.min_shards)
    workers = local_pool_workers(config.beam_args, os.cpu_count() or 1)
    if workers is not None:
        runner = describe_pool(workers)
        echo(_first_line(total_rows, chunks, work, runner))
        with contextlib.ExitStack() as threads:
            def started() -> None:  # the thread starts once the workers are forked
                threads.enter_context(ProgressReporter(storage.join(plan.staging_dir, "done"), total_rows,
                                                       config.progress_seconds, echo))

            return run_on_pool(chunks, plan, sizing, workers, on_started=started), runner
    return _execute_on_beam(config, chunks, plan, work, sizing, echo)


def _first_line(total_rows: int, chunks: list[Chunk], work: WorkEstimate, runner: str) -> str:
    return (f"example-gen: {total_rows:,} rows in {len(chunks)} chunks (~{work.seconds:,.0f} s of single-core work) "
            f"on {runner}")


def _execute_on_beam(config: ExampleGenConfig, chunks: list[Chunk], plan: IngestPlan, work: WorkEstimate,
                     sizing: ShardSizing, echo: Callable[[str], None]) -> tuple[dict[str, Any], str]:
    from ..core.beam_setup import close_dask_client, describe_runner, make_pipeline, pipeline_options
    from .pipeline import RESULT_NAME, IngestChunks

    total_rows = sum(c.num_rows for c in chunks)
    options = pipeline_options(config.beam_args, work.seconds, num_chunks=len(chunks), gil_free=work.gil_free)
    echo(_first_line(total_rows, chunks, work, describe_runner(options)))
    with ProgressReporter(storage.join(plan.staging_dir, "done"), total_rows, config.progress_seconds, echo):
        with make_pipeline(options) as pipeline:
            _ = pipeline | "Ingest" >> IngestChunks(chunks, plan, sizing)
    close_dask_client(pipeline)
    return pickle.loads(storage.read_bytes(storage.join(plan.staging_dir, RESULT_NAME))), describe_runner(options)


def _merge_rejects(chunks: list[Chunk], plan: IngestPlan, root: str) -> str:
    """Concatenates the per-chunk reject files in row order into `<root>/rejects.jsonl`, whole or not at all."""
    target = storage.join(root, REJECTS_FILE)
    with storage.open_write(target) as out:
        for chunk in chunks:
            with storage.open_read(plan.rejects_path(chunk)) as source:
                shutil.copyfileobj(source, out)
    return target


def _splits(split_names: tuple[str, ...], results: list[ChunkResult],
            shards: list[tuple[str, ShardInfo]]) -> dict[str, SplitInfo]:
    splits = {}
    for split in split_names:
        split_shards = sorted((s for name, s in shards if name == split), key=lambda s: s.path)
        expected = sum(r.parts[split].num_records for r in results if split in r.parts)
        if sum(s.num_examples for s in split_shards) != expected:
            raise RuntimeError(f"split {split}: shards hold {sum(s.num_examples for s in split_shards)} records, chunks wrote {expected}")
        labels: dict[str, Counter] = {}
        for result in results:
            for column, counts in result.label_counts.get(split, {}).items():
                labels.setdefault(column, Counter()).update(counts)
        splits[split] = SplitInfo(expected, split_shards, {c: dict(sorted(v.items())) for c, v in labels.items()})
    return splits


def _leaks(plan: IngestPlan, chunks: list[Chunk], results: list[ChunkResult]) -> dict[str, Any]:
    """The leakage check over the workers' digest files, in chunk order (see leakage.find_leaks)."""
    files = [(split, c.index_id, plan.digest_file(split, c)) for c, r in zip(chunks, results) for split in sorted(r.parts)]
    return find_leaks(files)


def run(config: ExampleGenConfig, echo: Callable[[str], None] = print) -> Manifest:
    """Ingests the indexes into `config.output`; returns the manifest written last.

    With span patterns in the index paths, ingests the window's new spans into the span store and
    writes a union manifest (see span_ingest).
    """
    config.check_inputs()
    if config.uses_spans:
        from .span_ingest import run_spans

        return run_spans(config, run, echo)
    marks = {"started": time.time()}  # phase ends, for the manifest's `phase_seconds`
    with StatisticsProcess() as statistics:  # imports TFDV from now on, beside the plan and the rows
        boxes = read_boxes(config)  # None: the indexes are tables of files
        header, chunks, columns, work = plan_table(config) if boxes is None else plan_boxes(config, boxes)
        split_names = config.split_names if boxes is None else boxes.split_names
        out = output_location(config.output)
        with out.staged_run():
            plan = _ingest_plan(config, header, columns, out, boxes)
            statistics.prepare(list(split_names), tuple(columns), out.staged("statistics"),
                               "train" if "train" in split_names else split_names[0])
            marks["plan"] = time.time()
            result, runner = _execute(config, chunks, plan, work, echo)
            marks["rows_and_shards"] = time.time()
            return _finish(config, chunks, columns, plan, result, runner, marks, statistics, echo, boxes)


def output_location(root: str) -> OutputDir:
    """ExampleGen's output directory and the items it owns there."""
    return OutputDir(root, owned=OWNED, unstaged=UNSTAGED)


def _finish(config: ExampleGenConfig, chunks: list[Chunk], columns: list[ColumnSpec], plan: IngestPlan,
            result: dict[str, Any], runner: str, marks: dict[str, float], statistics: StatisticsProcess,
            echo: Callable[[str], None], boxes: BoxSource | None = None) -> Manifest:
    out = output_location(config.output)
    results: list[ChunkResult] = sorted(result["chunks"], key=lambda r: (r.index_id, r.chunk_no))
    rows, reasons = _reconciled_rows(config, chunks, plan, results, out.root)
    splits = _splits(config.split_names if boxes is None else boxes.split_names, results, result["shards"])
    column_files = {
        split: [plan.column_file(split, c) for c, r in zip(chunks, results) if split in r.parts] for split in splits
    }
    statistics.request(column_files)  # computed meanwhile (prepared before the rows)
    near_duplicates = near_duplicates_report(config, plan, chunks, results, columns, out.root)  # raises in "fail" mode
    provenance = write_provenance(list(splits), chunks, results, [i.path for i in config.indexes],
                                  out.staged(PROVENANCE_DIR))
    _publish_with_statistics(list(splits), statistics, out)
    marks["statistics"] = time.time()
    manifest = Manifest(
        features={c.name: c.feature_spec() for c in columns},
        splits=splits,
        compression=config.compression,
        extra={
            "component": "example_gen",
            "shardflow_version": __version__,
            **_row_counts(rows, reasons),
            PROVENANCE_KEY: provenance,
            "inputs": [{"path": i.path, "split": i.split, "sha256": sha256_of(i.path)} for i in config.indexes],
            "options": options_json(config),
            "ingest_ops": ingest_ops(columns),
            "leakage": locate_rows(_leaks(plan, chunks, results), chunks, columns, [i.path for i in config.indexes]),
            "near_duplicates": near_duplicates,
            "statistics": {s: f"statistics/{s}.pb" for s in splits},
            "schema": "schema.pbtxt",
            "runner": runner,
            "seconds": round(time.time() - marks["started"], 3),
            "phase_seconds": _phase_seconds(marks),
            **({BOXES_KEY: boxes.manifest_entry(_box_figures(results))} if boxes is not None else {}),
        },
    )
    out.mark_complete(manifest.to_json())
    echo(summary_text(manifest, time.time() - marks["started"], out.root))
    return manifest


def _reconciled_rows(config: ExampleGenConfig, chunks: list[Chunk], plan: IngestPlan, results: list[ChunkResult],
                     root: str) -> tuple[int, Counter]:
    """(rows read, rejects by reason) once every planned row is accounted for and the chunks' rejects are merged
    into rejects.jsonl; TooManyRejectsError above --max-reject-fraction (the rejects file is left to read)."""
    rows = sum(r.rows for r in results)
    planned = sum(c.num_rows for c in chunks)
    if rows != planned or len(results) != len(chunks):
        raise RuntimeError(f"rows do not reconcile: {rows} processed in {len(results)} chunks, "
                           f"{planned} planned in {len(chunks)}")
    reasons = sum((r.reject_codes for r in results), Counter())
    rejected = sum(reasons.values())
    rejects_file = _merge_rejects(chunks, plan, root)
    if rows and rejected / rows > config.max_reject_fraction:
        raise TooManyRejectsError(
            f"{rejected} of {rows} rows rejected ({rejected / rows:.2%}), above --max-reject-fraction "
            f"{config.max_reject_fraction:.2%}; reasons {dict(reasons)}; see {rejects_file}. No manifest written."
        )
    return rows, reasons


def _row_counts(rows: int, reasons: Counter) -> dict[str, Any]:
    """The manifest's record of the rows: read, accepted, rejected (by reason) and where the rejects are listed."""
    rejected = sum(reasons.values())
    return {"rows": rows, "accepted": rows - rejected, "rejected": rejected,
            "rejected_by_reason": dict(sorted(reasons.items())), "rejects_file": REJECTS_FILE}


def _phase_seconds(marks: dict[str, float]) -> dict[str, float]:
    """Seconds of each phase (plan, rows_and_shards, statistics, finish) from the times they ended."""
    names, times = list(marks), list(marks.values()) + [time.time()]
    return {name: round(end - start, 3) for name, start, end in zip(names[1:] + ["finish"], times, times[1:])}


def _box_figures(results: list[ChunkResult]) -> dict[str, BoxFigures]:
    """Each split's box figures, merged over the chunks."""
    figures: dict[str, BoxFigures] = {}
    for result in results:
        for split, found in result.box_figures.items():
            figures[split] = figures[split].merge(found) if split in figures else found
    return figures


def _publish_with_statistics(split_names: list[str], statistics: StatisticsProcess, out: OutputDir) -> None:
    """The requested statistics awaited, the shards and statistics published, the schema written beside them."""
    schema = statistics.schema()
    out.publish([f"Split-{s}" for s in split_names] + ["statistics", PROVENANCE_DIR])
    schema_path = storage.join(out.root, "schema.pbtxt")
    storage.remove(schema_path)
    write_schema(schema, schema_path)
