"""ImageExampleGen's executor: shardflow's ExampleGen `run(config)` writing into the Examples artifact.

A BaseBeamExecutor, as TFX's own ExampleGen executors are, so `with_beam_pipeline_args(...)` on the
component or the pipeline reaches ExampleGen's Beam pipeline (runner, workers, Dataflow options).
"""
from __future__ import annotations

from typing import Any, Dict, List

from absl import logging
from tfx import types
from tfx.components.util import examples_utils
from tfx.dsl.components.base import base_beam_executor
from tfx.proto import example_gen_pb2
from tfx.types import artifact_utils

from shardflow.core.manifest import Manifest

from .options import decode, example_gen_config

EXAMPLES_KEY = "examples"
# TFX's name for "TFRecord files"; its readers take the compression from each file's suffix (.gz: GZIP).
FILE_FORMAT = "tfrecords_gzip"


class Executor(base_beam_executor.BaseBeamExecutor):
    """Translates the execution properties, runs shardflow's ExampleGen, describes the artifact."""

    def Do(self, input_dict: Dict[str, List[types.Artifact]], output_dict: Dict[str, List[types.Artifact]],
           exec_properties: Dict[str, Any]) -> None:
        from shardflow.example_gen import run  # Beam, TF and TFDV: loaded when the component runs

        self._log_startup(input_dict, output_dict, exec_properties)
        examples = artifact_utils.get_single_instance(output_dict[EXAMPLES_KEY])
        config = example_gen_config(decode(exec_properties["index"]), exec_properties["data_root"],
                                    decode(exec_properties.get("options") or "[]"), examples.uri,
                                    self._beam_pipeline_args)
        describe(examples, run(config, echo=logging.info))


def describe(examples: types.Artifact, manifest: Manifest) -> None:
    """What TFX's readers need (splits, payload and file format, span) and the run's counts for MLMD."""
    examples.split_names = artifact_utils.encode_split_names(list(manifest.splits))
    examples.span = 0  # what TFX's file-based ExampleGen records when the input has no span pattern
    examples_utils.set_payload_format(examples, example_gen_pb2.PayloadFormat.FORMAT_TF_EXAMPLE)
    examples_utils.set_file_format(examples, FILE_FORMAT)
    extra = manifest.extra
    for key in ("rows", "accepted", "rejected"):
        examples.set_int_custom_property(key, int(extra[key]))
    for split, info in manifest.splits.items():
        examples.set_int_custom_property(f"examples_{split}", info.num_examples)
        examples.set_int_custom_property(f"shards_{split}", len(info.shards))
    examples.set_int_custom_property("leaked_contents", int(extra["leakage"]["count"]))
    examples.set_string_custom_property("compression", manifest.compression or "NONE")
    examples.set_string_custom_property("runner", str(extra["runner"]))
    examples.set_string_custom_property("shardflow_version", str(extra["shardflow_version"]))
    # Kept beside Split-*/ in the artifact's folder: the manifest, rejects and leakage report.
    examples.set_string_custom_property("manifest", "manifest.json")
    examples.set_string_custom_property("rejects_file", str(extra["rejects_file"]))
