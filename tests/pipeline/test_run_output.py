"""`shardflow run` as a person watches it: a quiet run of one line per step with each step's log kept, a
failing step's own message at the end and in the run record, and the KFP UI pages with their images
embedded. Options refused before any step, and a step's error handed over as data, are in
test_run_failures.py.

What a run did is read from what it wrote: the run record (RUN/runs/run-*.json: the outcome, the
failed step, its message, the run's name), each step's state and key figure
(RUN/pipeline_root/<run>/logs/steps.json), the examples' manifest and the training and evaluation
JSON. One test holds the printed output to those records."""
from __future__ import annotations

import base64
import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from shardflow.core.batch_memory import SCORING_BUDGET_MB
from shardflow.core.manifest import read_manifest
from shardflow.pipelines.step_log import step_line
from shardflow.pipelines.ui_pages import evaluation_page

from helpers_runs import run_args as _run_args
from helpers_runs import shardflow as _shardflow
from helpers_runs import tiny_data as _tiny_data

STEPS = ("fingerprint", "example-gen", "validate", "transform", "train", "evaluate", "push", "run-report",
         "record-outcome")


def _record(out: Path) -> dict:
    """The run record the exit handler wrote (one run into `out`)."""
    (record,) = (out / "runs").glob("run-*.json")
    return json.loads(record.read_text())


def _run_dir(out: Path) -> Path:
    """The run's directory, named in its record (the KFP pipeline job)."""
    return out / "pipeline_root" / _record(out)["pipeline_job"]


def _steps(out: Path) -> dict[str, dict]:
    """Each step the run reached: {"state": ok|cached|skipped|FAILED, "seconds", "figure"} (what its line says)."""
    return json.loads((_run_dir(out) / "logs" / "steps.json").read_text())


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess]:
    """`make run`'s command on the digits demo data, with 2 epochs and a threshold 2 epochs reach; the Evaluator's
    memory budget through --evaluate-args (a flag no run flag of its own exposes)."""
    base = tmp_path_factory.mktemp("demo")
    assert _shardflow("demo-data", "--output", str(base / "data")).returncode == 0
    digits, out = base / "data" / "digits", base / "run"
    done = _shardflow(*_run_args(digits / "train.csv", digits / "eval.csv", digits, out,
                                 "--train-args", "--epochs 2", "--threshold", "accuracy>=0.5",
                                 "--evaluate-args", f"--memory-mb {EVALUATOR_BUDGET_MB}"))
    return out, done


EVALUATOR_BUDGET_MB = 128  # not the Evaluator's default (SCORING_BUDGET_MB, 256): the test sees the flag arrive


def test_the_evaluate_args_reach_the_evaluator(demo_run) -> None:
    out, _ = demo_run
    assert EVALUATOR_BUDGET_MB != SCORING_BUDGET_MB
    metrics = json.loads((_run_dir(out) / "evaluate" / "evaluation" / "metrics.json").read_text())
    assert metrics["batching"]["budget_bytes"] == EVALUATOR_BUDGET_MB * 2**20


@pytest.fixture(scope="module")
def failed_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess]:
    """A run whose ExampleGen fails: 3 of 19 train rows name no file, more than --max-reject-fraction allows."""
    base = tmp_path_factory.mktemp("failing")
    train, eval_ = _tiny_data(base / "data", missing=3)
    done = _shardflow(*_run_args(train, eval_, base / "data", base / "out",
                                 "--example-gen-args", "--max-reject-fraction 0.05", "--train-args", "--epochs 1"))
    return base / "out", done


def test_the_demo_run_runs_every_step_and_keeps_each_steps_log(demo_run) -> None:
    out, done = demo_run
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    record, steps, run = _record(out), _steps(out), _run_dir(out)
    assert (record["state"], record["failed_task"], record["message"]) == ("SUCCEEDED", "", "")
    assert {step: steps[step]["state"] for step in STEPS} == {step: "ok" for step in STEPS}
    training = json.loads((run / "train" / "model" / "training.json").read_text())
    assert training["optimizer_steps"] == 46 and "accuracy" in training["history"][-1]
    assert json.loads((run / "evaluate" / "evaluation" / "blessing.json").read_text())["blessed"]
    eval_rows = sum(1 for _ in open(out.parent / "data/digits/eval.csv")) - 1  # an independent count
    assert read_manifest(str(run / "example-gen" / "examples")).splits["eval"].num_examples == eval_rows
    logs = run / "logs"
    for step in STEPS:
        assert (logs / f"{step}.log").stat().st_size > 0, step
    assert "executor_input" in (logs / "train.log").read_text()  # the full log is kept
    assert f"in process" in (logs / "train.log").read_text().splitlines()[0]  # the worker's child that ran it


