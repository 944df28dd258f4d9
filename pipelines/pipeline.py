"""The shardflow pipeline: ExampleGen → validation → Transform → (Tuner) → Trainer → Evaluator → infra
validation → Push → (batch prediction).

One pipeline function, compiled for a Kubeflow cluster (`shardflow compile`) and run on this machine
with the local runner (`shardflow run`). It only wires components; every step's options are the CLI flags
of the matching `shardflow` command, so a pipeline run and a manual run behave the same.

    pipeline = build_pipeline("registry.example.com/ml/shardflow@sha256:...",
                              cluster_options(mount_pvc=["data=/data"], node_selector=["pool=gpu"]))
    kfp.compiler.Compiler().compile(pipeline, "pipeline.yaml")

Cluster settings in the IR, each step's from its row in the step table (steps.py): CPU/memory requests
on every step; accelerators for the Tuner, the Trainer and the Evaluator from pipeline parameters; retries
with backoff on ExampleGen and Transform; caching on ExampleGen, validation, Transform, the Tuner, the
Trainer and infra validation (`no_cache` turns it off per step).
The data fingerprint step is never cached: its output (a hash of the index CSVs) is an input of
ExampleGen, so a changed CSV never reuses a stale cached ExampleGen, and everything after it runs
again on the new artifacts. The Evaluator, the report and Push always run: the served baseline may
have changed. Push runs only when the Evaluator blessed the model and the infra validation loaded and
called it in a TensorFlow-only process (INFRA_BLESSED); with `predict_index`, the pushed model then labels
that CSV's files (`shardflow predict`, paths relative to `predict_data_root`, else `data_root`). With ClusterOptions
(kfp-kubernetes, in the IR's platform spec): PVC mounts on every step, and node selectors and
tolerations (a GPU node pool) on the Tuner, Trainer and Evaluator only.
"""
# No `from __future__ import annotations`: KFP reads the parameter annotations as types.

from types import SimpleNamespace
from typing import Callable, List


from ..evaluator.config import AUTO_TOLERANCE, DEFAULT_GATE_RULE, DEFAULT_THRESHOLDS
from .cluster_options import ClusterOptions
from .components import Components, make_components
from .kfp_sdk import dsl
from .names import PIPELINE_NAME
from .steps import BY_NAME

RETRY = {"num_retries": 2, "backoff_duration": "60s", "backoff_factor": 2.0, "backoff_max_duration": "600s"}


# Puts the step table's settings on a task and returns it: `examples = configured(ops.example_gen(...))`.
StepSettings = Callable[[dsl.PipelineTask], dsl.PipelineTask]


def _step_settings(cluster: ClusterOptions, no_cache: frozenset, params: SimpleNamespace) -> StepSettings:
    """The step table's settings on a task (steps.py): resources, caching, retries, accelerators from the
    pipeline's parameters (`params`); the PVC mounts, and the GPU pool's selector/tolerations for an accelerated step.

    Caching: whether KFP may reuse the task's earlier outputs (its cache key: the component, its
    parameters, its input artifacts), for a cacheable step that `no_cache` does not name.
    """
    def configured(task: dsl.PipelineTask) -> dsl.PipelineTask:
        step = BY_NAME[task.component_spec.name.replace("_", "-")]
        cpu, memory, accelerator = step.resources.cpu, step.resources.memory, step.resources.accelerator
        task.set_cpu_request(cpu).set_memory_request(memory).set_cpu_limit(cpu).set_memory_limit(memory)
        task.set_caching_options(step.cacheable and "all" not in no_cache and step.name not in no_cache)
        if step.retry:
            task.set_retry(**RETRY)
        if accelerator:
            task.set_accelerator_type(getattr(params, accelerator[0]))
            task.set_accelerator_limit(getattr(params, accelerator[1]))
        if cluster.is_empty():
            return task
        from kfp import kubernetes  # kfp-kubernetes: needed only when compiling for a cluster with these

        for mount in cluster.pvc_mounts:
            kubernetes.mount_pvc(task, pvc_name=mount.claim, mount_path=mount.path)
        for key, value in cluster.node_selector if accelerator else ():
            kubernetes.add_node_selector(task, label_key=key, label_value=value)
        for toleration in cluster.tolerations if accelerator else ():
            kubernetes.add_toleration(task, key=toleration.key, value=toleration.value, effect=toleration.effect,
                                      operator="Exists" if toleration.value is None else "Equal")
        return task
    return configured


