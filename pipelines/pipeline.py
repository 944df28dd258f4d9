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
again on the new artifacts. The Evaluator, the report and Push always run on a cluster: the served
baseline may have changed, and KFP's key would hold `baseline_model`'s word (`latest`), not the served
model (`shardflow run` keys the Evaluator by the served model itself: local_cache.RESOLVED). Push runs
only when the Evaluator blessed the model and the infra validation loaded and called it in a
TensorFlow-only process (INFRA_BLESSED); with `predict_index`, the pushed model then labels
that CSV's files (`shardflow predict`, paths relative to `predict_data_root`, else `data_root`). With ClusterOptions
(kfp-kubernetes, in the IR's platform spec): PVC mounts on every step, and node selectors and
tolerations (a GPU node pool) on the Tuner, Trainer and Evaluator only.
"""
# No `from __future__ import annotations`: KFP reads the parameter annotations as types.

import inspect
from types import SimpleNamespace
from typing import Any, Callable, List


from .cluster_options import ClusterOptions
from .components import Components, make_components
from .kfp_sdk import dsl
from .names import PIPELINE_NAME
from .step_parameters import step_parameters
from .steps import BY_NAME, STEPS

_REQUIRED = inspect.Parameter.empty
# The parameters the wiring itself reads (name, type, default); every step's own come from the step table
# and the commands' exposed flags (step_parameters.py).
_WIRING_PARAMETERS = (
    ("index", List[str], _REQUIRED), ("data_root", str, _REQUIRED), ("serving_dir", str, _REQUIRED),
    ("run_record_dir", str, _REQUIRED), ("beam_args", List[str], []), ("warm_start", str, "latest"),
    ("baseline_model", str, "latest"), ("trainer_accelerator_type", str, "nvidia.com/gpu"),
    ("trainer_accelerator_limit", int, 1), ("tuner_accelerator_limit", int, 0),
    ("evaluator_accelerator_type", str, "nvidia.com/gpu"), ("evaluator_accelerator_limit", int, 0),
    ("predict_index", str, ""), ("predict_data_root", str, ""),
)
SIGNATURE = inspect.Signature([
    inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default, annotation=kind)
    for name, kind, default in (*_WIRING_PARAMETERS, *((p.name, List[str] if p.kind is list else p.kind, p.default)
                                                       for p in step_parameters()))])

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
        for name, value in cluster.env:
            task.set_env_variable(name, value)
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

    def shardflow_pipeline(*args: Any) -> None:
        # KFP passes each parameter, positionally, as an argument of its own; the wiring reads them as one namespace.
        params = SimpleNamespace(**SIGNATURE.bind(*args).arguments)
        configured = _step_settings(cluster, no_cache, params)
        exit_task = configured(ops.record_outcome(record_dir=params.run_record_dir))
        with dsl.ExitHandler(exit_task, name="shardflow-run"):
            _wire_row_steps(ops, configured, params, _wire_steps(ops, configured, params))

    shardflow_pipeline.__signature__ = SIGNATURE  # what KFP reads the pipeline's parameters from
    return dsl.pipeline(name=PIPELINE_NAME, description="CSV-indexed files → sharded TFRecords → validated → "
                        "transformed → trained → evaluated → pushed when blessed")(shardflow_pipeline)


def _flags(params: SimpleNamespace, step: str) -> dict:
    """A step's exposed flags' parameters, by name: one STRUCT input whose values KFP resolves at run time."""
    return {flag.param: getattr(params, flag.param) for flag in BY_NAME[step].exposed}


def _options(params: SimpleNamespace, step: str) -> Any:
    return getattr(params, BY_NAME[step].options.param)


def _wire_row_steps(ops: Components, configured: StepSettings, params: SimpleNamespace, produced: dict,
                    after_push: bool = False) -> None:
    """The steps wired from their rows alone (`consumes`, `produces`: step_spec.py), in the table's order, each
    after the steps whose artifacts it takes; `produced`: (step, artifact) → that output, theirs added.
    `after_push`: the ones taking Push's model (KServe's deploy: pipelines/deploy_step.py), wired inside Push's
    conditions (a task outside them cannot take its output); the others otherwise."""
    for step in (step for step in STEPS if step.consumes and after_push == _takes_push(step)):
        inputs = {f"input_{i}": produced[(c.step, c.artifact)] for i, c in enumerate(step.consumes, 1)}
        task = configured(getattr(ops, step.component)(step=step.name, flags=_flags(params, step.name),
                                                       options=_options(params, step.name),
                                                       input_flags=[c.flag for c in step.consumes], **inputs))
        produced[(step.name, step.produces)] = task.outputs["output"]


def _takes_push(step: Any) -> bool:
    return any(consumed.step == "push" for consumed in step.consumes)


def _wire_steps(ops: Components, configured: StepSettings, params: SimpleNamespace) -> dict:
    """The wiring inside the exit handler, from the pipeline's parameters (`params`). Each task's resources,
    caching and retries are its row's in the step table (`configured`). Returns the artifacts a row-wired
    step may take, by (step, artifact)."""
    data = configured(ops.fingerprint(index=params.index, data_root=params.data_root))
    data.set_display_name("data-fingerprint")
    examples = configured(ops.example_gen(index=params.index, data_root=params.data_root, data_fingerprint=data.output,
                                          flags=_flags(params, "example-gen"), options=_options(params, "example-gen"),
                                          beam_args=params.beam_args))
    checked = configured(ops.validate(examples=examples.outputs["examples"], flags=_flags(params, "validate"),
                                      options=_options(params, "validate")))
    transformed = configured(ops.transform(examples=examples.outputs["examples"], flags=_flags(params, "transform"),
                                           options=_options(params, "transform"),
                                           beam_args=params.beam_args).after(checked))
    # Without tune_options the step only records that no search ran: the Trainer keeps its options.
    # Its trials train on the Trainer's pool, with tuner_accelerator_limit GPUs (default 0: no search asked).
    tuned = configured(ops.tune(transformed=transformed.outputs["transformed"], flags=_flags(params, "tune"),
                                options=_options(params, "tune"), train_options=_options(params, "train"),
                                accelerator_type=params.trainer_accelerator_type,
                                accelerator_limit=params.tuner_accelerator_limit))
    trained = configured(ops.train(transformed=transformed.outputs["transformed"],
                                   hyperparameters=tuned.outputs["hyperparameters"], flags=_flags(params, "train"),
                                   options=_options(params, "train"),
                                   warm_start=params.warm_start, serving_dir=params.serving_dir,
                                   # Also inputs, not only resource settings: KFP 2.13 passes a parameter into the
                                   # exit handler's sub-DAG only when a task there takes it as an input.
                                   accelerator_type=params.trainer_accelerator_type,
                                   accelerator_limit=params.trainer_accelerator_limit))
    scored = configured(ops.evaluate(model=trained.outputs["model"], examples=examples.outputs["examples"],
                                     baseline=params.baseline_model, serving_dir=params.serving_dir,
                                     flags=_flags(params, "evaluate"), options=_options(params, "evaluate"),
                                     accelerator_type=params.evaluator_accelerator_type,
                                     accelerator_limit=params.evaluator_accelerator_limit))
    # As TFX's InfraValidator, beside the Evaluator's verdict: the model loaded and called in a TensorFlow-only
    # process, as a serving container would; its report and warm-up file go to Push.
    served = configured(ops.infra_validate(model=trained.outputs["model"], evaluation=scored.outputs["evaluation"],
                                           flags=_flags(params, "infra-validate"),
                                           options=_options(params, "infra-validate")))
    configured(ops.run_report(examples=examples.outputs["examples"], model=trained.outputs["model"],
                              evaluation=scored.outputs["evaluation"], infra=served.outputs["infra"]))
    produced = {("example-gen", "examples"): examples.outputs["examples"],
                ("transform", "transformed"): transformed.outputs["transformed"], ("train", "model"): trained.outputs[
                    "model"], ("evaluate", "evaluation"): scored.outputs["evaluation"],
                ("infra-validate", "infra"): served.outputs["infra"]}
    with dsl.If(scored.outputs["blessed"] == True, name="blessed"):  # noqa: E712 (a KFP condition, not Python)
        with dsl.If(served.outputs["infra_blessed"] == True, name="infra-blessed"):  # noqa: E712
            pushed = configured(ops.push(model=trained.outputs["model"], evaluation=scored.outputs["evaluation"],
                                         infra=served.outputs["infra"], serving_dir=params.serving_dir,
                                         data_fingerprint=data.output))
            with dsl.If(params.predict_index != "", name="predict"):
                configured(ops.predict(model_dir=pushed.outputs["Output"], index=params.predict_index,
                                       data_root=params.predict_data_root, default_data_root=params.data_root,
                                       flags=_flags(params, "predict"), options=_options(params, "predict"),
                                       beam_args=params.beam_args))
            _wire_row_steps(ops, configured, params, {**produced, ("push", "pushed"): pushed.outputs["pushed"]}, True)
    return produced
