"""`shardflow data-service dispatcher|worker`: real tf.data service servers in processes of their own, on this
machine, fed a real dataset by a consumer in the test process; one dispatcher SIGKILLed and restarted from
its journal; each server's own flags (its --help, the other's refused)."""
from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from helpers_data_service import SHARDFLOW, Servers
from loopback_server import free_port

pytestmark = pytest.mark.cluster


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[Servers]:
    started = Servers(tmp_path)
    yield started
    started.stop_all()


def _consumer(target: str, size: int, job: str):  # noqa: ANN202 (a tf.data iterator)
    import tensorflow as tf

    squares = tf.data.Dataset.range(size).map(lambda x: x * x)
    return iter(squares.apply(tf.data.experimental.service.distribute("distributed_epoch", target, job_name=job)))


def test_two_workers_from_the_cli_serve_every_element_once(servers: Servers, tmp_path: Path) -> None:
    port = free_port()
    servers.start("dispatcher", "dispatcher", "--port", str(port), "--journal", str(tmp_path / "journal"))
    servers.wait_for_line("dispatcher", f"dispatcher at grpc://localhost:{port}")
    for name in ("w1", "w2"):
        servers.start(name, "worker", "--dispatcher", f"grpc://localhost:{port}", "--port", str(free_port()))
        servers.wait_for_line(name, f"dispatcher localhost:{port}")
    got = sorted(int(value) for value in _consumer(f"grpc://localhost:{port}", 500, "once"))
    assert got == [x * x for x in range(500)]  # every element once: none lost, none repeated
    servers.processes["dispatcher"].send_signal(signal.SIGTERM)  # stops in one line, exit 0
    assert servers.processes["dispatcher"].wait(timeout=60) == 0


def test_a_dispatcher_restarted_from_its_journal_resumes_the_job(servers: Servers, tmp_path: Path) -> None:
    port, journal = free_port(), str(tmp_path / "journal")
    servers.start("dispatcher", "dispatcher", "--port", str(port), "--journal", journal)
    servers.wait_for_line("dispatcher", "dispatcher at")
    servers.start("worker", "worker", "--dispatcher", f"localhost:{port}", "--port", str(free_port()))
    servers.wait_for_line("worker", "worker at")
    elements = _consumer(f"grpc://localhost:{port}", 20_000, "resumed")
    got = [int(next(elements)) for _ in range(100)]
    servers.processes["dispatcher"].kill()  # SIGKILL: no chance to write anything more
    servers.processes["dispatcher"].wait()
    servers.start("dispatcher-again", "dispatcher", "--port", str(port), "--journal", journal)
    got += [int(value) for value in elements]
    # The job went on: nothing lost. (A worker's buffered elements may be sent twice after a restart.)
    assert set(got) == {x * x for x in range(20_000)}
    assert "dispatcher at" in (tmp_path / "dispatcher-again.log").read_text()


@pytest.mark.parametrize(("argv", "says"), [
    (["worker", "--port", "5051"], "a worker needs --dispatcher HOST:PORT"),
    (["worker", "--dispatcher", "dispatcher"], "--dispatcher must be [grpc://]HOST:PORT, got 'dispatcher'"),
    (["dispatcher", "--port", "70000"], "--port must be a TCP port (1-65535, or 0: any free one), got 70000"),
    (["dispatcher", "--dispatcher", "x:1"], "unknown option --dispatcher (not a shardflow data-service dispatcher "
                                            "option)"),
    (["dispatcher", "--workers", "2", "--worker-template", "w.workers:5051"],
     "--workers N (>= 1) and --worker-template with {i} go together, got 2 and 'w.workers:5051'"),
    (["worker", "--dispatcher", "d:5050", "--workers", "2"], "unknown option --workers (not a shardflow data-service "
                                                             "worker option)"),
])
def test_a_wrong_flag_is_one_line_and_exit_2(argv: list[str], says: str) -> None:
    done = subprocess.run([SHARDFLOW, "data-service", *argv], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr == f"shardflow data-service {argv[0]}: error: {says}\n"


@pytest.mark.unit
@pytest.mark.parametrize(("role", "mine", "theirs"), [
    ("dispatcher", {"--port", "--journal", "--worker", "--workers", "--worker-template"}, {"--dispatcher",
                                                                                          "--advertise"}),
    ("worker", {"--dispatcher", "--port", "--advertise"}, {"--journal", "--worker", "--workers", "--worker-template"}),
])
def test_each_servers_help_lists_its_own_flags(role: str, mine: set[str], theirs: set[str],
                                               capsys: pytest.CaptureFixture) -> None:
    from shardflow.cli import main

    with pytest.raises(SystemExit) as done:
        main(["data-service", role, "--help"])
    shown = set(re.findall(r"(--[a-z-]+)", capsys.readouterr().out))
    assert done.value.code == 0 and mine <= shown and not shown & theirs, shown
