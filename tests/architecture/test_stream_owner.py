"""One owner of reading records: every call of `TFRecordDataset` (by name or attribute) and of a `.shuffle(` method,
found with ast in every module of the package and the adapter (nothing imported), is in the stream module,
core/stream_read.py (docs/architecture.md, "Input stream"), so a second stream builder cannot be written unnoticed.
STREAM_EXEMPT names the one module that may, and why; benchmarks, which time other readers against ours, are not the
package. `test_a_planted_second_stream_builder_is_caught` plants one.

This rule reads calls, not imports; the import rules are test_architecture.py's, on the same parsed modules.
"""
from __future__ import annotations

import ast
from functools import lru_cache
from unittest import mock

import test_kfp_imports as graph_tools  # the package's modules, found as the import graph finds them
from test_architecture import ADAPTER, REPO

STREAM_MODULE = "shardflow.core.stream_read"
STREAM_EXEMPT = {  # module: why it reads records itself
    "shardflow.infra_validator.probe": "runs alone, as TF Serving would, in an interpreter that may import no "
                                       "shardflow; it replays the warm-up file of request values, not an output",
}
STREAM_CALLS = {"TFRecordDataset", "shuffle"}


def stream_calls(source: str) -> list[str]:
    """'line: name' of each call of TFRecordDataset or of a .shuffle( method in `source`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            function = node.func
            name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", None)
            if name in STREAM_CALLS and (name != "shuffle" or isinstance(function, ast.Attribute)):
                found.append(f"{node.lineno}: {name}")
    return found


def stream_offenders(sources: dict[str, str]) -> list[str]:
    return sorted(f"{module}:{call}" for module, source in sources.items()
                  if module != STREAM_MODULE and module not in STREAM_EXEMPT for call in stream_calls(source))


@lru_cache(maxsize=None)
def _sources() -> tuple[tuple[str, str], ...]:
    with mock.patch.dict(graph_tools.PACKAGE_DIRS, {ADAPTER: REPO / "tfx_adapter"}):
        return tuple((module, path.read_text()) for module, path in graph_tools.package_modules().items())


def test_only_the_stream_module_reads_or_shuffles_records() -> None:
    sources = dict(_sources())
    assert stream_offenders(sources) == [], "records read or shuffled outside core/input_stream.py"
    assert any(call.endswith("TFRecordDataset") for call in stream_calls(sources[STREAM_MODULE]))
    assert any(call.endswith("shuffle") for call in stream_calls(sources[STREAM_MODULE]))
    assert set(STREAM_EXEMPT) <= set(sources) and all(stream_calls(sources[m]) for m in STREAM_EXEMPT)


def test_a_planted_second_stream_builder_is_caught() -> None:
    sources = dict(_sources())
    sources["shardflow.trainer.input_pipeline"] += (
        "\ndef second(files):\n    records = tf.data.TFRecordDataset(files)\n    return records.shuffle(64)\n")
    sources["shardflow.evaluator.scorer"] += "\nfrom tensorflow.data import TFRecordDataset\nTFRecordDataset([])\n"
    offenders = stream_offenders(sources)
    assert len(offenders) == 3 and all(o.startswith(("shardflow.trainer.input_pipeline:",
                                                     "shardflow.evaluator.scorer:"))
                                       for o in offenders), offenders
    assert stream_calls("random.shuffle(rows)\nshuffle(rows)\n") == ["1: shuffle"]  # a method call, not a name
