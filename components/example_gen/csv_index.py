"""CSV index files cut into chunks of rows by byte offset, so workers read their own rows.

The dialect (RFC 4180 as spreadsheets write it, read as Python's csv module reads it): a UTF-8
byte-order mark is dropped; a `"` that starts a cell opens a quoted cell (`""` inside is one
quote; commas, line breaks and leading or trailing spaces inside are kept); a `"` anywhere else
is a literal character (`12" vinyl`). Unquoted cells are stripped of spaces. Header columns with
no name are dropped when they are empty in every row.

The driver scans each file once in binary, tracking only whether a line ends inside a quoted cell.
A quoted cell may go on over several lines only when the record it makes parses with the header's
number of fields; otherwise its first line is a record of its own (one rejected row) and the lines
after it are scanned again, so a broken quote costs at most its own line. Workers seek to a chunk
and run the same scanner from the same record boundary, so they find the same records. Index
files may be local or s3:// / gs:// URIs (read through `storage`: a chunk costs one ranged read).

>>> import tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "i.csv")
>>> _ = open(path, "w").write('x,y\\na.png,1\\n"b,c.png",2\\nd.png,12" vinyl\\n')
>>> header, chunks = plan_chunks(path, index_id=0, rows_per_chunk=2)
>>> header, [(c.first_row, c.num_rows) for c in chunks]
(['x', 'y'], [(1, 2), (3, 1)])
>>> [r.cells for r in read_chunk(chunks[1])]
[['d.png', '12" vinyl']]
"""
from __future__ import annotations

import csv
import io
import re
from collections import deque
from dataclasses import dataclass
from typing import Any, Generator, Iterable, Iterator

from ..core import storage
from ..core.errors import ConfigError
from .csv_cells import parse_record

BOM = b"\xef\xbb\xbf"
MAX_RECORD_BYTES = 1 << 20  # a quoted cell running longer than this is a broken quote, not a cell
_CELL = rb'(?:"[^"]*(?:""[^"]*)*"|[^",\r\n][^,\r\n]*|)'
# A line of well-formed cells: its quotes are all closed (the regex is a fast path of _open_at_end).
_WELL_QUOTED = re.compile(_CELL + rb"(?:," + _CELL + rb")*\r?\n?")


class IndexFileError(ConfigError):
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
    num_fields: int  # fields of a well-formed record, unnamed columns included
    keep: tuple[int, ...] | None = None  # positions of the named columns, when some have no name
    # A box index's chunk (box_ingest.py) holds its images, each an example of rows from anywhere in the file,
    # and the rows the index reader rejected; `num_rows` counts both, `first_row` is unused (0).
    images: tuple[Any, ...] | None = None  # box_types.ImageBoxes
    rejects: tuple[Any, ...] = ()  # box_types.BoxReject

    @property
    def is_box(self) -> bool:
        return self.images is not None


@dataclass(frozen=True)
class Record:
    row: int  # 1-based data-row number: the first row after the header is 1
    cells: list[str] | None  # None when the record does not parse
    error: str = ""


def _open_at_end(line: bytes, in_quote: bool) -> bool:
    """Whether `line` ends inside a quoted cell, given whether it starts inside one.

    Only a quote at the start of a cell opens one; text after a closing quote (malformed, the
    parser rejects it) is skipped up to the next comma, as the parser's cell boundaries are.
    """
    i = 0
    while True:
        if in_quote:
            j = line.find(b'"', i)
            if j < 0:
                return True
            if line.startswith(b'"', j + 1):  # "" is an escaped quote
                i = j + 2
                continue
            in_quote, i = False, j + 1
        elif line.startswith(b'"', i):
            in_quote, i = True, i + 1
            continue
        j = line.find(b",", i)
        if j < 0:
            return False
        i = j + 1


class _Records:
    """(start offset, raw bytes) of each record of a binary line stream; blank lines are skipped.

    `num_fields` (set once the header is known) decides whether a quoted cell over several lines
    makes a well-formed record. `file_start`: the stream starts at the file's first byte (BOM).
    """

    def __init__(self, stream: Iterable[bytes], num_fields: int | None = None, file_start: bool = False) -> None:
        self.stream, self.num_fields, self.file_start = stream, num_fields, file_start

    def __iter__(self) -> Iterator[tuple[int, bytes]]:
        lines: Iterator[bytes] = iter(self.stream)
        offset = 0
        if self.file_start:  # not itertools.chain: it would slow every line down by a fifth
            first = next(lines, b"")
            if first.startswith(BOM):
                first, offset = first[len(BOM):], len(BOM)
            offset = yield from self._quoted(first, lines, offset)  # takes quote-free lines too
        for line in lines:  # the fast loop: most lines hold no quote at all
            if b'"' in line and not _WELL_QUOTED.fullmatch(line) and _open_at_end(line, False):
                offset = yield from self._quoted(line, lines, offset)
                continue
            if line.strip(b"\r\n"):
                yield offset, line
            offset += len(line)

    def _quoted(self, first: bytes, lines: Iterator[bytes],
                offset: int) -> Generator[tuple[int, bytes], None, int]:
        """The records from `first` on, until no line is left to scan again; returns the offset."""
        queue = deque([first])
        while queue:
            line = queue.popleft()
            if not _open_at_end(line, False):
                if line.strip(b"\r\n"):
                    yield offset, line
                offset += len(line)
                continue
            parts, size, closed = [line], len(line), False
            while size <= MAX_RECORD_BYTES:
                more = queue.popleft() if queue else next(lines, None)
                if more is None:
                    break
                parts.append(more)
                size += len(more)
                if not _open_at_end(more, True):
                    closed = True
                    break
            record = b"".join(parts)
            if closed and self._well_formed(record):
                yield offset, record
                offset += len(record)
                continue
            yield offset, line  # a broken quote: its own line only
            offset += len(line)
            queue.extendleft(reversed(parts[1:]))
        return offset

    def _well_formed(self, record: bytes) -> bool:
        try:
            cells = parse_record(record)
        except (csv.Error, UnicodeDecodeError):
            return False
        return self.num_fields is None or len(cells) == self.num_fields


