"""A tracking server SIGKILLed mid-run (a real `mlflow server` on loopback): the run succeeds and says what was not
sent; the command it prints, run after the server is back, makes the server's record equal to a send into a plain
file: store, and a second replay changes nothing; a send cut off before its end is sent again whole.
"""
from __future__ import annotations

import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from helpers_tracked_runs import NESTED_STATES, SHARDFLOW, mlflow_client, run_argv, run_steps
from mlflow_server import MlflowServer
from shardflow.tracking.mlflow_sink import COMPLETE_TAG
from shardflow.tracking.records import KEY_TAG

pytestmark = pytest.mark.cluster


def _record(uri: str, experiment: str) -> dict[str, Any]:
    """What a server holds of an experiment's runs, by key: status, params, metric histories, our tags, files."""
    client = mlflow_client(uri)
    found = client.get_experiment_by_name(experiment)
    record = {}
    for run in client.search_runs([found.experiment_id], max_results=1000):
        run_id = run.info.run_id
        metrics = {name: [(m.step, m.value) for m in client.get_metric_history(run_id, name)] for name in run.data.metrics}
        files = sorted(f.path for folder in client.list_artifacts(run_id)
                       for f in client.list_artifacts(run_id, folder.path))
        record[run.data.tags[KEY_TAG]] = {
            "status": run.info.status, "params": run.data.params, "metrics": metrics, "files": files,
            "tags": {k: v for k, v in run.data.tags.items() if k.startswith("shardflow.")},
            "times": (run.info.start_time, run.info.end_time)}
    return record


def _all_runs(uri: str, experiment: str) -> int:
    from mlflow.entities import ViewType

    client = mlflow_client(uri)
    found = client.get_experiment_by_name(experiment).experiment_id
    return len(client.search_runs([found], run_view_type=ViewType.ALL, max_results=1000))


def test_a_server_killed_mid_run_then_the_printed_command_sends_it_whole_once(
        demo_data: Path, tmp_path: Path) -> None:
    server, out = MlflowServer(tmp_path / "server"), tmp_path / "digits"
    process = subprocess.Popen(run_argv(demo_data, out, server.endpoint, 2, "accuracy>=0.5"), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in process.stdout:  # type: ignore[union-attr]
        lines.append(line)
        if line.startswith("example-gen"):
            server.kill()  # SIGKILL, mid-run
            break
    lines += process.stdout.readlines()  # type: ignore[union-attr]
    assert process.wait(600) == 0, "".join(lines)[-3000:]
    said = next(line for line in lines if line.startswith("tracking: not sent"))
    command = shlex.split(said.split("send it with: ", 1)[1])
    assert command[:2] == ["shardflow", "track"] and "--run" in command, said
    server = server.restart()
    try:
        for _ in range(2):  # the replay, then a second one that changes nothing
            done = subprocess.run([SHARDFLOW, *command[1:]], capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, done.stderr[-2000:]
        reference = f"file:{tmp_path / 'reference'}"  # the same run sent once, uninterrupted, to a plain file store
        subprocess.run([SHARDFLOW, "track", "--output", str(out), "--tracking-uri", reference], check=True,
                       capture_output=True, timeout=300)
        replayed = _record(server.endpoint, "digits")
        (job,) = [p.name for p in (out / "pipeline_root").iterdir()]
        assert replayed == _record(reference, "digits")
        assert len(replayed) == 1 + len([e for e in run_steps(out, job).values() if e["state"] in NESTED_STATES])
        assert "1 there already" in done.stdout and _all_runs(server.endpoint, "digits") == len(replayed)
        _cut_off_send(server.endpoint, command, replayed)
    finally:
        server.stop()


def _cut_off_send(uri: str, command: list[str], whole: dict[str, Any]) -> None:
    """A send cut off before its end (its parent lacks COMPLETE_TAG) is sent again whole: the same record."""
    client = mlflow_client(uri)
    parent = next(r for r in client.search_runs([client.get_experiment_by_name("digits").experiment_id])
                  if "mlflow.parentRunId" not in r.data.tags)
    client.delete_tag(parent.info.run_id, COMPLETE_TAG)
    subprocess.run([SHARDFLOW, *command[1:]], check=True, capture_output=True, timeout=300)
    assert _record(uri, "digits") == whole
    assert _all_runs(uri, "digits") == 2 * len(whole)  # the cut-off send's runs deleted, not left beside
