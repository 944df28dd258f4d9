"""TFRecord framing and the hand-written Example encoder, checked against TensorFlow's reader and protos."""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from shardflow.core.example_proto import encode_example
from shardflow.core.tfrecord import CorruptRecordError, frame, iter_frames, iter_records, records_numbered

pytestmark = pytest.mark.unit  # in process, small generated data, no server: make test-fast runs it


def _tf_records(path: Path, compression: str = "") -> list[bytes]:
    dataset = tf.data.TFRecordDataset(str(path), compression_type=compression or None)
    return [r.numpy() for r in dataset]


# ---------------------------------------------------------------- tfrecord framing

RECORDS = [b"", b"a", b"\x00\xff" * 7, bytes(range(256)) * 300]  # empty, tiny, binary, 76.8 kB


def test_frames_are_read_back_by_tensorflow(tmp_path: Path) -> None:
    path = tmp_path / "r.tfrecord"
    path.write_bytes(b"".join(frame(r) for r in RECORDS))
    assert _tf_records(path) == RECORDS
    with open(path, "rb") as stream:
        assert list(iter_records(stream, str(path))) == RECORDS
    assert len(frame(b"abc")) == 8 + 4 + 3 + 4


@pytest.mark.parametrize("damage, message, tf_raises", [
    (lambda b: b[:20] + bytes([b[20] ^ 0x01]) + b[21:], "bad data CRC", True),   # a payload bit of record 1
    (lambda b: b[:8] + bytes([b[8] ^ 0x01]) + b[9:], "bad length CRC", True),   # the length CRC of record 1
    (lambda b: b[:-3], "truncated record at byte", True),                       # the file ends inside a record
    # A partial header after the last record: TF's reader takes it for the end of the file; ours refuses.
    (lambda b: b + b"\x05\x00\x00", "truncated record header", False),
])
def test_corruption_raises_naming_the_source(tmp_path: Path, damage, message: str, tf_raises: bool) -> None:
    good = b"".join(frame(r) for r in [b"first record", b"second record"])
    path = tmp_path / "bad.tfrecord"
    path.write_bytes(damage(good))
    with open(path, "rb") as stream, pytest.raises(CorruptRecordError) as caught:
        list(iter_records(stream, str(path)))
    assert message in str(caught.value) and str(path) in str(caught.value)
    if tf_raises:
        with pytest.raises(tf.errors.DataLossError):  # TensorFlow agrees that the file is damaged
            _tf_records(path)


def test_iter_frames_yields_whole_frames_that_concatenate() -> None:
    data = b"".join(frame(r) for r in RECORDS)
    frames = list(iter_frames(io.BytesIO(data)))
    assert b"".join(frames) == data and frames == [frame(r) for r in RECORDS]


# ---------------------------------------------------------------- example_proto

EXAMPLE_FEATURES = {
    "int": [0, 1, -1, 127, 128, -(2 ** 63), 2 ** 63 - 1, 300],
    "float": [0.0, -0.0, 1.5, -2.25, 0.1, 3.4e38, float("inf"), -1e-45],
    "bytes": [b"", b"\x00\xff\x80", b"x" * 200],
    "text": ["h\u00e9llo", ""],
    "np_int": np.array([-5, 0, 7], dtype=np.int64),
    "np_uint8": np.array([0, 255], dtype=np.uint8),
    "np_float": np.array([0.5, -1.25], dtype=np.float32),
    "bool": [True, False],
    "one": [42],
    "empty": [],
}


def _expected_example() -> tf.train.Example:
    feature = tf.train.Feature
    return tf.train.Example(features=tf.train.Features(feature={
        "int": feature(int64_list=tf.train.Int64List(value=EXAMPLE_FEATURES["int"])),
        "float": feature(float_list=tf.train.FloatList(value=EXAMPLE_FEATURES["float"])),
        "bytes": feature(bytes_list=tf.train.BytesList(value=EXAMPLE_FEATURES["bytes"])),
        "text": feature(bytes_list=tf.train.BytesList(value=[v.encode("utf-8") for v in EXAMPLE_FEATURES["text"]])),
        "np_int": feature(int64_list=tf.train.Int64List(value=[-5, 0, 7])),
        "np_uint8": feature(int64_list=tf.train.Int64List(value=[0, 255])),
        "np_float": feature(float_list=tf.train.FloatList(value=[0.5, -1.25])),
        "bool": feature(int64_list=tf.train.Int64List(value=[1, 0])),
        "one": feature(int64_list=tf.train.Int64List(value=[42])),
        "empty": feature(bytes_list=tf.train.BytesList()),  # an empty list has no kind: bytes, like TF's parser
    }))


