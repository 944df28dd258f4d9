"""`shardflow data-service`: translates flags into a dispatcher's or a worker's config. Nothing else.

    shardflow data-service dispatcher --port 5050 [--journal /vol/journal] [--worker HOST:PORT ...]
        [--workers N --worker-template 'data-service-worker-{i}.data-service-workers:5051']
    shardflow data-service worker --dispatcher grpc://HOST:5050 --port 5051 [--advertise HOST:5051]
"""
from __future__ import annotations

import argparse

from ..core.errors import ConfigError
from .config import ROLES, DispatcherServerConfig, WorkerServerConfig, worker_addresses


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("role", choices=ROLES, help="which server: the dispatcher (one per job) or a worker (any number)")
    add("--port", type=int, default=None, help="where the server listens (dispatcher default 5050, worker 5051; "
                                               "all interfaces: keep it inside a network policy)")
    add("--journal", help="dispatcher: its journal directory (path or gs://): a restarted dispatcher resumes its jobs")
    add("--worker", action="append", default=[], metavar="HOST:PORT",
        help="dispatcher: a worker's address, repeatable; fixed workers make a static sharding (exact order)")
    add("--workers", type=int, metavar="N", help="dispatcher: N fixed workers named by --worker-template")
    add("--worker-template", metavar="HOST{i}:PORT", help="dispatcher: worker i's address, i = 0..N-1 (a "
                                                          "StatefulSet's pods: worker-{i}.workers:5051)")
    add("--dispatcher", metavar="[grpc://]HOST:PORT", help="worker: its dispatcher")
    add("--advertise", metavar="HOST:PORT", help="worker: the address others reach it at (default localhost:PORT)")


def config_from_args(args: argparse.Namespace, extra: list[str]) -> DispatcherServerConfig | WorkerServerConfig:
    del extra  # not a Beam command: always empty
    if args.role == "dispatcher":
        if args.dispatcher or args.advertise:
            raise ConfigError("--dispatcher and --advertise are a worker's flags")
        return DispatcherServerConfig(port=5050 if args.port is None else args.port, journal=args.journal,
                                      workers=(*args.worker, *worker_addresses(args.workers, args.worker_template)))
    if args.journal or args.worker or args.workers is not None or args.worker_template:
        raise ConfigError("--journal, --worker, --workers and --worker-template are the dispatcher's flags")
    if not args.dispatcher:
        raise ConfigError("a worker needs --dispatcher HOST:PORT")
    return WorkerServerConfig(dispatcher=args.dispatcher, port=5051 if args.port is None else args.port,
                              advertised=args.advertise)
