"""Content hashes of files (provenance in manifests, cache keys of pipeline runs)."""
from __future__ import annotations

import hashlib


def sha256_of(path: str) -> str:
    """The hex SHA-256 of the file at `path`, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as source:
        for block in iter(lambda: source.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
