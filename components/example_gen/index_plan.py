"""ExampleGen's plan of the work, made in the launcher before any row is encoded: the indexes' columns (detected
from sampled rows), the estimated work, and the chunks the workers take, for a table of files (chunks of CSV
rows) or a box index (chunks of images, box_ingest.py).
"""
from __future__ import annotations

import dataclasses
import math

from .box_index import IMAGE_COLUMN
from .box_ingest import BoxSource, box_column_specs
from .columns import SAMPLE_ROWS, ColumnSpec, detect_columns
from .config import ConfigError, ExampleGenConfig, IndexSpec  # noqa: F401  (IndexSpec: doctest)
from .csv_index import Chunk, count_rows, plan_chunks, read_chunk
from .data_root import open_data_root
from .work_estimate import WorkEstimate, estimate_work

# Estimated single-core seconds of work per chunk at most: a worker that takes the last chunk keeps
# the other cores idle for up to that long. 20k photos (~2.5 ms a row) made 10 chunks of 2,000 rows
# (~5 s each) before; 28×28 PNGs (~70 µs a row) stay at the 2,000-row cap.
CHUNK_WORK_SECONDS = 0.5

Planned = tuple[list[str], list[Chunk], list[ColumnSpec], WorkEstimate]  # header, chunks, columns, work


def rows_per_chunk(config: ExampleGenConfig, total_rows: int, row_seconds: float = 0.0) -> int:
    """`--rows-per-chunk`, else at least 8 chunks of 64 to 2,000 rows, each ~CHUNK_WORK_SECONDS of work or less.

    >>> config = ExampleGenConfig(indexes=(IndexSpec("i.csv", "train"),), data_root="d", output="o")
    >>> [rows_per_chunk(config, 20_000, s) for s in (0.0, 70e-6, 2.5e-3)]
    [2000, 2000, 200]
    """
    if config.rows_per_chunk:
        return config.rows_per_chunk
    by_count = min(2000, max(64, math.ceil(total_rows / 8)))
    return min(by_count, max(64, math.ceil(CHUNK_WORK_SECONDS / row_seconds))) if row_seconds > 0 else by_count


def plan_indexes(config: ExampleGenConfig, per_chunk: int | None = None) -> tuple[list[str], list[Chunk]]:
    """The common header and the chunks of every index (`per_chunk` rows each, else from the row count)."""
    if per_chunk is None:
        per_chunk = rows_per_chunk(config, sum(count_rows(i.path) for i in config.indexes))
    header: list[str] | None = None
    chunks: list[Chunk] = []
    for index_id, index in enumerate(config.indexes):
        index_header, index_chunks = plan_chunks(index.path, index_id, per_chunk)
        if header is not None and index_header != header:
            raise ConfigError(f"index {index.path!r} has header {index_header}, expected {header}")
        header = header or index_header
        chunks.extend(index_chunks)
    return header or [], chunks


def _sample(chunks: list[Chunk]) -> list[list[str]]:
    samples: list[list[str]] = []
    for chunk in chunks:
        samples.extend(r.cells for r in read_chunk(chunk) if r.cells is not None)
        if len(samples) >= SAMPLE_ROWS:
            break
    return samples[:SAMPLE_ROWS]


def plan_table(config: ExampleGenConfig) -> Planned:
    """A table of files: its header, chunks of rows (smaller for costly rows), columns and work."""
    header, chunks = plan_indexes(config)
    samples = _sample(chunks)
    columns = detect_columns(header, samples, config)
    total_rows = sum(c.num_rows for c in chunks)
    work = estimate_work(columns, samples, open_data_root(config.data_root), total_rows)
    per_chunk = rows_per_chunk(config, total_rows, work.seconds / max(total_rows, 1))
    if per_chunk != rows_per_chunk(config, total_rows):  # smaller chunks for costly rows: planned again
        header, chunks = plan_indexes(config, per_chunk)
    return header, chunks, columns, work


def plan_boxes(config: ExampleGenConfig, boxes: BoxSource) -> Planned:
    """A box index: the one-column table [image] of its images, chunks of images (`--rows-per-chunk` counts
    images), the image column and the box columns."""
    header, samples = [IMAGE_COLUMN], boxes.samples()
    columns = [_box_image(column, config) for column in detect_columns(header, samples, config)] + box_column_specs()
    work = estimate_work(columns, samples, open_data_root(config.data_root), boxes.num_images)
    chunks = boxes.chunks(rows_per_chunk(config, boxes.num_images, work.seconds / max(boxes.num_images, 1)))
    return header, chunks, columns, work


def _box_image(column: ColumnSpec, config: ExampleGenConfig) -> ColumnSpec:
    """A box index's image column, letterboxed under --resize unless `--box-resize stretch` (images.py). Without
    --resize every image has the stored size already, and a served photo of another size is stretched as before."""
    if column.rules is None or not column.rules.resize or config.box_resize != "letterbox":
        return column
    return dataclasses.replace(column, rules=dataclasses.replace(column.rules, letterbox=True))
