"""The warm step worker: a step leaves nothing behind for the next, a killed worker fails only its task
and is replaced, a worker past its RSS bound is replaced, the light worker has no TensorFlow, a standby
started for a later step is inherited by it and dies with the worker; and a real `shardflow run` whose
`train` is SIGKILLed mid-epoch reports that in one line, leaves no complete-looking model, and a rerun
resumes from its backups to the weights of an uninterrupted run.

The worker runs real KFP lightweight components (compiled here, as the pipeline's are) through the
same entry point a step's container runs: nothing is mocked.
"""
# No `from __future__ import annotations`: KFP reads the components' annotations as types.
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from kfp import dsl

from helpers_processes import backed_up_step, ends_within, running
from shardflow.pipelines.local_dag import Artifact  # noqa: F401  (the outputs' type, read below)
from shardflow.pipelines.local_executor_io import executor_input, task_outputs
from shardflow.pipelines.local_worker import StepWorker
from shardflow.pipelines.steps import BY_NAME

pytestmark = pytest.mark.pipeline


@dsl.component(base_image="unused", install_kfp_package=False)
def leave_state() -> str:
    """Changes what a step can change in its process; returns what it changed."""
    import os

    import shardflow
    import tf_keras

    from shardflow.pipelines.step_errors import reported_step

    with reported_step():  # installs the process-wide exit guard, as every step does
        os.environ["SHARDFLOW_LEFTOVER"] = "1"
        tf_keras.mixed_precision.set_global_policy("mixed_float16")
        shardflow.leftover = True
    return tf_keras.mixed_precision.global_policy().name


@dsl.component(base_image="unused", install_kfp_package=False)
def observe() -> str:
    """What this step finds in its process, as JSON."""
    import json
    import os
    import sys

    import shardflow
    import tf_keras

    return json.dumps({"env": os.environ.get("SHARDFLOW_LEFTOVER"), "policy": tf_keras.mixed_precision.global_policy().name,
                       "exit_guard": getattr(sys, "_shardflow_exit_guard", False),
                       "module": getattr(shardflow, "leftover", None)})


@dsl.component(base_image="unused", install_kfp_package=False)
def sleep_long() -> str:
    import time

    time.sleep(120)
    return "woke"


@dsl.component(base_image="unused", install_kfp_package=False)
def loaded() -> str:
    """Whether this step's process has TensorFlow, and the standby probe its environment names, as JSON."""
    import json
    import os
    import sys

    return json.dumps({"tensorflow": "tensorflow" in sys.modules,
                       "standby": os.environ.get("SHARDFLOW_PROBE_STANDBY", "")})


def run_component(worker: StepWorker, component: Any, folder: Path, **request: Any) -> tuple[dict, dict]:
    """One task of `component` on `worker` (`request`: more of the task's request): (the result, its outputs)."""
    spec = json_format.MessageToDict(component.pipeline_spec)
    name = next(iter(spec["deploymentSpec"]["executors"]))
    container = spec["deploymentSpec"]["executors"][name]["container"]
    payload = executor_input(spec["root"], {}, str(folder / component.name))
    args = [json.dumps(payload) if arg == "{{$}}" else arg for arg in container["args"]]
    log = folder / "logs" / f"{component.name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    result = worker.run({"task": component.name, "command": container["command"], "args": args, "log": str(log),
                         **request})
    return result, (task_outputs(spec["root"], payload) if result["exit_code"] == 0 else {})


@pytest.fixture(scope="module")
def warm_worker(tmp_path_factory: pytest.TempPathFactory) -> StepWorker:
    with StepWorker(warm=True, log=tmp_path_factory.mktemp("worker") / "worker.log") as worker:
        yield worker


def test_a_step_leaves_nothing_behind_for_the_next(warm_worker: StepWorker, tmp_path: Path) -> None:
    result, outputs = run_component(warm_worker, leave_state, tmp_path)
    assert result["exit_code"] == 0 and outputs["Output"] == "mixed_float16"
    result, outputs = run_component(warm_worker, observe, tmp_path)
    assert result["exit_code"] == 0
    assert json.loads(outputs["Output"]) == {"env": None, "policy": "float32", "exit_guard": False, "module": None}
    assert result["pid"] != os.getpid() and warm_worker.restarts == 0


def test_a_killed_worker_fails_its_task_in_one_line_and_the_next_task_gets_a_new_one(warm_worker: StepWorker,
                                                                                    tmp_path: Path) -> None:
    log = tmp_path / "logs" / "sleep-long.log"
    killed: list[int] = []

    def kill_the_worker_once_the_step_runs() -> None:
        while not (log.is_file() and "in process" in log.read_text()):
            time.sleep(0.1)
        killed.append(int(log.read_text().split("in process")[1].split()[0]))  # the step's own process
        os.kill(warm_worker.pid, signal.SIGKILL)

    watcher = threading.Thread(target=kill_the_worker_once_the_step_runs)
    watcher.start()
    result, _ = run_component(warm_worker, sleep_long, tmp_path)
    watcher.join()
    assert result["exit_code"] == 128 + signal.SIGKILL
    assert result["error"].startswith("the step worker (running sleep-long): process ")
    assert "killed by SIGKILL" in result["error"] and "\n" not in result["error"]
    assert ends_within(killed[0], 10)  # the step died with its worker: nothing runs on unseen
    result, outputs = run_component(warm_worker, observe, tmp_path)
    assert result["exit_code"] == 0 and warm_worker.restarts == 1


