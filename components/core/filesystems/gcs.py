"""gs:// through Beam's `GcsIO`, with Application Default Credentials (or `STORAGE_EMULATOR_HOST`).

TensorFlow has gs:// built in: nothing to enable for it.
"""
from __future__ import annotations

import os
from typing import Any

from .object_store import ObjectStoreFileSystem


def _emulated() -> bool:
    return bool(os.environ.get("STORAGE_EMULATOR_HOST"))


class GcsFileSystem(ObjectStoreFileSystem):
    """gs://; under an emulator, a client without credentials and one delete request per object."""

    def make_client(self) -> Any:
        from apache_beam.io.gcp.gcsio import GcsIO
        from apache_beam.options.pipeline_options import PipelineOptions

        if _emulated():
            # An emulator takes no credentials; Beam would first retry an ADC lookup for ~35 s.
            from google.cloud import storage as gcs

            return GcsIO(storage_client=gcs.Client(), pipeline_options=PipelineOptions([]))
        return GcsIO(pipeline_options=PipelineOptions([]))

    def delete_batch(self, paths: list[str]) -> list[tuple[str, Exception | None]]:
        """GCS's batch delete; one request per object under an emulator (fake-gcs-server answers the
        JSON batch API with an empty multipart body, which the client library refuses)."""
        if not _emulated():
            return self.client.delete_batch(paths)
        results: list[tuple[str, Exception | None]] = []
        for path in paths:
            try:
                self.client.delete(path)
                results.append((path, None))
            except Exception as error:  # reported as the batch reports it
                results.append((path, error))
        return results
