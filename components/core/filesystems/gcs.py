"""gs:// through Beam's `GcsIO`, with Application Default Credentials (or `STORAGE_EMULATOR_HOST`).

TensorFlow has gs:// built in: nothing to enable for it. A conditional write is an upload with the
`ifGenerationMatch` precondition (generation 0: the object must not exist); tokens are generations.
"""
from __future__ import annotations

import os
from typing import Any

from ..uri import split_bucket
from .base import WriteConflict
from .object_store import ObjectStoreFileSystem

READ_ATTEMPTS = 5  # a read whose object is replaced between its metadata and its bytes starts again


def _emulated() -> bool:
    return bool(os.environ.get("STORAGE_EMULATOR_HOST"))


class GcsFileSystem(ObjectStoreFileSystem):
    """gs://; under an emulator, a client without credentials and one delete request per object."""

    PROBE_WORDS = {"create": "a second upload with ifGenerationMatch=0",
                   "wrong": "an upload with ifGenerationMatch of a wrong generation",
                   "removed": "an upload with ifGenerationMatch on a removed object"}

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

    def read_with_token(self, location: str) -> tuple[bytes | None, str | None]:
        """The generation, then that generation's bytes (`ifGenerationMatch`): never one version's bytes with
        another's token."""
        from google.api_core.exceptions import NotFound, PreconditionFailed

        bucket_name, name = split_bucket(location)
        bucket = self.client.client.bucket(bucket_name)  # GcsIO's google-cloud-storage client
        for _ in range(READ_ATTEMPTS):
            blob = bucket.get_blob(name)
            if blob is None:
                return None, None
            try:
                return blob.download_as_bytes(if_generation_match=blob.generation), str(blob.generation)
            except (NotFound, PreconditionFailed):
                continue  # replaced or removed in between
        raise OSError(f"{location} kept changing while being read ({READ_ATTEMPTS} attempts)")

    def wrong_token(self, token: str) -> str:
        return str(int(token) + 1)  # a later generation: not yet written

    def put_if(self, location: str, data: bytes, expected: str | None) -> str:
        """An upload with `ifGenerationMatch` (0: the object must not exist)."""
        from google.api_core.exceptions import NotFound, PreconditionFailed

        bucket_name, name = split_bucket(location)
        blob = self.client.client.bucket(bucket_name).blob(name)
        try:
            blob.upload_from_string(data, if_generation_match=0 if expected is None else int(expected))
        except (PreconditionFailed, NotFound):
            raise WriteConflict.at(location, expected) from None
        return str(blob.generation)
