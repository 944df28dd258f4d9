"""Moving small test trees to and from the moto S3 server (see conftest's `s3_server`).

    uri = upload_tree(s3_server, tmp_path / "data", bucket, "data")   # → "s3://<bucket>/data"
    files = download_tree(s3_server, f"s3://{bucket}/out", tmp_path / "out_copy")
"""
from __future__ import annotations

from pathlib import Path
from typing import Any


def upload_tree(s3_server: Any, local_dir: Path | str, bucket: str, prefix: str) -> str:
    """Uploads every file below `local_dir` to `s3://bucket/prefix/<relative path>`; returns that URI."""
    root, prefix = Path(local_dir), prefix.strip("/")
    client = s3_server.client()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        key = "/".join(part for part in (prefix, path.relative_to(root).as_posix()) if part)
        client.upload_file(str(path), bucket, key)
    return f"s3://{bucket}/{prefix}" if prefix else f"s3://{bucket}"


def put_bytes(s3_server: Any, uri: str, data: bytes) -> str:
    """Writes one object (the test's own write, independent of shardflow.core.storage)."""
    bucket, _, key = uri[len("s3://"):].partition("/")
    s3_server.client().put_object(Bucket=bucket, Key=key, Body=data)
    return uri


def get_bytes(s3_server: Any, uri: str) -> bytes:
    bucket, _, key = uri[len("s3://"):].partition("/")
    return s3_server.client().get_object(Bucket=bucket, Key=key)["Body"].read()


def list_keys(s3_server: Any, uri: str) -> list[str]:
    """Keys below the URI's prefix, relative to it (sorted)."""
    bucket, _, prefix = uri[len("s3://"):].partition("/")
    prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
    return [key[len(prefix):] for key in s3_server.keys(bucket, prefix)]


def download_tree(s3_server: Any, uri: str, local_dir: Path | str) -> dict[str, bytes]:
    """Every object below `uri` copied to `local_dir` (same relative paths); returns {relative: bytes}."""
    found = {}
    for relative in list_keys(s3_server, uri):
        data = get_bytes(s3_server, uri.rstrip("/") + "/" + relative)
        target = Path(local_dir) / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        found[relative] = data
    return found