def build_pipeline(image: str, cluster: ClusterOptions = ClusterOptions(), no_cache: frozenset = frozenset()) -> Callable:
    """The pipeline function; every step runs `image` (the shardflow image, see k8s/Dockerfile).

    `no_cache`: cacheable steps (local_cache.CACHEABLE_STEPS) compiled with caching off, or {"all"}.
    """
    ops = make_components(image)

    @dsl.pipeline(name=PIPELINE_NAME, description="CSV-indexed files → sharded TFRecords → validated → "
                                                  "transformed → trained → evaluated → pushed when blessed")
    def shardflow_pipeline(
        index: List[str], data_root: str, serving_dir: str, run_record_dir: str,
        example_gen_options: List[str] = [], beam_args: List[str] = [], drift_threshold: float = 0.1,
        validation_warn_only: bool = False, validation_schema: str = "", validation_options: List[str] = [],
        transform_options: List[str] = [],
        train_options: List[str] = ["--epochs", "10"], tune_options: List[str] = [], warm_start: str = "latest",
        eval_thresholds: List[str] = [DEFAULT_THRESHOLDS["classification"]], max_regressions: List[str] = [],
        slice_by: List[str] = [], baseline_model: str = "latest", regression_tolerance: str = AUTO_TOLERANCE,
        eval_gate: str = DEFAULT_GATE_RULE, bootstrap_resamples: int = 1000, bootstrap_seed: int = 0,
        trainer_accelerator_type: str = "nvidia.com/gpu", trainer_accelerator_limit: int = 1,
        tuner_accelerator_limit: int = 0,
        evaluator_accelerator_type: str = "nvidia.com/gpu", evaluator_accelerator_limit: int = 0,
        infra_validation_options: List[str] = [], predict_index: str = "", predict_data_root: str = "",
        predict_options: List[str] = [],
    ) -> None:
        # KFP passes each parameter as an argument of its own; the wiring reads them as one namespace,
        # taken first, while the function's locals are its parameters and nothing else.
        params = SimpleNamespace(**locals())
        configured = _step_settings(cluster, no_cache, params)
        exit_task = configured(ops.record_outcome(record_dir=run_record_dir))
        with dsl.ExitHandler(exit_task, name="shardflow-run"):
            _wire_steps(ops, configured, params)

    return shardflow_pipeline


def _wire_steps(ops: Components, configured: StepSettings, params: SimpleNamespace) -> None:
    """The wiring inside the exit handler, from the pipeline's parameters (`params`). Each task's resources,
    caching and retries are its row's in the step table (`configured`)."""
    data = configured(ops.fingerprint(index=params.index, data_root=params.data_root))
    data.set_display_name("data-fingerprint")
    examples = configured(ops.example_gen(index=params.index, data_root=params.data_root, data_fingerprint=data.output,
                                          options=params.example_gen_options, beam_args=params.beam_args))
    checked = configured(ops.validate(examples=examples.outputs["examples"], drift_threshold=params.drift_threshold,
                                      warn_only=params.validation_warn_only, schema=params.validation_schema,
                                      options=params.validation_options))
    transformed = configured(ops.transform(examples=examples.outputs["examples"], options=params.transform_options,
                                           beam_args=params.beam_args).after(checked))
    # Without tune_options the step only records that no search ran: the Trainer keeps its options.
    # Its trials train on the Trainer's pool, with tuner_accelerator_limit GPUs (default 0: no search asked).
    tuned = configured(ops.tune(transformed=transformed.outputs["transformed"], options=params.tune_options,
                                train_options=params.train_options, accelerator_type=params.trainer_accelerator_type,
                                accelerator_limit=params.tuner_accelerator_limit))
    trained = configured(ops.train(transformed=transformed.outputs["transformed"],
                                   hyperparameters=tuned.outputs["hyperparameters"], options=params.train_options,
                                   warm_start=params.warm_start, serving_dir=params.serving_dir,
                                   # Also inputs, not only resource settings: KFP 2.13 passes a parameter into the
                                   # exit handler's sub-DAG only when a task there takes it as an input.
                                   accelerator_type=params.trainer_accelerator_type,
                                   accelerator_limit=params.trainer_accelerator_limit))
    scored = configured(ops.evaluate(model=trained.outputs["model"], examples=examples.outputs["examples"],
                                     baseline=params.baseline_model, serving_dir=params.serving_dir,
                                     thresholds=params.eval_thresholds, max_regressions=params.max_regressions,
                                     regression_tolerance=params.regression_tolerance, slice_by=params.slice_by,
                                     gate=params.eval_gate, bootstrap_resamples=params.bootstrap_resamples,
                                     bootstrap_seed=params.bootstrap_seed,
                                     accelerator_type=params.evaluator_accelerator_type,
                                     accelerator_limit=params.evaluator_accelerator_limit))
    # As TFX's InfraValidator, beside the Evaluator's verdict: the model loaded and called in a TensorFlow-only
    # process, as a serving container would; its report and warm-up file go to Push.
    served = configured(ops.infra_validate(model=trained.outputs["model"], evaluation=scored.outputs["evaluation"],
                                           options=params.infra_validation_options))
    configured(ops.run_report(examples=examples.outputs["examples"], model=trained.outputs["model"],
                              evaluation=scored.outputs["evaluation"], infra=served.outputs["infra"]))
    with dsl.If(scored.outputs["blessed"] == True, name="blessed"):  # noqa: E712 (a KFP condition, not Python)
        with dsl.If(served.outputs["infra_blessed"] == True, name="infra-blessed"):  # noqa: E712
            pushed = configured(ops.push(model=trained.outputs["model"], evaluation=scored.outputs["evaluation"],
                                         infra=served.outputs["infra"], serving_dir=params.serving_dir,
                                         data_fingerprint=data.output))
            with dsl.If(params.predict_index != "", name="predict"):
                configured(ops.predict(model_dir=pushed.outputs["Output"], index=params.predict_index,
                                       data_root=params.predict_data_root, default_data_root=params.data_root,
                                       options=params.predict_options, beam_args=params.beam_args))
