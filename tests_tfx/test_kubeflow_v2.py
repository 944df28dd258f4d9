"""The same pipeline compiled by TFX's KubeflowV2DagRunner to a KFP v2 IR (JSON), offline."""
from __future__ import annotations

import json
from pathlib import Path

import digits_pipeline

IMAGE = "registry.example.com/ml/shardflow-tfx:1.16"
COMPONENTS = ["Evaluator", "ExampleValidator", "ImageExampleGen", "Pusher", "SchemaGen", "StatisticsGen",
              "Trainer", "Transform"]


def _compile(tmp_path: Path) -> dict:
    from tfx.orchestration.kubeflow.v2 import kubeflow_v2_dag_runner as v2

    # The module file is packaged into the pipeline root at compile time: a local root here.
    pipeline = digits_pipeline.create_pipeline(str(tmp_path / "root"), "gs://bucket/digits",
                                               str(Path(__file__).with_name("digits_module.py")),
                                               "gs://bucket/serving", None,
                                               example_gen_beam_args=["--direct_num_workers=2"])
    runner = v2.KubeflowV2DagRunner(config=v2.KubeflowV2DagRunnerConfig(default_image=IMAGE),
                                    output_dir=str(tmp_path), output_filename="pipeline.json")
    runner.run(pipeline, write_out=True)
    return json.loads((tmp_path / "pipeline.json").read_text())["pipelineSpec"]


def _constant(task: dict, name: str) -> str:
    return task["inputs"]["parameters"][name]["runtimeValue"]["constantValue"]["stringValue"]


def test_compiles_to_an_ir_that_runs_shardflows_executor(tmp_path: Path):
    spec = _compile(tmp_path)
    assert spec["pipelineInfo"]["name"] == digits_pipeline.NAME
    assert sorted(spec["root"]["dag"]["tasks"]) == sorted(spec["components"]) == COMPONENTS
    container = spec["deploymentSpec"]["executors"]["ImageExampleGen_executor"]["container"]
    assert container["image"] == IMAGE
    args = container["args"]
    assert args[args.index("--executor_class_path") + 1] == "shardflow.tfx.executor.Executor"
    assert "--direct_num_workers=2" in args  # with_beam_pipeline_args travels with the executor

    task = spec["root"]["dag"]["tasks"]["ImageExampleGen"]
    assert json.loads(_constant(task, "index")) == {"train": "gs://bucket/digits/train.csv",
                                                    "eval": "gs://bucket/digits/eval.csv"}
    assert _constant(task, "data_root") == "gs://bucket/digits" and json.loads(_constant(task, "options")) == []
    schema = spec["components"]["ImageExampleGen"]["outputDefinitions"]["artifacts"]["examples"]["artifactType"]
    assert schema["instanceSchema"].startswith("title: tfx.Examples")
    for consumer in ("StatisticsGen", "Transform", "Evaluator"):
        source = spec["root"]["dag"]["tasks"][consumer]["inputs"]["artifacts"]["examples"]["taskOutputArtifact"]
        assert source == {"outputArtifactKey": "examples", "producerTask": "ImageExampleGen"}
