"""`shardflow run`'s failures without a whole run: a bad step option refused before any step starts, a
failed step's one-line error handed over as data (not read from its log), and a step's log, which is
always kept, also shown with --verbose. The runs that do run are in test_run_output.py."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from helpers_runs import run_args as _run_args
from helpers_runs import shardflow as _shardflow
from helpers_runs import tiny_data as _tiny_data


@pytest.mark.parametrize("train_args, says", [("--epochs -1", "epochs"),
                                              ("--epochs 2 --no-such-flag 3", "--no-such-flag")])
def test_a_bad_step_option_is_refused_before_any_step_starts(tmp_path: Path, train_args: str, says: str) -> None:
    train, eval_ = _tiny_data(tmp_path / "data")
    out = tmp_path / "out"
    done = _shardflow(*_run_args(train, eval_, tmp_path / "data", out, "--train-args", train_args))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "--train-args" in line and "shardflow train" in line and says in line
    # Refused before any step started: no run directory (so no step's output and no step's log) and no
    # run record, which the exit handler writes for every run that started.
    assert not (out / "pipeline_root").exists() and not list(out.glob("runs/run-*.json"))


def test_a_failed_step_hands_its_one_line_error_over_as_data_not_in_its_log(tmp_path: Path, monkeypatch,
                                                                             capsys) -> None:
    from shardflow.core.errors import ConfigError
    from shardflow.pipelines.step_errors import last_error, reported_step
    from shardflow.pipelines.step_log import step_error

    log = tmp_path / "train.log"
    # A step's process is its own: the guard on sys.exit is not for this test process.
    monkeypatch.setattr("shardflow.pipelines.step_errors.install_exit_guard", lambda: None)
    with pytest.raises(SystemExit) as stopped, reported_step():
        raise ConfigError("shardflow train: error: no shards\nsecond line")
    assert stopped.value.code == 2
    assert capsys.readouterr().err == "shardflow train: error: no shards\n"
    recorded = last_error()
    # The reason alone: the run names the step once, in its one line ("task train failed: no shards").
    assert recorded == {"message": "no shards", "exit_code": 2, "bug": False}
    assert step_error({**recorded, "error": recorded["message"]}, log) == "no shards"
    with pytest.raises(KeyError), reported_step():  # a bug: recorded, and its traceback is kept
        raise KeyError("x")
    recorded = last_error()
    assert step_error({**recorded, "error": recorded["message"]}, log) == (
        f"unexpected error KeyError: 'x' (its traceback: {log})")
    assert "before shardflow could report why" in step_error({"exit_code": 1, "error": ""}, log)


@pytest.mark.parametrize("verbose", [False, True])
def test_verbose_also_shows_the_steps_log_which_is_always_kept(tmp_path: Path, capsys, verbose: bool) -> None:
    """A real isolated step worker runs a failing lightweight component: its output is in its log (and on the
    terminal with verbose), its one-line error comes back as data."""
    from kfp import dsl

    from shardflow.pipelines.local_worker import StepWorker

    @dsl.component(base_image="unused", install_kfp_package=False)  # the pipeline's components' form
    def failing():  # noqa: ANN202 (KFP reads annotations: this file has postponed ones)
        from shardflow.core.errors import ShardflowError
        from shardflow.pipelines.step_errors import reported_step

        print("framework detail")
        with reported_step():
            raise ShardflowError("shardflow train: error: no shards")

    container = failing.pipeline_spec.deployment_spec["executors"]["exec-failing"]["container"]
    payload = {"inputs": {"parameterValues": {}}, "outputs": {"outputFile": str(tmp_path / "out.json")}}
    args = [json.dumps(payload) if arg == "{{$}}" else arg for arg in container["args"]]
    log = tmp_path / "logs" / "train.log"
    log.parent.mkdir()
    with StepWorker(warm=False, log=tmp_path / "worker.log", echo_to=sys.stdout if verbose else None) as worker:
        result = worker.run({"task": "train", "command": list(container["command"]), "args": args, "log": str(log)})
    assert (result["exit_code"], result["error"], result["bug"]) == (1, "no shards", False)  # the reason alone
    assert ("framework detail" in capsys.readouterr().out) is verbose
    assert "framework detail" in log.read_text()
    assert "shardflow train: error: no shards" in log.read_text()  # the line, as a cluster's pod log has it
