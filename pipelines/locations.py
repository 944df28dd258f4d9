"""Where a pipeline step writes a large output artifact: straight to its remote URI, or to its local path.

KFP v2 gives each output artifact a URI under the pipeline root and a local path derived from it
(gs://B/k → /gcs/B/k, s3://B/k → /s3/B/k, minio://B/k → /minio/B/k; with `shardflow run` the path is
the URI). After the step, the launcher uploads whatever lies at the local path to the URI; when
nothing lies there it logs a warning and still records the artifact with its URI. So a large output
written straight to an s3:// or gs:// URI is neither staged on the pod's disk nor copied a second
time (details and source references: README, "The Kubeflow pipeline").

    step_bodies.train(transformed.path, options, warm_start, output_location(model))
"""
from __future__ import annotations

from typing import Protocol

from ..core.uri import REMOTE_SCHEMES, scheme


class ArtifactLike(Protocol):
    uri: str

    @property
    def path(self) -> str: ...


def output_location(artifact: ArtifactLike) -> str:
    """The artifact's URI when shardflow's storage layer writes its scheme (s3://, gs://), else its local
    path: `shardflow run`, and minio:// (KFP's default root), which only the launcher's upload can write."""
    return artifact.uri if scheme(artifact.uri) in REMOTE_SCHEMES else artifact.path
