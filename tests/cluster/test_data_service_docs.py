"""docs/data-service.md's examples work as written: the one-machine lines run (each server a process of its own,
on free ports instead of 5050-5052) and `shardflow train` trains on them with nothing made here; the cluster
lines name the same workers on both sides (the dispatcher's list holds the address each worker advertises)."""
from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from doc_checks import REPO
from helpers_data_service import SHARDFLOW, Servers
from loopback_server import free_port

from shardflow.cli import build_parser
from shardflow.data_service.cli import config_from_args

pytestmark = pytest.mark.cluster
PAGE = REPO / "docs" / "data-service.md"


def _blocks() -> list[list[list[str]]]:
    """Each fenced block's `shardflow` command lines, as words (continuations joined)."""
    blocks = re.findall(r"^```\n(.*?)^```", PAGE.read_text(), re.S | re.M)
    lines = [re.sub(r"\\\n\s*", " ", block).splitlines() for block in blocks]
    return [[shlex.split(line) for line in block if line.startswith("shardflow ")] for block in lines]


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[Servers]:
    started = Servers(tmp_path)
    yield started
    started.stop_all()


def test_the_one_machine_example_trains_with_nothing_made_here(servers: Servers, digits_examples: Path,
                                                               tmp_path: Path) -> None:
    ports = {str(port): str(free_port()) for port in (5050, 5051, 5052)}
    lines = [[re.sub(r"\b505[012]\b", lambda m: ports[m.group(0)], word) for word in line] for line in _blocks()[0]]
    assert [line[1:3] for line in lines] == [["data-service", "dispatcher"], ["data-service", "worker"],
                                             ["data-service", "worker"], ["train", "--examples"]]
    servers.start("dispatcher", *lines[0][2:])
    servers.wait_for_line("dispatcher", "(no journal: a restart loses its jobs; 2 fixed workers)")
    for number, line in enumerate(lines[1:3]):
        servers.start(f"w{number}", *line[2:])
    for number in range(2):
        servers.wait_for_line(f"w{number}", "worker at")
    train = [{"out/examples": str(digits_examples), "out/model": str(tmp_path / "model")}.get(word, word)
             for word in lines[3]]
    done = subprocess.run([SHARDFLOW, *train[1:]], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    served = json.loads((tmp_path / "model" / "training.json").read_text())["data_service"]
    assert served["batches_made_here"] == served["stalls"] == 0 and served["batches_served"] > 0
    assert served["examples_lost"] == served["examples_repeated"] == 0
    assert "data service:" not in done.stdout  # no event to report


@pytest.mark.unit
def test_the_cluster_example_names_the_same_workers_on_both_sides() -> None:
    dispatcher, worker = (config_from_args(build_parser().parse_args(line[1:]), []) for line in _blocks()[1])
    assert worker.worker_address in dispatcher.workers and len(dispatcher.workers) == 2
    assert dispatcher.fault_tolerant and worker.dispatcher_address.endswith(f":{dispatcher.port}")
