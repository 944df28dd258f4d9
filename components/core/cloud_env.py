"""One set of object-store settings, reaching Beam, TensorFlow and plain Python alike.

Users configure S3 the standard AWS way (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`,
`AWS_SECRET_ACCESS_KEY`, `AWS_DEFAULT_REGION`, `~/.aws`) and GCS with Application Default
Credentials. boto3 (Beam's S3 client) and google-cloud-storage read those themselves; TensorFlow
opens URIs through its own filesystems, which `enable_tensorflow_filesystems` prepares, each
scheme's way (its backend's `enable_tensorflow`: s3:// needs tensorflow-io and its variable names,
`filesystems.s3.tensorflow_s3_settings`; gs:// is built in), before TensorFlow first touches a URI.

>>> enable_tensorflow_filesystems(["/data/examples", "gs://bucket/examples"])  # nothing to do for these
"""
from __future__ import annotations

from typing import Iterable

from .filesystems import BACKENDS, backend_of_scheme
from .uri import scheme


def enable_tensorflow_filesystems(locations: Iterable[str]) -> None:
    """Makes TensorFlow able to open `locations` (s3:// registers tensorflow-io's plugin).

    Safe to call many times; cheap when nothing is remote. A scheme without a backend is left to
    TensorFlow, whose own error names it.
    """
    for name in sorted({scheme(str(location)) for location in locations}):
        if name in BACKENDS:
            backend_of_scheme(name).enable_tensorflow()
