"""`shardflow schedule` / `shardflow submit` against a fake KFP API on 127.0.0.1 (no cluster runs here).

The real kfp.Client 2.13 talks HTTP to tests/fake_kfp_server.py, which records every request; the
tests assert the request bodies KFP would receive, and that bad input fails before any request.
"""
import argparse  # no `from __future__ import annotations`: kfp reads the component annotations as types
import socket
from pathlib import Path

import pytest

from fake_kfp_server import FakeKfpServer, Request
from shardflow.core.errors import ConfigError
from shardflow.pipelines.schedule import (
    add_schedule_arguments,
    read_pipeline_package,
    schedule,
    schedule_main,
    to_kfp_cron,
)
from shardflow.pipelines.submit import add_submit_arguments, submit, submit_main

REPO = Path(__file__).resolve().parents[2]
NO_TOKEN = "/nonexistent/token"  # tests run outside a pod: no service-account token
IMAGE = "registry.example.com/ml/shardflow@sha256:" + "ab" * 32


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A compiled 1-step pipeline `tiny` with a required int, a float, a bool and a string parameter."""
    from kfp import compiler, dsl

    @dsl.component(base_image="python:3.11-slim")
    def repeat(word: str, times: int) -> str:
        return word * times

    @dsl.pipeline(name="tiny")
    def tiny(times: int, word: str = "a", rate: float = 0.5, flag: bool = False) -> None:
        repeat(word=word, times=times)

    path = tmp_path_factory.mktemp("package") / "tiny.yaml"
    compiler.Compiler().compile(tiny, str(path))
    return str(path)


@pytest.fixture()
def server():
    with FakeKfpServer() as fake:
        yield fake


def _only(requests: list[Request]) -> Request:
    assert len(requests) == 1, requests
    return requests[0]


def test_schedule_sends_the_recurring_run_kfp_needs(server: FakeKfpServer, package: str) -> None:
    recurring_run_id = schedule(server.url, "0 3 * * *", package,
                                {"times": "3", "rate": "0.25", "flag": "true", "word": "b"},
                                job_name="nightly", experiment="retraining", token_path=NO_TOKEN)

    body = _only(server.requests_to("POST", "/recurringruns")).body
    assert body["trigger"] == {"cron_schedule": {"cron": "0 0 3 * * *"}}  # seconds first
    assert body["max_concurrency"] == 1
    assert body["no_catchup"] is True
    assert body["mode"] == "ENABLE"
    assert body["display_name"] == "nightly"
    assert body["runtime_config"]["parameters"] == {"times": 3, "rate": 0.25, "flag": True, "word": "b"}
    (experiment_id, experiment), = server.experiments.items()
    assert experiment["display_name"] == "retraining" and body["experiment_id"] == experiment_id
    # The run references the uploaded version (not an inline spec), and that version is this package.
    reference = body["pipeline_version_reference"]
    assert "pipeline_spec" not in body
    assert server.pipelines[reference["pipeline_id"]]["display_name"] == "tiny"
    assert server.versions[reference["pipeline_version_id"]]["package"] == Path(package).read_bytes()
    assert list(server.recurring_runs) == [recurring_run_id]


def test_scheduling_again_replaces_the_schedule_and_reuses_an_identical_version(
        server: FakeKfpServer, package: str) -> None:
    other = schedule(server.url, "0 12 * * *", package, {"times": "1"}, "weekly", "retraining", token_path=NO_TOKEN)
    schedule(server.url, "0 3 * * *", package, {"times": "1"}, "nightly", "retraining", token_path=NO_TOKEN)
    schedule(server.url, "30 4 * * 1-5", package, {"times": "2"}, "nightly", "retraining", token_path=NO_TOKEN)
    (previous,) = [key for key, run in server.recurring_runs.items() if run["display_name"] == "nightly"]
    newest = schedule(server.url, "45 4 * * 1-5", package, {"times": "5"}, "nightly", "retraining",
                      token_path=NO_TOKEN)

    nightly = [run for run in server.recurring_runs.values() if run["display_name"] == "nightly"]
    assert [run["recurring_run_id"] for run in nightly] == [newest], "the update left more than one schedule"
    assert nightly[0]["trigger"]["cron_schedule"]["cron"] == "0 45 4 * * 1-5"
    assert nightly[0]["runtime_config"]["parameters"] == {"times": 5}
    assert other in server.recurring_runs, "a schedule of another name was touched"
    # The new schedule is created before the old one is deleted: never a time without a schedule.
    changes = [(r.method, r.path) for r in server.requests if "/recurringruns" in r.path and r.method != "GET"]
    assert changes[-2:] == [("POST", "/apis/v2beta1/recurringruns"),
                            ("DELETE", f"/apis/v2beta1/recurringruns/{previous}")]
    # One pipeline; its first upload, one content-named version, then reuse of that version.
    assert len(server.pipelines) == 1
    assert len(server.requests_to("POST", "/pipelines/upload")) == 1
    assert len(server.requests_to("POST", "/pipelines/upload_version")) == 1


@pytest.mark.parametrize(("cron", "reason"), [
    ("61 * * * *", "minute field: 61 is out of range 0-59"),
    ("0 3 * *", "expected 5 fields"),
    ("0 3 * * * * *", "expected 5 fields"),
    ("0 24 * * *", "hour field: 24 is out of range 0-23"),
    ("0 3 * * 7", "use 0 for Sunday"),
    ("0 3 31-1 * *", "runs backwards"),
    ("*/0 * * * *", "step must be >= 1"),
    ("0 3 * FOO *", "'FOO' is not a number or one of JAN"),
    ("@daily", "expected 5 fields"),
])
def test_a_bad_cron_is_refused_before_any_request(server: FakeKfpServer, package: str, cron: str,
                                                  reason: str) -> None:
    with pytest.raises(ConfigError, match=reason) as refused:
        schedule(server.url, cron, package, {"times": "1"}, "nightly", "retraining", token_path=NO_TOKEN)
    assert "--cron" in str(refused.value) and repr(cron) in str(refused.value)
    # Through the CLI, compiling with --image: refused before compiling or connecting.
    args = _parse(add_schedule_arguments, ["--host", server.url, "--cron", cron, "--image", IMAGE])
    with pytest.raises(ConfigError, match=reason):
        schedule_main(args, [])
    assert server.requests == []


@pytest.mark.parametrize(("cron", "kfp_cron"), [
    ("0 3 * * *", "0 0 3 * * *"),
    ("*/15  9-17 * * MON-FRI", "0 */15 9-17 * * MON-FRI"),
    ("0 0 1 jan,jul ?", "0 0 0 1 jan,jul ?"),
    ("30 0 3 * * *", "30 0 3 * * *"),  # already KFP's 6 fields
])
def test_standard_cron_becomes_kfp_six_fields(cron: str, kfp_cron: str) -> None:
    assert to_kfp_cron(cron) == kfp_cron


@pytest.mark.parametrize(("params", "reason"), [
    ({"times": "1", "epochs": "3"}, "no parameter epochs; its parameters: flag, rate, times, word"),
    ({"times": "three"}, "times='three': the pipeline declares times as NUMBER_INTEGER"),
    ({"times": "1", "flag": "yes"}, "declares flag as BOOLEAN"),
    ({"word": "b"}, "times have no default"),
])
def test_parameters_are_checked_against_the_pipeline(server: FakeKfpServer, package: str, params: dict,
                                                     reason: str) -> None:
    with pytest.raises(ConfigError, match=reason):
        schedule(server.url, "0 3 * * *", package, params, "nightly", "retraining", token_path=NO_TOKEN)
    with pytest.raises(ConfigError, match=reason):
        submit(server.url, package, params, "once", "retraining", token_path=NO_TOKEN)
    assert server.requests == []


def test_schedule_command_end_to_end(server: FakeKfpServer, package: str, capsys: pytest.CaptureFixture) -> None:
    args = _parse(add_schedule_arguments, ["--host", server.url, "--cron", "15 2 * * 0", "--pipeline-package",
                                           package, "--param", "times=4", "--name", "sunday",
                                           "--experiment", "retraining", "--token-path", NO_TOKEN])
    assert schedule_main(args, []) == 0
    (run_id, run), = server.recurring_runs.items()
    assert run["trigger"]["cron_schedule"]["cron"] == "0 15 2 * * 0" and run["no_catchup"] is True
    assert run["display_name"] == "sunday" and run["runtime_config"]["parameters"] == {"times": 4}
    assert run_id in capsys.readouterr().out


def test_submit_command_creates_one_run_with_a_timestamped_name(server: FakeKfpServer, package: str,
                                                                tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("projected-token-123")
    args = _parse(add_submit_arguments, ["--host", server.url, "--pipeline-package", package, "--param",
                                         "times=2", "--param", "word=x=y", "--name", "scheduled",
                                         "--experiment", "retraining", "--token-path", str(token)])
    assert submit_main(args, []) == 0

    body = _only(server.requests_to("POST", "/runs")).body
    assert body["display_name"].startswith("scheduled 20")  # "<name> <UTC date time>"
    assert body["pipeline_spec"]["pipelineInfo"]["name"] == "tiny"
    assert body["runtime_config"]["parameters"] == {"times": 2, "word": "x=y"}
    assert server.experiments[body["experiment_id"]]["display_name"] == "retraining"
    assert not server.recurring_runs
    # The projected service-account token authenticates every request (multi-user KFP).
    assert {r.authorization for r in server.requests if r.path != "/apis/v2beta1/healthz"} == {
        "Bearer projected-token-123"}


def test_multi_user_kfp_gets_the_namespace(package: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from kfp.client import Client

    monkeypatch.setattr(Client, "_NAMESPACE_PATH", "/nonexistent/namespace")  # outside a pod
    with FakeKfpServer(multi_user=True) as fake:
        submit(fake.url, package, {"times": "1"}, "once", "retraining", namespace="team-a", token_path=NO_TOKEN)
    assert _only(fake.requests_to("POST", "/experiments")).body["namespace"] == "team-a"
    with FakeKfpServer(multi_user=False) as fake:
        submit(fake.url, package, {"times": "1"}, "once", "retraining", namespace="team-a", token_path=NO_TOKEN)
    assert _only(fake.requests_to("POST", "/experiments")).body["namespace"] == ""


def test_the_k8s_placeholder_package_is_refused_with_a_clear_error(server: FakeKfpServer) -> None:
    placeholder = str(REPO / "k8s" / "base" / "pipeline.yaml")
    with pytest.raises(ConfigError, match="not a compiled KFP pipeline"):
        read_pipeline_package(placeholder)
    args = _parse(add_submit_arguments, ["--host", server.url, "--pipeline-package", placeholder])
    with pytest.raises(ConfigError, match="not a compiled KFP pipeline"):
        submit_main(args, [])
    assert server.requests == []


def test_an_unreachable_host_is_one_line_not_a_traceback(package: str, capsys: pytest.CaptureFixture) -> None:
    with socket.socket() as probe:  # a port nobody listens on once closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    from shardflow.cli import main

    assert main(["submit", "--host", f"http://127.0.0.1:{port}", "--pipeline-package", package,
                 "--param", "times=1", "--token-path", NO_TOKEN]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"shardflow submit: error: cannot reach the KFP API at http://127.0.0.1:{port}"), err


def _parse(add_arguments, argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(argv)


def _task(name: str, state: str) -> dict:
    return {"display_name": name, "state": state, "task_id": name}


@pytest.mark.parametrize("tasks, state, status", [
    ([_task("train", "SUCCEEDED"), _task("push", "SUCCEEDED")], "SUCCEEDED", 0),
    ([_task("evaluate", "SUCCEEDED"), _task("push", "FAILED"), _task("shardflow-run", "FAILED")], "FAILED", 75),
    ([_task("train", "FAILED"), _task("shardflow-run", "FAILED")], "FAILED", 1),
    ([], "CANCELED", 1),
])
def test_submit_wait_exits_75_when_the_runs_push_lost_the_race(server: FakeKfpServer, package: str, tasks: list,
                                                                state: str, status: int,
                                                                monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture) -> None:
    from shardflow.cli import main
    from shardflow.pipelines import run_wait

    monkeypatch.setattr(run_wait, "POLL_SECONDS", 0.01)
    server.run_outcome, server.polls = {"state": state, "run_details": {"task_details": tasks}}, 3
    assert main(["submit", "--host", server.url, "--pipeline-package", package, "--param", "times=1",
                 "--token-path", NO_TOKEN, "--service-account", "pipeline-runner", "--wait"]) == status
    (run_id,) = server.runs
    assert len(server.requests_to("GET", f"/runs/{run_id}")) == 4  # RUNNING three times, then the end
    assert _only(server.requests_to("POST", "/runs")).body["service_account"] == "pipeline-runner"
    err = capsys.readouterr().err
    assert (err == "") == (status == 0) and len(err.splitlines()) <= 1, err
    if status == 75:
        assert "push step" in err


def test_submit_wait_gives_up_after_its_timeout(server: FakeKfpServer, package: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from shardflow.pipelines import run_wait

    monkeypatch.setattr(run_wait, "POLL_SECONDS", 0.05)
    server.polls = 10 ** 6  # never ends
    args = _parse(add_submit_arguments, ["--host", server.url, "--pipeline-package", package, "--param", "times=1",
                                         "--token-path", NO_TOKEN, "--wait", "--timeout", "0.3"])
    with pytest.raises(Exception, match="did not finish within 0.3 s") as raised:
        submit_main(args, [])
    assert raised.value.exit_code == 1
    assert 3 <= len(server.requests_to("GET", f"/runs/{next(iter(server.runs))}")) <= 8