def test_a_worker_past_its_rss_bound_is_replaced_between_tasks(tmp_path: Path) -> None:
    with StepWorker(warm=True, log=tmp_path / "worker.log", max_rss_mb=1) as worker:
        first = worker.pid
        for _ in range(2):
            result, outputs = run_component(worker, observe, tmp_path)
            assert result["exit_code"] == 0 and json.loads(outputs["Output"])["policy"] == "float32"
        assert worker.restarts == 2 and worker.pid != first


def test_the_light_worker_has_no_tensorflow_and_a_standby_lives_as_long_as_its_worker(tmp_path: Path) -> None:
    with StepWorker(warm=True, light=True, log=tmp_path / "light.log") as light:
        result, outputs = run_component(light, loaded, tmp_path)
        assert result["exit_code"] == 0 and json.loads(outputs["Output"]) == {"tensorflow": False, "standby": ""}
    with StepWorker(warm=True, log=tmp_path / "worker.log") as worker:
        result, outputs = run_component(worker, loaded, tmp_path, standby=[BY_NAME["infra-validate"].standby.start])
        seen = json.loads(outputs["Output"])
        owner, standby, *_ = (int(part) for part in seen["standby"].split())
        assert result["exit_code"] == 0 and seen["tensorflow"] and owner == worker.pid
        assert "probe_standby.py" in Path(f"/proc/{standby}/cmdline").read_text() and running(standby)
    assert ends_within(standby, 10)  # it died with the worker that started it


def _train_log(out: Path) -> Path | None:
    logs = sorted((out / "pipeline_root").glob("shardflow-*/logs/train.log"))
    return logs[-1] if logs else None


def _run_command(data: Path, out: Path) -> list[str]:
    """Deterministic training, backed up at every step; no warm start, so every run trains the same weights."""
    return [sys.executable, "-m", "shardflow", "run", "--index", f"train={data / 'train.csv'}",
            "--index", f"eval={data / 'eval.csv'}", "--data-root", str(data), "--output", str(out),
            "--train-args", "--epochs 3 --deterministic --checkpoint-every 1", "--warm-start", "",
            "--threshold", "accuracy>=0.5"]


def _training(run_dir: Path) -> dict:
    return json.loads((run_dir / "train" / "model" / "training.json").read_text())


def test_a_sigkilled_train_is_one_line_and_a_rerun_resumes(demo_data: Path, tmp_path: Path) -> None:
    """Killed after its first backup, the train step of a rerun (same key) resumes from the killed run's
    backups and ends with the weights of an uninterrupted run."""
    data, out = demo_data / "digits", tmp_path / "run"
    run = subprocess.Popen(_run_command(data, out), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline, log = time.monotonic() + 600, None
    while time.monotonic() < deadline and run.poll() is None:
        log = _train_log(out)  # the step's process is named there; its backups are beside it
        if log and "in process" in log.read_text() and backed_up_step(log.parent.parent / "train" / "model") >= 1:
            break
        time.sleep(0.05)
    assert log is not None and run.poll() is None, "the run ended before its train step could be killed"
    os.kill(int(log.read_text().split("in process")[1].split()[0]), signal.SIGKILL)  # as the OOM killer would
    stdout, stderr = run.communicate(timeout=300)
    assert run.returncode == 1
    assert stderr.strip().splitlines() == [stderr.strip()]  # one line, no traceback
    assert stderr.startswith("shardflow run: error: task train failed: the step's process ")
    assert "killed by SIGKILL" in stderr
    killed_dir = log.parent.parent
    steps = json.loads((killed_dir / "logs" / "steps.json").read_text())
    assert steps["train"]["state"] == "FAILED" and steps["record-outcome"]["state"] == "ok"
    assert "evaluate" not in steps
    assert not (killed_dir / "train" / "model" / "training.json").exists()  # nothing complete-looking
    assert len(list((out / "cache" / "attempts").glob("train-*.json"))) == 1
    again = subprocess.run(_run_command(data, out), capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"train: resuming the killed attempt's backups from {killed_dir / 'train' / 'model'}" in again.stdout
    run_dir = max((out / "pipeline_root").glob("shardflow-*"), key=lambda p: p.stat().st_mtime)
    steps = json.loads((run_dir / "logs" / "steps.json").read_text())
    assert {s: steps[s]["state"] for s in ("example-gen", "validate", "transform", "train", "push")} == {
        "example-gen": "cached", "validate": "cached", "transform": "cached", "train": "ok", "push": "ok"}
    assert "train: resuming at step " in (run_dir / "logs" / "train.log").read_text()
    assert not list((out / "cache" / "attempts").glob("train-*.json"))  # succeeded: nothing left to resume
    resumed = _training(run_dir)
    assert resumed["resumed_from_step"] > 0
    # The uninterrupted run: train again from scratch on the same cached steps' outputs (nothing left to resume),
    # not a third whole run in another output (example-gen, validate, transform again): 64 CPU-s -> 57-59.
    reference = subprocess.run(_run_command(data, out) + ["--no-cache", "train"], capture_output=True, text=True,
                               timeout=900)
    assert reference.returncode == 0, reference.stderr[-2000:]
    reference_dir = max((out / "pipeline_root").glob("shardflow-*"), key=lambda p: p.stat().st_mtime)
    assert reference_dir != run_dir and "train: resuming" not in reference.stdout
    uninterrupted = _training(reference_dir)
    assert uninterrupted["resumed_from_step"] == 0
    assert resumed["weights_sha256"] == uninterrupted["weights_sha256"]
