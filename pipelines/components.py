"""The pipeline's KFP components: lightweight Python components on the shardflow image.

Each function only moves values between KFP artifacts and `step_bodies` (the code that does the
work). KFP ships a component's source alone to the pod, so every import is inside the function.
`make_components(image)` turns them into components for one image (the compile-time choice): one
per row of the step table (steps.py), the function named like the step.
Large outputs (examples, transformed examples, the model) go to `output_location(artifact)`: the
artifact's URI when the pipeline root is s3:// or gs://, its local path otherwise (`shardflow run`,
minio://); small reports always go to `.path`, which the launcher uploads.

    ops = make_components("registry.example.com/ml/shardflow@sha256:...")
    examples_task = ops.example_gen(index=..., data_root=..., ...)
"""
# No `from __future__ import annotations`: KFP reads these annotations as types at decoration time.
from dataclasses import make_dataclass
from typing import Callable, List, NamedTuple

from .kfp_sdk import dsl  # first: it imports kfp without its REST client

from .steps import STEPS  # noqa: E402

HTML, Artifact, ClassificationMetrics, Dataset, Input, Markdown, Metrics, Model, Output = (
    dsl.HTML, dsl.Artifact, dsl.ClassificationMetrics, dsl.Dataset, dsl.Input, dsl.Markdown, dsl.Metrics, dsl.Model,
    dsl.Output)


def fingerprint(index: List[str], data_root: str) -> str:
    from shardflow.pipelines import step_bodies
    from shardflow.pipelines.step_errors import reported_step

    with reported_step():
        return step_bodies.data_fingerprint(index, data_root)


def example_gen(index: List[str], data_root: str, data_fingerprint: str, flags: dict, options: List[str],
                beam_args: List[str], examples: Output[Dataset]):
    from shardflow.pipelines import step_bodies
    from shardflow.pipelines.locations import output_location
    from shardflow.pipelines.step_errors import reported_step

    with reported_step():
        summary = step_bodies.example_gen(index, data_root, flags, options, beam_args, output_location(examples))
    examples.metadata.update({"fingerprint": data_fingerprint, **summary})


def validate(examples: Input[Dataset], flags: dict, options: List[str], report: Output[Markdown],
             report_html: Output[HTML]):
    from shardflow.pipelines import step_bodies
    from shardflow.pipelines.step_errors import reported_step

    workdir = report.path + ".d"
    report_html.uri += ".html"  # a page a browser opens as one (KFP uploads the artifact at its new URI)
    try:
        with reported_step():
            step_bodies.validate(examples.path, workdir, flags, options)
    finally:  # the readable report is kept whether or not the data passed
        step_bodies.copy_validation_report(workdir, report.path, report_html.path)


def transform(examples: Input[Dataset], flags: dict, options: List[str], beam_args: List[str],
              transformed: Output[Dataset]):
    from shardflow.pipelines import step_bodies
    from shardflow.pipelines.locations import output_location
    from shardflow.pipelines.step_errors import reported_step

    with reported_step():
        transformed.metadata.update(step_bodies.transform(examples.path, flags, options, beam_args,
                                                          output_location(transformed)))


def tune(transformed: Input[Dataset], flags: dict, options: List[str], train_options: List[str], accelerator_type: str,
         accelerator_limit: int, hyperparameters: Output[Artifact]):
    from shardflow.pipelines import step_bodies
    from shardflow.pipelines.locations import output_location
    from shardflow.pipelines.step_errors import reported_step

    with reported_step():
        best = step_bodies.tune(transformed.path, flags, options, train_options, output_location(hyperparameters))
    hyperparameters.metadata.update({"searched": bool(best.get("values")) or best.get("searched", True),
                                     "values": best.get("values", {}), "objective": best.get("objective") or "",
                                     "score": best.get("score") or 0.0, "trials": len(best.get("trials", [])),
                                     "accelerators_requested": f"{accelerator_limit} x {accelerator_type}"})