def read_header(path: str) -> list[str]:
    """The header's column names as written ("" for a column with no name), checked."""
    with storage.open_read(path) as stream:
        return _header(path, iter(_Records(stream, file_start=True)))


def _header(path: str, records: Iterator[tuple[int, bytes]]) -> list[str]:
    """The first record parsed as the header (checked), taken from `records`."""
    for _, raw in records:
        try:
            header = parse_record(raw)
        except (csv.Error, UnicodeDecodeError) as err:
            raise IndexFileError(f"{path}: header does not parse: {err}") from err
        named = [name for name in header if name]
        if not named:
            raise IndexFileError(f"{path}: the header row has no column names: {header}")
        if len(set(named)) != len(named):
            duplicates = sorted({name for name in named if named.count(name) > 1})
            raise IndexFileError(f"{path}: header has duplicate column names {duplicates}")
        return header
    raise IndexFileError(f"{path}: empty index file (no header row, no rows)")


def _check_unnamed(path: str, header: list[str], row: int, raw: bytes) -> None:
    """A column with no name may only be empty (Excel's trailing columns); else the user must name it."""
    try:
        cells = parse_record(raw)
    except (csv.Error, UnicodeDecodeError):
        return  # rejected as malformed when read
    if len(cells) != len(header):
        return
    for position, name in enumerate(header):
        if not name and cells[position]:
            raise IndexFileError(f"{path}: column {position + 1} of the header has no name, but data row {row} "
                                 f"has {cells[position]!r} there; name the column or delete it")


def plan_chunks(path: str, index_id: int, rows_per_chunk: int) -> tuple[list[str], list[Chunk]]:
    """The header (named columns) and the chunks of an index file, from one binary scan."""
    chunks: list[Chunk] = []
    with storage.open_read(path) as stream:
        scanner = _Records(stream, file_start=True)
        records = iter(scanner)
        header = _header(path, records)
        scanner.num_fields = len(header)
        keep = None if all(header) else tuple(p for p, name in enumerate(header) if name)
        start = end = None
        count = row = 0
        for offset, raw in records:
            row += 1
            if keep is not None:
                _check_unnamed(path, header, row, raw)
            if start is None:
                start, count = offset, 0
            count += 1
            end = offset + len(raw)
            if count == rows_per_chunk:
                chunks.append(Chunk(index_id, len(chunks), path, start, end, row - count + 1, count, len(header), keep))
                start = None
        if start is not None:
            chunks.append(Chunk(index_id, len(chunks), path, start, end, row - count + 1, count, len(header), keep))
    return [name for name in header if name], chunks


def read_chunk(chunk: Chunk) -> Iterator[Record]:
    """Parses the chunk's records; a bad one comes back with `cells=None` and the reason."""
    with storage.open_read(chunk.path) as stream:
        stream.seek(chunk.start)
        data = stream.read(chunk.end - chunk.start)
    records = _Records(io.BufferedReader(io.BytesIO(data)), chunk.num_fields)
    for number, (_, raw) in enumerate(records, chunk.first_row):
        try:
            cells = parse_record(raw)
        except (csv.Error, UnicodeDecodeError) as err:
            yield Record(number, None, f"malformed CSV record: {err}")
            continue
        if len(cells) != chunk.num_fields:
            yield Record(number, None, f"malformed CSV record: {len(cells)} fields, the header has {chunk.num_fields}")
        elif chunk.keep is not None:
            yield Record(number, [cells[p] for p in chunk.keep])
        else:
            yield Record(number, cells)


def read_head(path: str, rows: int) -> tuple[list[str], list[list[str]]]:
    """The header (named columns) and the first `rows` well-formed data rows, reading only the file's start.

    For checks before a run (which columns are masks): no scan of the whole file.
    """
    samples: list[list[str]] = []
    with storage.open_read(path) as stream:
        scanner = _Records(stream, file_start=True)
        records = iter(scanner)
        header = _header(path, records)
        scanner.num_fields = len(header)
        keep = [p for p, name in enumerate(header) if name]
        for _, raw in records:
            if len(samples) >= rows:
                break
            try:
                cells = parse_record(raw)
            except (csv.Error, UnicodeDecodeError):
                continue  # a malformed row is ExampleGen's to reject
            if len(cells) == len(header):
                samples.append([cells[p] for p in keep])
    return [header[p] for p in keep], samples


def count_rows(path: str) -> int:
    """The number of data records (the same records `plan_chunks` finds)."""
    with storage.open_read(path) as stream:
        scanner = _Records(stream, file_start=True)
        records = iter(scanner)
        try:
            scanner.num_fields = len(_header(path, records))
        except IndexFileError:
            return 0  # plan_chunks reports it
        return sum(1 for _ in records)
