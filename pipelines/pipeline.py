"""The shardflow pipeline: ExampleGen → data validation → Transform → Trainer → Evaluator → Push.

One pipeline function, compiled for a Kubeflow cluster (`shardflow compile`) and run on this machine
with kfp.local (`shardflow run`). It only wires components; every step's options are the CLI flags
of the matching `shardflow` command, so a pipeline run and a manual run behave the same.

    pipeline = build_pipeline("registry.example.com/ml/shardflow@sha256:...",
                              cluster_options(mount_pvc=["data=/data"], node_selector=["pool=gpu"]))
    kfp.compiler.Compiler().compile(pipeline, "pipeline.yaml")

Cluster settings in the IR: CPU/memory requests on every step; accelerators for the Trainer (and
optionally the Evaluator) from pipeline parameters; retries with backoff on ExampleGen and Transform;
caching on, except for the data fingerprint step, whose output (a hash of the index CSVs) is an
input of ExampleGen, so a changed CSV never reuses a stale cached ExampleGen. With ClusterOptions
(kfp-kubernetes, in the IR's platform spec): PVC mounts on every step, and node selectors and
tolerations (a GPU node pool) on the Trainer and Evaluator only.
"""
# No `from __future__ import annotations`: KFP reads the parameter annotations as types.

from typing import Callable, List

from kfp import dsl

from ..evaluator.config import DEFAULT_THRESHOLDS
from .cluster_options import ClusterOptions
from .components import Components, make_components

PIPELINE_NAME = "shardflow"
RETRY = {"num_retries": 2, "backoff_duration": "60s", "backoff_factor": 2.0, "backoff_max_duration": "600s"}


Place = Callable[..., dsl.PipelineTask]  # (task, cpu, memory, accelerated=False) -> the task


def _placement(cluster: ClusterOptions) -> Place:
    """Resources on a task, the PVC mounts, and the GPU pool's selector/tolerations when `accelerated`."""
    def place(task: dsl.PipelineTask, cpu: str, memory: str, accelerated: bool = False) -> dsl.PipelineTask:
        task.set_cpu_request(cpu).set_memory_request(memory).set_cpu_limit(cpu).set_memory_limit(memory)
        if cluster.is_empty():
            return task
        from kfp import kubernetes  # kfp-kubernetes: needed only when compiling for a cluster with these

        for mount in cluster.pvc_mounts:
            kubernetes.mount_pvc(task, pvc_name=mount.claim, mount_path=mount.path)
        for key, value in cluster.node_selector if accelerated else ():
            kubernetes.add_node_selector(task, label_key=key, label_value=value)
        for toleration in cluster.tolerations if accelerated else ():
            kubernetes.add_toleration(task, key=toleration.key, value=toleration.value, effect=toleration.effect,
                                      operator="Exists" if toleration.value is None else "Equal")
        return task
    return place


def build_pipeline(image: str, cluster: ClusterOptions = ClusterOptions()) -> Callable:
    """The pipeline function; every step runs `image` (the shardflow image, see k8s/Dockerfile)."""
    ops = make_components(image)
    place = _placement(cluster)

    @dsl.pipeline(name=PIPELINE_NAME, description="CSV-indexed files → sharded TFRecords → validated → "
                                                  "transformed → trained → evaluated → pushed when blessed")
    def shardflow_pipeline(
        index: List[str], data_root: str, serving_dir: str, run_record_dir: str,
        example_gen_options: List[str] = [], beam_args: List[str] = [], drift_threshold: float = 0.1,
        validation_warn_only: bool = False, validation_schema: str = "", transform_options: List[str] = [],
        train_options: List[str] = ["--epochs", "10"], warm_start: str = "latest",
        eval_thresholds: List[str] = [DEFAULT_THRESHOLDS["classification"]], max_regressions: List[str] = [],
        slice_by: List[str] = [], baseline_model: str = "latest",
        trainer_accelerator_type: str = "nvidia.com/gpu", trainer_accelerator_limit: int = 1,
        evaluator_accelerator_type: str = "nvidia.com/gpu", evaluator_accelerator_limit: int = 0,
    ) -> None:
        exit_task = place(ops.record_outcome(record_dir=run_record_dir), "250m", "512Mi").set_caching_options(False)
        with dsl.ExitHandler(exit_task, name="shardflow-run"):
            _steps(ops, place, locals())

    return shardflow_pipeline


def _steps(ops: Components, place: Place, p: dict) -> None:
    """The wiring inside the exit handler; `p` holds the pipeline parameters."""
    data = ops.fingerprint(index=p["index"], data_root=p["data_root"]).set_caching_options(False)
    place(data, "500m", "1Gi").set_display_name("data-fingerprint")
    examples = ops.example_gen(index=p["index"], data_root=p["data_root"], data_fingerprint=data.output,
                               options=p["example_gen_options"], beam_args=p["beam_args"])
    place(examples, "2", "8Gi").set_retry(**RETRY).set_caching_options(True)
    checked = ops.validate(examples=examples.outputs["examples"], drift_threshold=p["drift_threshold"],
                           warn_only=p["validation_warn_only"], schema=p["validation_schema"])
    place(checked, "1", "4Gi").set_caching_options(True)
    transformed = ops.transform(examples=examples.outputs["examples"], options=p["transform_options"],
                                beam_args=p["beam_args"]).after(checked)
    place(transformed, "2", "8Gi").set_retry(**RETRY).set_caching_options(True)
    trained = ops.train(transformed=transformed.outputs["transformed"], options=p["train_options"],
                        warm_start=p["warm_start"], serving_dir=p["serving_dir"],
                        # Also inputs, not only resource settings: KFP 2.13 passes a parameter into the exit
                        # handler's sub-DAG only when a task there takes it as an input.
                        accelerator_type=p["trainer_accelerator_type"], accelerator_limit=p["trainer_accelerator_limit"])
    place(trained, "4", "16Gi", accelerated=True).set_caching_options(True)
    trained.set_accelerator_type(p["trainer_accelerator_type"]).set_accelerator_limit(p["trainer_accelerator_limit"])
    scored = ops.evaluate(model=trained.outputs["model"], examples=examples.outputs["examples"],
                          baseline=p["baseline_model"], serving_dir=p["serving_dir"],
                          thresholds=p["eval_thresholds"], max_regressions=p["max_regressions"],
                          slice_by=p["slice_by"], accelerator_type=p["evaluator_accelerator_type"],
                          accelerator_limit=p["evaluator_accelerator_limit"])
    place(scored, "2", "8Gi", accelerated=True).set_caching_options(False)  # the baseline may have changed since
    scored.set_accelerator_type(p["evaluator_accelerator_type"]).set_accelerator_limit(p["evaluator_accelerator_limit"])
    report = ops.run_report(examples=examples.outputs["examples"], model=trained.outputs["model"],
                            evaluation=scored.outputs["evaluation"])
    place(report, "500m", "1Gi").set_caching_options(False)
    with dsl.If(scored.outputs["blessed"] == True, name="blessed"):  # noqa: E712 (a KFP condition, not Python)
        pushed = ops.push(model=trained.outputs["model"], serving_dir=p["serving_dir"], data_fingerprint=data.output)
        place(pushed, "500m", "1Gi").set_caching_options(False)
