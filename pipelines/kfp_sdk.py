"""kfp's SDK as compiling uses it: `kfp.dsl` and `kfp.compiler`, imported without `kfp.client`.

    from .kfp_sdk import compiler, dsl

`import kfp` runs kfp/__init__.py, which imports `kfp.client` (the REST client of a cluster's API)
unless `_KFP_RUNTIME` is "true", as it is in a step's container. kfp.client imports `kubernetes`, whose
dynamic client imports `kubernetes_validate` and jsonschema's format checkers when they are installed
(kubernetes-validate is a test dependency; rfc3987-syntax builds a grammar as it is imported). Measured
on 2 cores, `python -c "import kfp"`: 2.1–3.0 s with the REST client, 0.11 s with kfp.dsl and
kfp.compiler only. Every `shardflow run` and `shardflow compile` paid it before a step started.

So the package's own module runs with `_KFP_RUNTIME` set, as a container's launcher runs it, and the
variable is then put back: `kfp.dsl` itself is imported with its compile-time names (`dsl.pipeline`,
`dsl.component`, …), unless the process really is a step's runtime. `kfp.client` is imported by what
uses it (schedule.py, submit.py).
"""
from __future__ import annotations

import os
import sys


def _import_kfp_without_client() -> None:
    if "kfp" in sys.modules:  # imported already: by a step's runtime, or by a caller that wanted the client
        return
    before = os.environ.get("_KFP_RUNTIME")
    os.environ["_KFP_RUNTIME"] = "true"
    try:
        import kfp  # noqa: F401 (the package module only)
    finally:
        if before is None:
            del os.environ["_KFP_RUNTIME"]
        else:
            os.environ["_KFP_RUNTIME"] = before


_import_kfp_without_client()

from kfp import compiler, dsl  # noqa: E402 (after the package module, above)

__all__ = ["compiler", "dsl"]
