"""The one reader and writer of TFDV statistics (`<split>.pb`) and schemas (`schema.pbtxt`), on any filesystem.

Statistics are a binary `DatasetFeatureStatisticsList`, schemas a text-format `Schema`, both as
TFDV writes them; the bytes go through `storage`, so a local path, s3:// and gs:// read alike
(TFDV's own `load_statistics`/`load_schema_text` go through tf.io.gfile, which needs
tensorflow-io for s3://). The protos come from tensorflow-metadata, imported on first use.

>>> import tempfile
>>> from tensorflow_metadata.proto.v0 import schema_pb2
>>> path = storage.join(tempfile.mkdtemp(), "schema.pbtxt")
>>> write_schema(schema_pb2.Schema(feature=[schema_pb2.Feature(name="x", type=schema_pb2.INT)]), path)
>>> [f.name for f in read_schema(path).feature]
['x']
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import ShardflowError
from . import storage

if TYPE_CHECKING:
    from tensorflow_metadata.proto.v0 import schema_pb2, statistics_pb2


class UnreadableProtoError(ShardflowError, ValueError):
    """A statistics or schema file that is not what its name says (names the file and the parse error)."""


def read_statistics(location: str) -> "statistics_pb2.DatasetFeatureStatisticsList":
    """The statistics at `location`; FileNotFoundError if absent, UnreadableProtoError if not statistics."""
    from google.protobuf.message import DecodeError
    from tensorflow_metadata.proto.v0 import statistics_pb2

    data = storage.read_bytes(location)
    try:
        return statistics_pb2.DatasetFeatureStatisticsList.FromString(data)
    except DecodeError as err:
        raise UnreadableProtoError(f"{location} is not a TFDV DatasetFeatureStatisticsList: {err}") from None


def write_statistics(stats: "statistics_pb2.DatasetFeatureStatisticsList", location: str) -> None:
    """Writes the statistics whole or not at all (argument order as TFDV's writers)."""
    storage.write_bytes(location, stats.SerializeToString())


def read_schema(location: str) -> "schema_pb2.Schema":
    """The text-format schema at `location`; FileNotFoundError if absent, UnreadableProtoError if not a schema."""
    from google.protobuf import text_format
    from tensorflow_metadata.proto.v0 import schema_pb2

    data = storage.read_bytes(location)
    try:
        return text_format.Parse(data.decode("utf-8"), schema_pb2.Schema())
    except (text_format.ParseError, UnicodeDecodeError) as err:
        raise UnreadableProtoError(f"{location} is not a readable schema.pbtxt: {err}") from None


def write_schema(schema: "schema_pb2.Schema", location: str) -> None:
    """Writes the schema as text (what `tfdv.write_schema_text` writes), whole or not at all."""
    from google.protobuf import text_format

    storage.write_text(location, text_format.MessageToString(schema))
