"""The raw schema beside the transform graph, so TFX user code can build serving functions from it.

`tft.TFTransformOutput(graph).raw_feature_spec()` / `.raw_metadata` read `<graph>/metadata/`
(`TFTransformOutput.RAW_METADATA_DIR`), which `tft_beam.WriteTransformFn` does not write: TFX's
Transform executor writes it beside, a `DatasetMetadata` of the raw input schema. Shardflow writes
the same from the schema its analyzers read (`raw_input.raw_schema`). The write goes through
TensorFlow's gfile (as TFT's own), so `graph` may be a path or, after
`enable_tensorflow_filesystems`, an s3:// or gs:// URI.

    write_raw_metadata(out.staged(TRANSFORM_GRAPH), source_manifest)
    tft.TFTransformOutput(graph).raw_feature_spec()  # == core.reader.feature_spec(source_manifest)
"""
from __future__ import annotations

import tensorflow_transform as tft
from tensorflow_transform.tf_metadata import dataset_metadata, metadata_io

from ..core import storage
from ..core.manifest import Manifest
from .raw_input import raw_schema


def raw_metadata_dir(graph: str) -> str:
    """Where TFTransformOutput looks for the raw metadata of the transform graph at `graph`."""
    return storage.join(graph, tft.TFTransformOutput.RAW_METADATA_DIR)


def write_raw_metadata(graph: str, source: Manifest) -> str:
    """Writes the raw schema of `source` (the examples Transform read) under `graph`; returns the folder."""
    folder = raw_metadata_dir(graph)
    metadata_io.write_metadata(dataset_metadata.DatasetMetadata(raw_schema(source)), folder)
    return folder
