"""`run(config)`: one tf.data service server, in this process, until it is stopped (SIGTERM, SIGINT).

The dispatcher hands each job's work to the workers and, with a journal, records its state there, so a
dispatcher restarted with the same journal and port resumes the jobs it had. A worker registers with its
dispatcher and runs the dataset graphs consumers send: it needs the package and read access to the
shards (a bucket or a shared volume), nothing else. Both listen on every interface: TensorFlow 2.16's
servers take no bind address, so on a cluster a NetworkPolicy keeps others out (k8s/).
"""
from __future__ import annotations

import signal
import threading
from typing import Any, Callable

from .config import DispatcherServerConfig, WorkerServerConfig


def run(config: DispatcherServerConfig | WorkerServerConfig, echo: Callable[[str], None] = print,
        stop: threading.Event | None = None) -> dict[str, Any]:
    """Serves until `stop` is set or the process gets SIGTERM/SIGINT; returns where it listened."""
    server, described = start(config)
    echo(f"data-service: {described}")
    stop = stop or _stopped_by_signals()
    stop.wait()
    server.stop()
    return {"target": server.target if isinstance(config, DispatcherServerConfig) else config.worker_address}


def start(config: DispatcherServerConfig | WorkerServerConfig) -> tuple[Any, str]:
    """The started server and one line saying what listens where."""
    from tensorflow.data.experimental import service

    if isinstance(config, DispatcherServerConfig):
        server = service.DispatchServer(service.DispatcherConfig(
            port=config.port, work_dir=config.journal, fault_tolerant_mode=config.fault_tolerant,
            worker_addresses=list(config.workers) or None))
        journal = f"journal {config.journal}" if config.journal else "no journal: a restart loses its jobs"
        workers = (f"{len(config.workers)} fixed workers" if config.workers else "workers as they register: no "
                   "static sharding, which `shardflow train --data-service` needs (--worker, --workers)")
        return server, f"dispatcher at {server.target} ({journal}; {workers})"
    server = service.WorkerServer(service.WorkerConfig(
        dispatcher_address=config.dispatcher_address, worker_address=config.worker_address, port=config.port))
    return server, f"worker at {config.worker_address}, dispatcher {config.dispatcher_address}"


def _stopped_by_signals() -> threading.Event:
    stop = threading.Event()
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, lambda *_: stop.set())
    return stop
