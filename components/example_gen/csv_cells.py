"""One CSV record's cells, in the dialect csv_index.py describes (quotes only at a cell's start).

>>> parse_record(b'a.png , 3\\r\\n'), parse_record(b'"b,c.png"," padded ",12" vinyl\\n')
(['a.png', '3'], ['b,c.png', ' padded ', '12" vinyl'])
"""
from __future__ import annotations

import csv


def split_plain(raw: bytes) -> list[str] | None:
    """The cells of a record with no quotes, NULs or inner line breaks, or None for `parse_quoted`.

    Such a record parses the same by splitting on commas, several times faster.
    """
    line = raw[:-1] if raw.endswith(b"\n") else raw
    if line.endswith(b"\r"):
        line = line[:-1]
    if not line or b'"' in line or b"\r" in line or b"\n" in line or b"\x00" in line:
        return None
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        return None  # the slow path reports it
    return [cell.strip() for cell in text.split(",")]


def parse_quoted(text: str) -> list[str]:
    """The cells of one record (without its line ending); csv.Error when it is malformed."""
    cells: list[str] = []
    i, n = 0, len(text)
    while True:
        if text.startswith('"', i):  # a quoted cell: kept as written, spaces included
            parts, i = [], i + 1
            while True:
                j = text.find('"', i)
                if j < 0:
                    raise csv.Error(f"unexpected end of record in quoted cell {len(cells) + 1}")
                parts.append(text[i:j])
                if not text.startswith('"', j + 1):
                    break
                parts.append('"')
                i = j + 2
            cells.append("".join(parts))
            i = j + 1
            if i == n:
                return cells
            if text[i] != ",":
                raise csv.Error(f"',' expected after the closing quote of cell {len(cells)}, found {text[i]!r}")
            i += 1
            continue
        j = text.find(",", i)
        cell = text[i:] if j < 0 else text[i:j]
        if "\n" in cell or "\r" in cell:
            raise csv.Error(f"line break in unquoted cell {len(cells) + 1}")
        cells.append(cell.strip())
        if j < 0:
            return cells
        i = j + 1


def parse_record(raw: bytes) -> list[str]:
    """The cells of one record (its raw bytes, line ending included); csv.Error or UnicodeDecodeError if malformed."""
    plain = split_plain(raw)
    if plain is not None:
        return plain
    text = raw.decode("utf-8")
    text = text[:-1] if text.endswith("\n") else text
    return parse_quoted(text[:-1] if text.endswith("\r") else text)