def test_encode_example_equals_tensorflow_example() -> None:
    blob = encode_example(EXAMPLE_FEATURES)
    expected = _expected_example()
    assert tf.train.Example.FromString(blob) == expected
    # Keys are written sorted, as protobuf's deterministic serialization does: the same bytes.
    assert blob == expected.SerializeToString(deterministic=True)
    parsed = tf.io.parse_single_example(blob, {
        "int": tf.io.FixedLenFeature([8], tf.int64), "np_float": tf.io.FixedLenFeature([2], tf.float32),
        "text": tf.io.FixedLenFeature([2], tf.string)})
    assert parsed["int"].numpy().tolist() == EXAMPLE_FEATURES["int"]
    assert parsed["np_float"].numpy().tolist() == [0.5, -1.25]
    assert parsed["text"].numpy().tolist() == [b"h\xc3\xa9llo", b""]
    assert encode_example(dict(reversed(list(EXAMPLE_FEATURES.items())))) == blob  # key order does not matter


@pytest.mark.parametrize("array", [
    np.array(EXAMPLE_FEATURES["float"] + [float("nan"), -float("inf"), 1e-30, 2.0 ** -149], np.float32),
    np.array(EXAMPLE_FEATURES["int"], np.int64)])
def test_numpy_arrays_encode_as_their_lists(array: np.ndarray) -> None:
    """float32 and int64 arrays take a path of their own (their bytes, their varints): the same bytes as the list,
    for a strided view and a big-endian copy too; a 2-D array is refused as before."""
    for values in (array, array[::-2], array.astype(array.dtype.newbyteorder(">"))):
        assert encode_example({"x": values}) == encode_example({"x": values.tolist()})
    with pytest.raises(TypeError, match="unsupported feature value type list"):
        encode_example({"x": array.reshape(2, -1)})


@pytest.mark.parametrize("values", [[2 ** 63], [-(2 ** 63) - 1], [1, 2 ** 64 + 5]])
def test_out_of_range_int64_is_refused_not_wrapped(values: list[int]) -> None:
    with pytest.raises(OverflowError):
        encode_example({"y": values})


def test_unsupported_value_type_is_refused() -> None:
    with pytest.raises(TypeError, match="unsupported feature value type"):
        encode_example({"y": [object()]})


def test_records_by_number_skip_the_others_in_plain_and_gzip_files(tmp_path: Path) -> None:
    """What the Evaluator's contact sheet reads: a few records by number, from files TensorFlow wrote."""
    import gzip

    records = [bytes([i]) * (i + 1) for i in range(40)]
    for compression, opener in (("", open), ("GZIP", gzip.open)):
        path = tmp_path / f"r{compression}.tfrecord"
        with tf.io.TFRecordWriter(str(path), options=compression or None) as writer:
            for record in records:
                writer.write(record)
        with opener(path, "rb") as stream:
            assert records_numbered(stream, [39, 0, 17, 17]) == {0: records[0], 17: records[17], 39: records[39]}
    data = bytearray(b"".join(frame(r) for r in records[:3]))
    data[-5] ^= 1  # the third record's last data byte: a skipped record is not checked, a wanted one is
    assert records_numbered(io.BytesIO(bytes(data)), [1]) == {1: records[1]}
    with pytest.raises(CorruptRecordError, match="bad data CRC"):
        records_numbered(io.BytesIO(bytes(data)), [2])
    with pytest.raises(CorruptRecordError, match="ends before record 3"):
        records_numbered(io.BytesIO(bytes(data)), [3])
