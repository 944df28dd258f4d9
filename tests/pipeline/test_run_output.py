"""`shardflow run` as a person watches it (issue 13, items 16, 18, 23): options checked before any
step, a quiet run of one line per step with each step's log kept, a failing step's own message at
the end and in the run record, and the KFP UI pages with their images embedded."""
from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from shardflow.pipelines.ui_pages import evaluation_page

from helpers_images import write_csv, write_png

SHARDFLOW = str(Path(sys.executable).with_name("shardflow"))
STEPS = ("fingerprint", "example-gen", "validate", "transform", "train", "evaluate", "push", "run-report",
         "record-outcome")


def _shardflow(*argv: str, timeout: float = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}
    return subprocess.run([SHARDFLOW, *argv], capture_output=True, text=True, env=env, timeout=timeout)


def _run_args(train: Path, eval_: Path, root: Path, out: Path, *extra: str) -> list[str]:
    return ["run", "--index", f"train={train}", "--index", f"eval={eval_}", "--data-root", str(root),
            "--output", str(out), *extra]


def _newest_run(out: Path) -> Path:
    return max((out / "pipeline_root").glob("shardflow-*"), key=lambda p: p.stat().st_mtime)


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess]:
    """`make run`'s command on the digits demo data, with 2 epochs and a threshold 2 epochs reach."""
    base = tmp_path_factory.mktemp("demo")
    assert _shardflow("demo-data", "--output", str(base / "data")).returncode == 0
    digits, out = base / "data" / "digits", base / "run"
    done = _shardflow(*_run_args(digits / "train.csv", digits / "eval.csv", digits, out,
                                 "--train-args", "--epochs 2", "--threshold", "accuracy>=0.5"))
    return out, done


def test_item18_the_demo_run_prints_one_line_per_step_and_keeps_each_steps_log(demo_run) -> None:
    out, done = demo_run
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    printed = (done.stdout + done.stderr).splitlines()
    assert len(printed) <= 70, f"{len(printed)} lines:\n" + "\n".join(printed)
    assert "executor_input" not in done.stdout + done.stderr  # kfp.local's JSON stays in the logs
    step_lines = {line.split()[0]: line for line in printed if line.split() and line.split()[0] in STEPS}
    assert set(step_lines) == set(STEPS)
    assert re.search(r"^train\s+ok\s+[\d.]+s\s+.*accuracy [\d.]+.*46 optimizer steps", step_lines["train"])
    assert "blessed: yes" in step_lines["evaluate"]
    eval_rows = sum(1 for _ in open(out.parent / "data/digits/eval.csv")) - 1  # an independent count
    assert f"eval {eval_rows}" in step_lines["example-gen"]
    logs = _newest_run(out) / "logs"
    for step in STEPS:
        assert (logs / f"{step}.log").stat().st_size > 0, step
    assert "executor_input" in (logs / "train.log").read_text()  # the full log is kept
    assert "Running pipeline" in (logs / "pipeline.log").read_text()


def test_item23_the_kfp_ui_pages_embed_the_plots_and_tables(demo_run) -> None:
    out, done = demo_run
    run = _newest_run(out)
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


def test_item23_the_evaluation_page_has_a_table_per_slice_column() -> None:
    slice_info = {"num_examples": 4, "overall": {"accuracy": 0.75}}
    page = evaluation_page({"overall": {"accuracy": 0.5}, "per_class": {"cat": {"recall": 1.0}},
                            "slices": {"site": {"a": slice_info, "b": slice_info}}}, None)
    assert "Slices by site" in page and "<tr><td>a</td><td>4</td><td>0.7500</td></tr>" in page
    assert "<td>b</td>" in page and "<tr><td>cat</td><td>1.0000</td></tr>" in page


def _tiny_data(root: Path, missing: int = 0) -> tuple[Path, Path]:
    rng = np.random.default_rng(0)
    rows = []
    for i in range(20):
        write_png(root / f"img/{i}.png", rng.integers(0, 255, size=(8, 8, 1)).astype(np.uint8))
        rows.append([f"img/{i}.png", i % 2])
    rows += [[f"img/missing-{i}.png", 0] for i in range(missing)]
    return (write_csv(root / "train.csv", ["x", "y"], rows[:16] + rows[20:]),
            write_csv(root / "eval.csv", ["x", "y"], rows[16:20]))