def train(transformed: Input[Dataset], hyperparameters: Input[Artifact], flags: dict, options: List[str],
          warm_start: str, serving_dir: str, accelerator_type: str, accelerator_limit: int, model: Output[Model],
          training_metrics: Output[Metrics], training_page: Output[HTML]):
    from shardflow.pipelines import step_bodies
    from shardflow.pipelines.locations import output_location
    from shardflow.pipelines.step_errors import reported_step
    from shardflow.pipelines.ui_pages import page_from_files

    with reported_step():
        start_from = step_bodies.resolve_model_reference(warm_start, serving_dir)
        summary = step_bodies.train(transformed.path, flags, options, start_from, output_location(model),
                                    hyperparameters.path)
    model.metadata.update({"framework": "tensorflow", "warm_start": start_from, "strategy": summary["strategy"],
                           "accelerators_requested": f"{accelerator_limit} x {accelerator_type}",
                           "optimizer_steps": summary["optimizer_steps"],
                           "tensorboard": summary.get("tensorboard", "")})  # `tensorboard --logdir` it
    last = summary["history"][-1] if summary["history"] else {}
    for name, value in last.items():
        if name != "epoch" and isinstance(value, (int, float)):  # not the fine-tuning phase's name
            training_metrics.log_metric(name, float(value))
    training_metrics.log_metric("training_examples_per_second",
                                float(summary["input_report"]["training_examples_per_second"] or 0.0))
    training_page.uri += ".html"  # a page a browser opens as one (KFP uploads the artifact at its new URI)
    with open(training_page.path, "w") as page:  # curves and per-epoch table, shown by the KFP UI
        page.write(page_from_files("training", output_location(model)))


def evaluate(model: Input[Model], examples: Input[Dataset], baseline: str, serving_dir: str, flags: dict,
             options: List[str], accelerator_type: str, accelerator_limit: int,
             metrics: Output[Metrics], confusion: Output[ClassificationMetrics], evaluation: Output[Dataset],
             evaluation_page: Output[HTML]) -> NamedTuple("Blessing", [("blessed", bool)]):
    import os
    from collections import namedtuple

    from shardflow.pipelines import step_bodies
    from shardflow.pipelines.step_errors import reported_step
    from shardflow.pipelines.ui_pages import page_from_files

    with reported_step():
        candidate = os.path.join(model.path, "model")
        reference = step_bodies.resolve_model_reference(baseline, serving_dir, candidate)
        result = step_bodies.evaluate(candidate, examples.path, reference, flags, options, evaluation.path)
    overall = result["metrics"]["overall"]
    for name, value in overall.items():
        if isinstance(value, (int, float)):
            metrics.log_metric(name, float(value))
    matrix = overall.get("confusion_matrix") or result["metrics"].get("confusion_matrix")
    if matrix:
        confusion.log_confusion_matrix(result["metrics"].get("class_names") or [str(i) for i in range(len(matrix))],
                                       matrix)
    metrics.log_metric("blessed", float(result["blessing"]["blessed"]))
    evaluation_page.uri += ".html"
    with open(evaluation_page.path, "w") as page:  # confusion matrix, per-class and per-slice tables for the UI
        page.write(page_from_files("evaluation", evaluation.path))
    metrics.metadata["accelerators_requested"] = f"{accelerator_limit} x {accelerator_type}"
    metrics.metadata["baseline"] = reference
    return namedtuple("Blessing", ["blessed"])(bool(result["blessing"]["blessed"]))


def infra_validate(model: Input[Model], evaluation: Input[Dataset], flags: dict, options: List[str],
                   infra: Output[Artifact]) -> NamedTuple("InfraBlessing", [("infra_blessed", bool)]):
    import os
    from collections import namedtuple

    from shardflow.pipelines import step_bodies
    from shardflow.pipelines.step_errors import reported_step

    with reported_step():
        report = step_bodies.infra_validate(os.path.join(model.path, "model"), evaluation.path, flags, options,
                                            infra.path)
    infra.metadata.update({"infra_blessed": bool(report.get("blessed")), "reasons": report.get("reasons", []),
                           "load_seconds": report.get("load_seconds") or 0.0})
    for row in report.get("latency", []):  # shown by the KFP UI beside the artifact
        infra.metadata[f"latency_ms_{row.get('signature')}_batch_{row.get('batch_size')}"] = {
            "p50": row.get("p50_ms"), "p99": row.get("p99_ms")}
    return namedtuple("InfraBlessing", ["infra_blessed"])(bool(report.get("blessed")))


