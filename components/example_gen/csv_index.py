"""CSV index files cut into chunks of rows by byte offset, so workers read their own rows.

The driver scans each file once in binary (no parsing), tracking quote parity so that a newline
inside a quoted cell does not end a record (RFC 4180: an escaped quote `""` keeps the parity).
Workers then seek to a chunk and parse it record by record: one malformed record is one rejected
row, never a lost chunk. Index files may be local or s3:// / gs:// URIs (read through `storage`,
whose remote streams are seekable: a chunk costs one ranged read).

>>> import tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "i.csv")
>>> _ = open(path, "w").write('x,y\\na.png,1\\n"b,c.png",2\\n')
>>> header, chunks = plan_chunks(path, index_id=0, rows_per_chunk=1)
>>> header, [(c.first_row, c.num_rows) for c in chunks]
(['x', 'y'], [(1, 1), (2, 1)])
>>> [r.cells for r in read_chunk(chunks[1])]
[['b,c.png', '2']]
"""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from typing import Generator, Iterable, Iterator

from ..core import storage


class IndexFileError(ValueError):
    """The index file as a whole is unusable (no header, duplicate column names, not UTF-8)."""


@dataclass(frozen=True)
class Chunk:
    """Rows `first_row .. first_row + num_rows - 1` (1-based data rows) of one index file."""

    index_id: int
    chunk_no: int
    path: str
    start: int
    end: int
    first_row: int
    num_rows: int
    num_fields: int


@dataclass(frozen=True)
class Record:
    row: int  # 1-based data-row number: the first row after the header is 1
    cells: list[str] | None  # None when the record does not parse
    error: str = ""


def _iter_records(stream: Iterable[bytes]) -> Iterator[tuple[int, bytes]]:
    """(start offset, raw bytes) of each record; blank lines are skipped.

    A quote left open at the end of the data (a stray `"`) would swallow every later line into
    one record; instead its first line becomes a record of its own (it fails to parse, one
    rejected row) and the lines after it are scanned again.
    """
    start, leftover = yield from _scan(stream, 0)
    while leftover:
        if leftover[0].strip(b"\r\n"):
            yield start, leftover[0]
        start, leftover = yield from _scan(leftover[1:], start + len(leftover[0]))


def _scan(lines: Iterable[bytes], offset: int) -> Generator[tuple[int, bytes], None, tuple[int, list[bytes]]]:
    """Yields the records whose quotes balance; returns the start and lines of one still open at the end."""
    pending: list[bytes] = []  # a list, not bytes +=: a long open record stays linear
    quotes = 0
    start = offset
    for line in lines:
        offset += len(line)
        if pending:
            pending.append(line)
            quotes += line.count(b'"')
            if quotes % 2:
                continue
            line, pending, quotes = b"".join(pending), [], 0
        elif line.count(b'"') % 2:  # opens a quoted cell that goes on past this line
            pending, quotes = [line], 1
            continue
        if line.strip(b"\r\n"):
            yield start, line
        start = offset
    return start, pending


def _split_plain(raw: bytes) -> list[str] | None:
    """The cells of a record with no quotes, NULs or inner line breaks, or None for the csv module.

    Such a record parses the same by splitting on commas, several times faster than csv.reader.
    """
    line = raw[:-1] if raw.endswith(b"\n") else raw
    if line.endswith(b"\r"):
        line = line[:-1]
    if not line or b'"' in line or b"\r" in line or b"\n" in line or b"\x00" in line:
        return None
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        return None  # csv's path reports it
    return [cell.strip() for cell in text.split(",")]


def _parse(raw: bytes) -> list[str]:
    plain = _split_plain(raw)
    if plain is not None:
        return plain
    rows = list(csv.reader(io.StringIO(raw.decode("utf-8")), strict=True))
    if len(rows) != 1:
        raise csv.Error(f"expected one record, found {len(rows)}")
    return [cell.strip() for cell in rows[0]]


def read_header(path: str) -> list[str]:
    with storage.open_read(path) as stream:
        return _header(path, _iter_records(stream))


def _header(path: str, records: Iterator[tuple[int, bytes]]) -> list[str]:
    """The first record parsed as the header (checked), taken from `records`."""
    for _, raw in records:
        try:
            header = _parse(raw)
        except (csv.Error, UnicodeDecodeError) as err:
            raise IndexFileError(f"{path}: header does not parse: {err}") from err
        if len(set(header)) != len(header) or not all(header):
            raise IndexFileError(f"{path}: header has empty or duplicate column names: {header}")
        return header
    raise IndexFileError(f"{path}: empty index file (no header)")


def plan_chunks(path: str, index_id: int, rows_per_chunk: int) -> tuple[list[str], list[Chunk]]:
    """The header and the chunks of an index file, from one binary scan."""
    chunks: list[Chunk] = []
    with storage.open_read(path) as stream:
        records = _iter_records(stream)
        header = _header(path, records)
        start = end = None
        count = 0
        row = 0
        for offset, raw in records:
            row += 1
            if start is None:
                start, count = offset, 0
            count += 1
            end = offset + len(raw)
            if count == rows_per_chunk:
                chunks.append(Chunk(index_id, len(chunks), path, start, end, row - count + 1, count, len(header)))
                start = None
        if start is not None:
            chunks.append(Chunk(index_id, len(chunks), path, start, end, row - count + 1, count, len(header)))
    return header, chunks


def read_chunk(chunk: Chunk) -> Iterator[Record]:
    """Parses the chunk's records; a bad one comes back with `cells=None` and the reason."""
    with storage.open_read(chunk.path) as stream:
        stream.seek(chunk.start)
        data = stream.read(chunk.end - chunk.start)
    for number, (_, raw) in enumerate(_iter_records(io.BufferedReader(io.BytesIO(data))), chunk.first_row):
        try:
            cells = _parse(raw)
        except (csv.Error, UnicodeDecodeError) as err:
            yield Record(number, None, f"malformed CSV record: {err}")
            continue
        if len(cells) != chunk.num_fields:
            yield Record(number, None, f"malformed CSV record: {len(cells)} fields, the header has {chunk.num_fields}")
        else:
            yield Record(number, cells)


def count_rows(path: str) -> int:
    with storage.open_read(path) as stream:
        return max(0, sum(1 for _ in _iter_records(stream)) - 1)
