"""Storage chooses a scheme's backend in one place: the registry, core/filesystems/__init__.py.

On the import graph of test_architecture (parsed, nothing imported):
- a scheme's class (`shardflow.core.filesystems.local`, `.s3`, `.gcs`, ...) is imported only inside the
  package, whose `__init__` registers it: nothing else can reach a backend but through `backend_for`;
- the registry is imported only by `storage` (every read and write) and `cloud_env` (TensorFlow's side);
- Beam's object-store clients (`S3IO`, `GcsIO`) are named nowhere else in the package, and no module but
  the backends and core/uri.py (which spells schemes) tests for a scheme by its name (`"s3"`, `'gs'`).
Each rule is checked on a planted offender too, so that it can fail.
"""
from __future__ import annotations

import re

import test_architecture as arrows  # the real import graph, parsed once, and its helpers

REGISTRY = "shardflow.core.filesystems"
REGISTRY_USERS = {"shardflow.core.storage", "shardflow.core.cloud_env"}
CLIENT_NAMES = re.compile(r"\b(S3IO|GcsIO|s3io|gcsio)\b")
SCHEME_NAMES = re.compile(r"""["'](s3|gs)["']""")  # a scheme as a string of its own: a branch on it


def backend_offenders(graph: dict[str, set[str]]) -> list[str]:
    """Edges into a scheme module from outside the package, and into the registry from outside its users."""
    def crosses(m: str, t: str) -> bool:
        if arrows.within(m, REGISTRY):
            return False
        return t.startswith(REGISTRY + ".") or (t == REGISTRY and m not in REGISTRY_USERS)
    return arrows._edges(graph, crosses)


def client_offenders(sources: dict[str, str]) -> list[str]:
    """Modules outside the backends that name a client, or (core/uri.py apart) a scheme."""
    def offends(module: str, text: str) -> bool:
        return bool(CLIENT_NAMES.search(text) or (module != "shardflow.core.uri" and SCHEME_NAMES.search(text)))
    return sorted(m for m, text in sources.items() if not arrows.within(m, REGISTRY) and offends(m, text))


def _sources() -> dict[str, str]:
    modules = arrows.graph_tools.package_modules()
    return {m: path.read_text() for m, path in modules.items() if arrows.within(m, "shardflow")}


def test_backends_are_reached_only_through_the_registry() -> None:
    graph, _ = arrows.real()
    assert {f"{REGISTRY}.s3", f"{REGISTRY}.gcs", f"{REGISTRY}.local"} <= graph[REGISTRY]
    assert REGISTRY in graph["shardflow.core.storage"]
    assert backend_offenders(graph) == []


def test_only_the_backends_name_beams_clients_or_test_a_scheme() -> None:
    sources = _sources()
    assert CLIENT_NAMES.search(sources[f"{REGISTRY}.s3"]) and CLIENT_NAMES.search(sources[f"{REGISTRY}.gcs"])
    assert client_offenders(sources) == []


def test_a_planted_bypass_is_caught() -> None:
    graph, _ = arrows.real()
    graph["shardflow.core.output_dir"].add(f"{REGISTRY}.s3")
    graph["shardflow.trainer.export"].add(REGISTRY)
    assert backend_offenders(graph) == [f"shardflow.core.output_dir → {REGISTRY}.s3",
                                        f"shardflow.trainer.export → {REGISTRY}"]
    sources = _sources()
    sources["shardflow.core.output_dir"] += "\nfrom apache_beam.io.aws.s3io import S3IO\n"
    sources["shardflow.example_gen.rows"] += "\nif scheme(location) == 'gs':\n    pass\n"
    assert client_offenders(sources) == ["shardflow.core.output_dir", "shardflow.example_gen.rows"]