def push(model: Input[Model], evaluation: Input[Dataset], infra: Input[Artifact], serving_dir: str,
         data_fingerprint: str, pushed: Output[Model]) -> str:
    import os

    from shardflow.pipelines import step_bodies
    from shardflow.pipelines.step_errors import reported_step

    with reported_step():
        version_dir = step_bodies.push(os.path.join(model.path, "model"), evaluation.path, infra.path, serving_dir,
                                       {"source": model.uri, "data_fingerprint": data_fingerprint})
    pushed.metadata.update({"serving_path": version_dir})
    with open(pushed.path, "w") as note:
        note.write(version_dir + "\n")
    return version_dir


def predict(model_dir: str, index: str, data_root: str, default_data_root: str, flags: dict, options: List[str],
            beam_args: List[str], predictions: Output[Dataset]):
    from shardflow.pipelines import step_bodies
    from shardflow.pipelines.locations import output_location
    from shardflow.pipelines.step_errors import reported_step

    with reported_step():
        summary = step_bodies.predict(model_dir, index, data_root or default_data_root, flags, options,
                                      beam_args, output_location(predictions))
    predictions.metadata.update({key: summary[key] for key in ("rows", "predicted", "rejected", "model")
                                 if key in summary})


def run_report(examples: Input[Dataset], model: Input[Model], evaluation: Input[Dataset], infra: Input[Artifact],
               report: Output[Markdown]):
    from shardflow.pipelines.run_report import report_from_outputs

    with open(report.path, "w") as out:
        out.write(report_from_outputs(examples.path, model.path, evaluation.path, infra.path))


def command_step(step: str, flags: dict, options: List[str], input_flags: List[str], output: Output[Artifact],
                 input_1: Input[Artifact] = None, input_2: Input[Artifact] = None, input_3: Input[Artifact] = None):
    """The KFP function of every step wired from its row alone (steps with `consumes`: step_spec.py), renamed
    after the step by make_components; `input_flags` name the command's flag of each input, in order."""
    from shardflow.pipelines import step_bodies
    from shardflow.pipelines.locations import output_location
    from shardflow.pipelines.step_errors import reported_step
    from shardflow.pipelines.steps import BY_NAME  # a registered step's row, and its command, in this process

    row = BY_NAME[step]
    given = [artifact.path for artifact in (input_1, input_2, input_3) if artifact is not None]
    with reported_step():
        step_bodies.command_step(row.command.name, row.consumed_argv(given, output_location(output)), flags, options)


def record_outcome(record_dir: str, status: dsl.PipelineTaskFinalStatus) -> str:
    from shardflow.pipelines import step_bodies

    message = status.error_message if status.state != "SUCCEEDED" else ""
    return step_bodies.record_outcome(record_dir, status.pipeline_job_resource_name, status.state,
                                      status.pipeline_task_name, message)


# One field per step of the table (steps.py), named after its component function: `ops.example_gen(...)`.
Components = make_dataclass("Components", [(step.component, Callable) for step in STEPS], frozen=True)


def make_components(image: str) -> Components:
    """Every step as a KFP component whose container is `image` (the shardflow image of k8s/Dockerfile)."""
    # The image already holds kfp (the lock): no pip install when a step starts.
    make = dsl.component(base_image=image, install_kfp_package=False)
    return Components(**{step.component: _row_wired(make(command_step), step.name) if step.consumes
                         else make(globals()[step.component]) for step in STEPS})


def _row_wired(component: Callable, name: str) -> Callable:
    """command_step as the component of one row-wired step: named after it, so its task is (KFP names a task
    after its component)."""
    component.component_spec.name = component.name = name
    return component
