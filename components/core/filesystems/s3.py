"""s3:// (AWS S3, MinIO, Ceph, any S3-protocol store) through Beam's `S3IO`, configured the AWS way.

Settings come from boto3's chain: `AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
`AWS_DEFAULT_REGION`, `~/.aws`. TensorFlow reads s3:// through tensorflow-io's plugin, which has its
own variable names: `tensorflow_s3_settings` maps one onto the other.

>>> env = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_DEFAULT_REGION": "eu-west-1"}
>>> sorted(tensorflow_s3_settings(env).items())
[('AWS_REGION', 'eu-west-1'), ('S3_ENDPOINT', 'http://127.0.0.1:9000'), ('S3_USE_HTTPS', '0'), ('S3_VERIFY_SSL', '0')]
>>> other_etag('"9e107d9d372bb6826bd81d3542a419d6"'), other_etag(MADE_UP_ETAG) != MADE_UP_ETAG
('"00000000000000000000000000000000"', True)
"""
from __future__ import annotations

import os
from typing import Any, BinaryIO, Mapping

from ..uri import split_bucket
from .base import WriteConflict
from .object_store import ObjectStoreFileSystem

SINGLE_PUT_BYTES = 64 << 20  # in-memory payloads below this go up in one request
# A conditional PUT's refusals: the precondition failed (412), If-Match on a removed object (404), and S3's
# 409 ConditionalRequestConflict (another conditional write to the key was in flight: retried, then it is 412).
_CONFLICT, _IN_FLIGHT, _MISSING = "PreconditionFailed", "ConditionalRequestConflict", ("NoSuchKey", "404")
IN_FLIGHT_ATTEMPTS = 3
MADE_UP_ETAG = '"' + "0" * 32 + '"'  # an MD5 ETag no real content has in practice


def _error_code(error: Exception) -> str:
    return str(getattr(error, "response", {}).get("Error", {}).get("Code", ""))


def tensorflow_s3_settings(env: Mapping[str, str]) -> dict[str, str]:
    """tensorflow-io's S3 variables derived from the AWS ones (those already set are kept)."""
    settings: dict[str, str] = {}
    endpoint = env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
    if endpoint and "S3_ENDPOINT" not in env:
        settings["S3_ENDPOINT"] = endpoint
        if endpoint.startswith("http://"):
            settings["S3_USE_HTTPS"] = "0"
            settings["S3_VERIFY_SSL"] = "0"
    region = env.get("AWS_DEFAULT_REGION") or env.get("AWS_REGION")
    if region and "AWS_REGION" not in env:
        settings["AWS_REGION"] = region
    return settings


def other_etag(etag: str) -> str:
    """An ETag of S3's form that is not `etag`: the probe's wrong token."""
    return MADE_UP_ETAG if etag != MADE_UP_ETAG else '"' + "f" * 32 + '"'


class S3FileSystem(ObjectStoreFileSystem):
    """s3://: small payloads in one PUT, and an empty object as a plain PUT (S3 refuses an empty multipart)."""

    PROBE_WORDS = {"create": "a second PUT with If-None-Match: *", "wrong": "a PUT with If-Match: a made-up ETag",
                   "removed": "a PUT with If-Match on a removed object"}

    def make_client(self) -> Any:
        from apache_beam.io.aws.s3io import S3IO
        from apache_beam.options.pipeline_options import PipelineOptions

        return S3IO(options=PipelineOptions([]))  # endpoint, keys and region from boto3's chain

    def write_bytes(self, location: str, data: bytes, durable: bool) -> None:
        if len(data) < SINGLE_PUT_BYTES:
            self._put(location, data)
        else:
            super().write_bytes(location, data, durable)

    def finish_upload(self, location: str, stream: BinaryIO) -> None:
        if stream.tell() != 0:
            stream.close()
            return
        # S3 refuses to complete a multipart upload without parts: an empty object is one plain PUT.
        self._put(location, b"")
        bucket, key = split_bucket(location)
        upload_id = stream.raw._uploader.upload_id  # type: ignore[attr-defined]
        self.client.client.client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)

    def _put(self, location: str, data: bytes) -> None:
        """One PUT (Beam's stream takes three requests: start, part, complete); atomic like any PUT."""
        bucket, key = split_bucket(location)
        self.client.client.client.put_object(Bucket=bucket, Key=key, Body=data)  # Beam's client wraps boto3's

    def read_bytes(self, location: str) -> bytes:
        """One GET: the whole of one version of the object. Beam's stream asks the size, then reads ranges: an
        overwrite between them gave a reader the start of the new object cut at the old one's length (a models.config
        that did not parse, seen by a poller racing pushes)."""
        data, _ = self.read_with_token(location)
        if data is None:
            raise FileNotFoundError(f"no such object: {location}")
        return data

    def read_with_token(self, location: str) -> tuple[bytes | None, str | None]:
        """One GET: the bytes and their ETag come from the same response."""
        bucket, key = split_bucket(location)
        try:
            response = self.client.client.client.get_object(Bucket=bucket, Key=key)
        except Exception as error:  # botocore's ClientError, named by its code
            if _error_code(error) in _MISSING:
                return None, None
            raise
        return response["Body"].read(), response["ETag"]

    def wrong_token(self, token: str) -> str:
        return other_etag(token)

    def put_if(self, location: str, data: bytes, expected: str | None) -> str:
        """A conditional PUT: `If-None-Match: *` to create, `If-Match: ETAG` to replace; S3 decides atomically."""
        bucket, key = split_bucket(location)
        condition = {"IfNoneMatch": "*"} if expected is None else {"IfMatch": expected}
        for _ in range(IN_FLIGHT_ATTEMPTS):
            try:
                return self.client.client.client.put_object(Bucket=bucket, Key=key, Body=data, **condition)["ETag"]
            except Exception as error:  # botocore's ClientError, named by its code
                code = _error_code(error)
                if code == _CONFLICT or code in _MISSING:
                    raise WriteConflict.at(location, expected) from None
                if code != _IN_FLIGHT:
                    raise
        raise WriteConflict.at(location, expected)  # still contended after IN_FLIGHT_ATTEMPTS: the other won

    def delete_batch(self, paths: list[str]) -> list[tuple[str, Exception | None]]:
        return self.client.delete_files(paths)

    def enable_tensorflow(self) -> None:
        """tensorflow-io's s3:// plugin, with its variables derived from the AWS ones."""
        for name, value in tensorflow_s3_settings(os.environ).items():
            os.environ.setdefault(name, value)
        import tensorflow_io  # noqa: F401  (registers the s3:// filesystem plugin with TensorFlow)