def test_the_run_executed_the_pipeline_shardflow_compile_writes(demo_run, tmp_path: Path) -> None:
    from shardflow.pipelines.local_run import LOCAL_RUN_IMAGE

    out, done = demo_run
    compiled = tmp_path / "pipeline.yaml"
    made = _shardflow("compile", "--output", str(compiled), "--image", LOCAL_RUN_IMAGE, "--allow-mutable-image")
    assert made.returncode == 0, made.stderr
    executed = (_run_dir(out) / "pipeline.yaml").read_bytes()
    assert executed == compiled.read_bytes()
    # ...and every container task in it ran, or was skipped by its condition, under its IR name.
    spec = yaml.safe_load(executed)
    containers = {name for component in spec["components"].values() if "dag" in component
                  for name, task in component["dag"]["tasks"].items()
                  if "executorLabel" in spec["components"][task["componentRef"]["name"]]}
    containers |= {name for name in spec["root"]["dag"]["tasks"] if name == "record-outcome"}
    steps = _steps(out)
    assert containers - set(steps) == {"predict"} and steps["condition-4"]["state"] == "skipped"  # no --predict-index


@pytest.fixture(params=["demo_run", "failed_run"])
def finished_run(request: pytest.FixtureRequest) -> tuple[Path, subprocess.CompletedProcess]:
    return request.getfixturevalue(request.param)


def _printed_step(line: str) -> dict:
    """A step's printed line read back by step_log.step_line's columns: task 15, state 8, seconds 7, figure."""
    took = line[25:32].strip()
    return {"task": line[:15].strip(), "state": line[16:24].strip(),
            "seconds": float(took.rstrip("s")) if took else None, "figure": line[34:]}


def test_the_printed_output_is_the_records_one_line_per_step_then_the_report(finished_run) -> None:
    """The one test of what is printed: every line is accounted for by what the run recorded."""
    out, done = finished_run
    record, steps, run = _record(out), _steps(out), _run_dir(out)
    printed = done.stdout.splitlines()
    assert "executor_input" not in done.stdout + done.stderr  # kfp.local's JSON stays in the logs
    # One line per step the run recorded, first, each saying what the step's record says.
    step_lines = printed[:len(steps)]
    read = {line[:15].strip(): _printed_step(line) for line in step_lines}
    assert sorted(read) == sorted(steps), "\n".join(printed)
    for task, line in zip(read, step_lines):
        shown = read[task]
        assert line == step_line(task, shown["state"], shown["seconds"], shown["figure"])  # the columns read right
        assert (shown["state"], shown["figure"]) == (steps[task]["state"], steps[task]["figure"]), line
        assert shown["seconds"] == (None if steps[task]["seconds"] is None
                                    else pytest.approx(steps[task]["seconds"], abs=0.051)), line  # printed to 0.1 s
    # Then the run report as its file holds it (or the one line saying there is none), and a named set of
    # closing lines: the outcome and failed step from the record (its error is stderr's one line), one line
    # per output the run wrote, where the logs are, what is served ("not pushed:" and "predictions:" lines need an unblessed
    # model or --predict-index, which neither run has). So the count is derived from the steps and the records:
    # a new step adds its own line and its record entry, and no bound needs loosening; a line that leaks from
    # a framework or a step is a line no record accounts for, and fails here.
    report = run / "run-report" / "report"
    shown_report = (report.read_text().splitlines() + [""] if report.is_file()  # a blank line after it
                    else ["(no run report: the run stopped before the evaluation)"])
    assert printed[len(steps):len(steps) + len(shown_report)] == shown_report, "\n".join(printed)
    closing = printed[len(steps) + len(shown_report):]
    expected = [f"outcome: {record['state']}" + (f" (failed step: {record['failed_task']})"
                                                 if record["failed_task"] else "")]
    outputs = [line for line in closing if line.startswith("  ") and not line.startswith("  logs: ")]
    written = [Path(line.strip().split(": ", 1)[1]) for line in outputs]  # `  examples: RUN/example-gen/examples`
    artifacts = [path for path in written if path.parent.parent == run]
    for path in artifacts:  # each an output this run wrote, of a step it recorded: at most one line per step
        assert path.parent.name in steps and path.exists(), path
    assert len({path.parent.name for path in artifacts}) == len(artifacts)
    for path in set(written) - set(artifacts):  # a file of one of them (the Evaluator's label_issues.jsonl)
        assert path.is_file() and any(path.is_relative_to(artifact) for artifact in artifacts), path
    expected += outputs + [f"  logs: {run / 'logs'}"]
    pointer = out / "serving" / "CURRENT.json"
    served = json.loads(pointer.read_text()) if pointer.is_file() else None
    expected.append(f"serving: {served['model']} (version {served['version']})" if served else "serving: nothing pushed")
    assert closing == expected
    # stderr is empty when the run succeeds; when a step fails it is that step's own one line, the last
    # thing the person sees, and the record's message.
    if record["state"] == "SUCCEEDED":
        assert done.returncode == 0 and done.stderr == ""
    else:
        assert done.returncode == 1 and done.stderr == f"shardflow run: error: {record['message']}\n"


