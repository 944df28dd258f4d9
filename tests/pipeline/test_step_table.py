"""The step table (pipelines/steps.py) is what the rest reads: the compiled pipeline's tasks and resources,
the KFP components, the commands, the cache list, the option check's labels, the summary and the figures."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from shardflow.cli import build_parser
from shardflow.commands import COMMANDS
from shardflow.core.errors import ConfigError
from shardflow.pipelines import components
from shardflow.pipelines.local_cache import CACHEABLE_STEPS
from shardflow.pipelines.local_run import summarize
from shardflow.pipelines.step_log import key_figure
from shardflow.pipelines.step_options import PIPELINE_PARAMETERS, RUN_FLAGS, check_step_options
from shardflow.pipelines.steps import BY_NAME, STEPS, checked_steps, imports_ahead_of, standbys_started_by

pytestmark = pytest.mark.unit

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "pipeline.yaml"
# Where each checked step's own option list is among the pipeline's parameters (a bad flag goes there).
OPTIONS = {"example-gen": "example_gen_options", "validate": "validation_options", "transform": "transform_options",
           "tune": "tune_options", "train": "train_options", "evaluate": "evaluate_options",
           "infra-validate": "infra_validation_options", "predict": "predict_options"}


def _compiled_tasks() -> dict[str, dict]:
    """Every container task of the golden IR, at any depth (exit handler, conditions): name → task."""
    ir = yaml.safe_load(GOLDEN.read_text())
    dags = [ir["root"]["dag"]] + [c["dag"] for c in ir["components"].values() if "dag" in c]
    return {name: {**task, "resources": ir["deploymentSpec"]["executors"][f"exec-{name}"]["container"]["resources"]}
            for dag in dags for name, task in dag["tasks"].items()
            if "executorLabel" in ir["components"][task["componentRef"]["name"]]}


def _parameters(tmp_path: Path) -> dict:
    return {"index": ["train=/data/train.csv"], "data_root": "/data", "serving_dir": "/s",
            "run_record_dir": str(tmp_path / "runs"), "example_gen_options": [], "beam_args": [],
            "drift_threshold": 0.1, "validation_warn_only": False, "validation_schema": "", "validation_options": [],
            "transform_options": [], "train_options": ["--epochs", "1"], "tune_options": ["--max-trials", "2"],
            "eval_thresholds": ["accuracy>=0.5"], "max_regressions": [], "slice_by": [],
            "regression_tolerance": "0.01", "evaluate_options": [], "infra_validation_options": [], "predict_index": "/data/new.csv",
            "predict_data_root": "", "predict_options": []}


def test_the_compiled_pipeline_has_one_task_per_row_with_its_resources_caching_and_retries() -> None:
    tasks = _compiled_tasks()
    assert sorted(tasks) == sorted(step.name for step in STEPS)
    for step in STEPS:
        task, resources = tasks[step.name], tasks[step.name]["resources"]
        assert (resources["resourceCpuRequest"], resources["resourceMemoryLimit"]) == (
            step.resources.cpu, step.resources.memory), step.name
        assert ("accelerator" in resources) == (step.resources.accelerator is not None), step.name
        assert task.get("cachingOptions", {}).get("enableCache", False) is step.cacheable, step.name
        assert ("retryPolicy" in task) is step.retry, step.name
    assert set(CACHEABLE_STEPS) == {name for name, task in tasks.items() if task["cachingOptions"].get("enableCache")}
    assert CACHEABLE_STEPS == ("example-gen", "validate", "transform", "tune", "train", "infra-validate")


def test_every_row_has_its_kfp_component_and_every_command_its_cli_row() -> None:
    assert [f.name for f in components.Components.__dataclass_fields__.values()] == [s.component for s in STEPS]
    for step in STEPS:
        assert callable(getattr(components, step.component)), step.name
        assert step.command is None or step.command is COMMANDS[step.name], step.name
        assert (step.inputs is None) == (step.options is None), step.name
    registered = build_parser()._subparsers._group_actions[0].choices
    for command in COMMANDS.values():
        assert (command.name in BY_NAME) is command.pipeline_step, f"{command.name}: a component command no step runs"
        defaults = registered[command.name]._defaults
        assert (defaults["handler"], defaults["passes_beam_args"]) == (command.main, command.passes_beam_options)


def test_the_option_check_takes_its_steps_and_labels_from_the_table(tmp_path: Path) -> None:
    checked = [step.name for step in checked_steps()]
    assert set(RUN_FLAGS) == set(PIPELINE_PARAMETERS) == {"index", *checked}
    assert list(check_step_options(_parameters(tmp_path))) == checked
    assert checked.index("tune") == checked.index("train") + 1  # tune takes train's options: checked after
    for name, parameter in OPTIONS.items():
        p = _parameters(tmp_path)
        p[parameter] = [*p[parameter], "--no-such-flag"]
        for labels in (RUN_FLAGS, PIPELINE_PARAMETERS):
            with pytest.raises(ConfigError) as refused:
                check_step_options(p, labels)
            assert str(refused.value).startswith(f"{labels[name]}: shardflow {name}: error:"), str(refused.value)
    p = {**_parameters(tmp_path), "train_options": ["--epohcs", "1"]}  # named by train's flags, not --tune-args
    with pytest.raises(ConfigError, match=r"^--data-service/--train-args: shardflow train: error: unknown option "
                                          r"--epohcs"):
        check_step_options(p)


def test_the_summary_and_the_figures_come_from_the_rows(tmp_path: Path) -> None:
    run = tmp_path / "pipeline_root" / "shardflow-1"
    for step in STEPS:
        for artifact, _ in step.outputs:
            (run / step.name / artifact).mkdir(parents=True)
    listed = summarize(tmp_path)["outputs"]
    assert list(listed) == [summary for step in STEPS for _, summary in step.outputs]
    assert listed["evaluation"] == str(run / "evaluate" / "evaluation")
    assert key_figure("push", {"Output": "/serving/3"}) == "served: /serving/3"
    assert key_figure("no-such-step", {}) == ""
    for step in STEPS:  # a figure never fails a run, whatever a step's outputs lack
        assert isinstance(key_figure(step.name, {}), str)


def test_the_rows_say_which_worker_runs_a_step_and_what_is_prepared_while_it_runs() -> None:
    """The light worker (no TensorFlow) runs the steps that import no framework, ExampleGen on its own pool among
    them; while ExampleGen runs, the worker with TensorFlow imports what the steps after it import and starts
    infra validation's probe (its `standby`) when evaluate runs in a run that made a new model; a step that always
    runs prepares nothing."""
    light = {step.name for step in STEPS if step.runs_light({"beam_args": []})}
    assert light == {"fingerprint", "example-gen", "run-report", "push", "record-outcome"}
    for beam in ({"beam_args": ["--runner", "DaskRunner"]}, {"options": ["--direct_running_mode=in_memory"]}):
        assert not BY_NAME["example-gen"].runs_light(beam)  # on Beam: the worker with TensorFlow (and Beam)
    assert imports_ahead_of("example-gen")[:3] == ["tensorflow_data_validation", "apache_beam", "tensorflow_transform"]
    assert imports_ahead_of("fingerprint") == imports_ahead_of("evaluate") == []
    probe = [BY_NAME["infra-validate"].standby.start]
    assert standbys_started_by("evaluate", ["example-gen"]) == standbys_started_by("evaluate", ["train"]) == probe
    assert standbys_started_by("evaluate") == []  # a rerun whose model is cached starts no probe
    assert standbys_started_by("example-gen") == standbys_started_by("train", ["example-gen"]) == []
