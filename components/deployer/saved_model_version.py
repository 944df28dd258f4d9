"""The TensorFlow release that wrote a SavedModel, read from `saved_model.pb` without importing TensorFlow.

`SavedModel.meta_graphs[0].meta_info_def.tensorflow_version` (tensorflow/core/protobuf/saved_model.proto,
meta_graph.proto: fields 2, 1 and 5) is set by the exporting process; the Trainer exports in the process
that trained, so it is the training TensorFlow. Decoding three length-delimited fields of the protobuf wire
format takes a few lines; importing TensorFlow for them takes seconds.

>>> info = _field(5, b"2.16.2")
>>> tensorflow_version(_field(1, 1) + _field(2, _field(1, _field(1, b"v1") + info)))
'2.16.2'
>>> tensorflow_version(b"")
''
"""
from __future__ import annotations

from collections.abc import Iterator

from ..core import storage
from ..core.errors import ShardflowError

SAVED_MODEL = "saved_model.pb"
_META_GRAPHS, _META_INFO_DEF, _TENSORFLOW_VERSION = 2, 1, 5


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data):
            raise ValueError("truncated varint")
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if not byte & 0x80:
            return value, at


def _fields(data: bytes) -> Iterator[tuple[int, bytes | int]]:
    """(field number, bytes of a length-delimited field or an integer) of one message, in order."""
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = _varint(data, at)
            yield number, value
        elif wire == 2:
            length, at = _varint(data, at)
            if at + length > len(data):
                raise ValueError("truncated field")
            yield number, data[at:at + length]
            at += length
        elif wire in (1, 5):
            at += 8 if wire == 1 else 4
        else:
            raise ValueError(f"wire type {wire}")


def _first(data: bytes, number: int) -> bytes:
    return next((value for n, value in _fields(data) if n == number and isinstance(value, bytes)), b"")


def tensorflow_version(saved_model: bytes) -> str:
    """The first meta graph's `tensorflow_version` ('' when none is recorded)."""
    return _first(_first(_first(saved_model, _META_GRAPHS), _META_INFO_DEF), _TENSORFLOW_VERSION).decode()


def trained_with(model_dir: str) -> str:
    """The TensorFlow release that exported the model in `model_dir`; ShardflowError when it cannot be told."""
    location = storage.join(model_dir, SAVED_MODEL)
    try:
        found = tensorflow_version(storage.read_bytes(location))
    except (OSError, ValueError) as err:
        raise ShardflowError(f"cannot read the TensorFlow version of {location}: {err}") from None
    if not found:
        raise ShardflowError(f"{location} records no TensorFlow version: cannot check the TF Serving runtime")
    return found


def _field(number: int, value: bytes | int) -> bytes:
    """One encoded field (for the doctests and tests that write a saved_model.pb without TensorFlow)."""
    if isinstance(value, int):
        return _encode_varint(number << 3) + _encode_varint(value)
    return _encode_varint(number << 3 | 2) + _encode_varint(len(value)) + value


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        out.append(value & 0x7F | (0x80 if value > 0x7F else 0))
        value >>= 7
        if not value:
            return bytes(out)
