"""TFRecord framing without TensorFlow: write, iterate and copy length-prefixed, CRC-checked frames.

Beam workers use this so that they never import TensorFlow (its import costs seconds per worker).
A frame is: uint64 length, masked crc32c(length), data, masked crc32c(data), little-endian.

>>> frame(b"abc")[:8] == (3).to_bytes(8, "little")
True
>>> import io
>>> records_numbered(io.BytesIO(b"".join(frame(bytes([i])) for i in range(5))), [3, 1])
{1: b'\\x01', 3: b'\\x03'}
"""
from __future__ import annotations

import io
import struct
from typing import BinaryIO, Iterable, Iterator

import google_crc32c
from .errors import ShardflowError

_MASK_DELTA = 0xA282EAD8
_HEADER = struct.Struct("<QI")
_FOOTER = struct.Struct("<I")


def masked_crc32c(data: bytes) -> int:
    """The CRC TFRecord stores: crc32c rotated right by 15 bits plus a constant."""
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def frame(record: bytes) -> bytes:
    """One record framed as TFRecord bytes."""
    length = struct.pack("<Q", len(record))
    return length + struct.pack("<I", masked_crc32c(length)) + record + _FOOTER.pack(masked_crc32c(record))


class CorruptRecordError(ShardflowError, ValueError):
    """A frame whose length or CRC does not check out, or a file that ends inside a frame."""


def iter_frames(stream: BinaryIO, source: str = "<stream>", verify: bool = True) -> Iterator[bytes]:
    """Yields each whole frame (header, data and footer) of an uncompressed TFRecord stream."""
    offset = 0
    while True:
        header = stream.read(_HEADER.size)
        if not header:
            return
        if len(header) < _HEADER.size:
            raise CorruptRecordError(f"{source}: truncated record header at byte {offset}")
        length, length_crc = _HEADER.unpack(header)
        if verify and length_crc != masked_crc32c(header[:8]):
            raise CorruptRecordError(f"{source}: bad length CRC at byte {offset}")
        body = stream.read(length + _FOOTER.size)
        if len(body) < length + _FOOTER.size:
            raise CorruptRecordError(f"{source}: truncated record at byte {offset}")
        if verify and _FOOTER.unpack(body[length:])[0] != masked_crc32c(body[:length]):
            raise CorruptRecordError(f"{source}: bad data CRC at byte {offset}")
        offset += _HEADER.size + len(body)
        yield header + body


def iter_records(stream: BinaryIO, source: str = "<stream>") -> Iterator[bytes]:
    """Yields the payload of each record, checking both CRCs."""
    for whole in iter_frames(stream, source):
        yield whole[_HEADER.size:-_FOOTER.size]


def records_numbered(stream: BinaryIO, numbers: Iterable[int], source: str = "<stream>") -> dict[int, bytes]:
    """The payloads of the records numbered `numbers` (0-based) of a TFRecord stream, CRC-checked; the
    records between are skipped by seeking past them (a ranged read on an object store, never their bytes)."""
    wanted = set(numbers)
    found: dict[int, bytes] = {}
    for number in range(max(wanted) + 1 if wanted else 0):
        header = stream.read(_HEADER.size)
        if len(header) < _HEADER.size:
            raise CorruptRecordError(f"{source}: ends before record {number}")
        length, _ = _HEADER.unpack(header)
        if number not in wanted:
            stream.seek(length + _FOOTER.size, 1)
            continue
        body = stream.read(length + _FOOTER.size)
        found[number] = next(iter_records(io.BytesIO(header + body), source))
    return found