def test_the_kfp_ui_pages_embed_the_plots_and_tables(demo_run) -> None:
    out, _ = demo_run
    run = _run_dir(out)
    page = (run / "evaluate" / "evaluation_page.html").read_text()
    # Every HTML page is a .html file, which a browser opens as a page.
    assert {p.name for p in run.glob("*/*.html")} == {"evaluation_page.html", "training_page.html", "report_html.html"}
    png = (run / "evaluate" / "evaluation" / "confusion_matrix.png").read_bytes()
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert [base64.b64decode(image) for image in images] == [png]
    metrics = json.loads((run / "evaluate" / "evaluation" / "metrics.json").read_text())
    assert len(metrics["per_class"]) == 10  # the digits
    for name in metrics["per_class"]:
        assert f"<tr><td>{name}</td>" in page
    training = (run / "train" / "training_page.html").read_text()
    (curves,) = re.findall(r'src="data:image/png;base64,([^"]+)"', training)
    assert base64.b64decode(curves) == (run / "train" / "model" / "curves.png").read_bytes()
    assert training.count("<tr><td>") == 2  # one row per epoch


def test_the_evaluation_page_has_a_table_per_slice_column() -> None:
    slice_info = {"num_examples": 4, "overall": {"accuracy": 0.75}}
    page = evaluation_page({"overall": {"accuracy": 0.5}, "per_class": {"cat": {"recall": 1.0}},
                            "slices": {"site": {"a": slice_info, "b": slice_info}}}, None)
    assert "Slices by site" in page and "<tr><td>a</td><td>4</td><td>0.7500</td></tr>" in page
    assert "<td>b</td>" in page and "<tr><td>cat</td><td>1.0000</td></tr>" in page


def test_a_failing_steps_own_message_is_in_the_run_record(failed_run) -> None:
    out, done = failed_run
    assert done.returncode == 1
    record, steps = _record(out), _steps(out)
    assert record["state"] == "FAILED" and record["failed_task"] == "example-gen"
    assert steps["example-gen"]["state"] == "FAILED"
    own = steps["example-gen"]["error"]  # the step's reason, as it reported it; not on its printed line
    assert "reject" in own and not own.startswith("shardflow") and steps["example-gen"]["figure"] == ""
    assert record["message"] == f"task example-gen failed: {own}"  # the same text: the run's one error line
    assert done.stderr == f"shardflow run: error: {record['message']}\n" and done.stdout.count(own) == 0
    # No step after the failed one ran; the exit handler did.
    assert {step: state["state"] for step, state in steps.items()} == {
        "fingerprint": "ok", "example-gen": "FAILED", "record-outcome": "ok"}
    assert (_run_dir(out) / "logs" / "example-gen.log").is_file()
