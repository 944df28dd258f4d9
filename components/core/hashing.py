"""Content hashes of files (provenance in manifests, cache keys of pipeline runs), local or URI."""
from __future__ import annotations

import hashlib

from . import storage


def sha256_of(path: str) -> str:
    """The hex SHA-256 of the file at `path` (local path or s3:// / gs:// URI), read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with storage.open_read(str(path)) as source:
        for block in iter(lambda: source.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