@pytest.mark.parametrize("train_args, says", [("--epochs -1", "epochs"),
                                              ("--epochs 2 --no-such-flag 3", "--no-such-flag")])
def test_item16_a_bad_step_option_stops_the_run_before_example_gen(tmp_path: Path, train_args: str, says: str) -> None:
    train, eval_ = _tiny_data(tmp_path / "data")
    started = time.monotonic()
    done = _shardflow(*_run_args(train, eval_, tmp_path / "data", tmp_path / "out", "--train-args", train_args))
    assert time.monotonic() - started < 10
    assert done.returncode == 2 and "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "--train-args" in line and "shardflow train" in line and says in line
    assert not (tmp_path / "out" / "pipeline_root").exists()  # nothing ran: no ExampleGen output


def test_item18_a_failing_steps_own_message_ends_the_output_and_is_in_the_run_record(tmp_path: Path) -> None:
    train, eval_ = _tiny_data(tmp_path / "data", missing=3)  # 3 of 19 train rows name no file
    done = _shardflow(*_run_args(train, eval_, tmp_path / "data", tmp_path / "out",
                                 "--example-gen-args", "--max-reject-fraction 0.05", "--train-args", "--epochs 1"))
    assert done.returncode == 1
    last = (done.stdout + done.stderr).strip().splitlines()[-5:]
    assert any("shardflow example-gen" in line and "reject" in line for line in last), "\n".join(last)
    assert any(line.startswith("example-gen") and "FAILED" in line for line in done.stdout.splitlines())
    (record,) = (tmp_path / "out" / "runs").glob("run-*.json")
    outcome = json.loads(record.read_text())
    assert outcome["state"] == "FAILED" and outcome["failed_task"] == "example-gen"
    assert "shardflow example-gen" in outcome["message"] and "reject" in outcome["message"]
    assert (_newest_run(tmp_path / "out") / "logs" / "example-gen.log").is_file()


def test_a_failed_step_hands_its_one_line_error_over_in_a_record_not_in_its_log(tmp_path: Path, monkeypatch,
                                                                               capsys) -> None:
    from shardflow.core.errors import ConfigError
    from shardflow.pipelines.step_errors import STEP_ERROR_ENV, reported_step
    from shardflow.pipelines.step_log import step_error

    record, log = tmp_path / "train.error.json", tmp_path / "train.log"
    monkeypatch.setenv(STEP_ERROR_ENV, str(record))
    # A step's process is its own: the guard on sys.exit is not for this test process.
    monkeypatch.setattr("shardflow.pipelines.step_errors.install_exit_guard", lambda: None)
    with pytest.raises(SystemExit) as stopped, reported_step():
        raise ConfigError("shardflow train: error: no shards\nsecond line")
    assert stopped.value.code == 2
    assert capsys.readouterr().err == "shardflow train: error: no shards\n"
    assert step_error(record, log) == "shardflow train: error: no shards"
    with pytest.raises(KeyError), reported_step():  # a bug: recorded, and its traceback is kept
        raise KeyError("x")
    assert step_error(record, log) == f"unexpected error KeyError: 'x' (its traceback: {log})"
    record.unlink()
    assert "before shardflow could report why" in step_error(record, log)


@pytest.mark.parametrize("verbose", [False, True])
def test_item18_verbose_also_shows_the_framework_log_which_is_always_kept(tmp_path: Path, capsys, monkeypatch,
                                                                          verbose: bool) -> None:
    from kfp.local.status import Status

    from shardflow.core.errors import ShardflowError
    from shardflow.pipelines.step_errors import reported_step
    from shardflow.pipelines.step_log import StepLog

    said: list[str] = []
    steps = StepLog(echo=said.append, verbose=verbose)
    monkeypatch.setattr("shardflow.pipelines.step_errors.install_exit_guard", lambda: None)

    def task() -> tuple[dict, Status]:  # what a step's process does (here in this one)
        print("framework detail")
        with pytest.raises(SystemExit), reported_step():
            raise ShardflowError("shardflow train: error: no shards")
        return {}, Status.FAILURE
    steps.run_task("train", tmp_path, task)
    assert ("framework detail" in capsys.readouterr().out) is verbose
    assert "framework detail" in (tmp_path / "logs" / "train.log").read_text()
    (line,) = said
    assert re.match(r"^train\s+FAILED\s+[\d.]+s  error: shardflow train: error: no shards$", line)
    assert steps.error("train") == "shardflow train: error: no shards"
