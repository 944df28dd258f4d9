"""`shardflow data-service`: translates flags into a dispatcher's or a worker's config. Nothing else.

    shardflow data-service dispatcher --port 5050 [--journal /vol/journal] (--worker HOST:PORT ... |
        --workers N --worker-template 'data-service-worker-{i}.data-service-workers:5051')
    shardflow data-service worker --dispatcher grpc://HOST:5050 --port 5051 [--advertise HOST:5051]

Each server is a subcommand with its own flags: `shardflow data-service dispatcher --help` lists the
dispatcher's alone, and a worker's flag given to the dispatcher is refused by name (and the other way round).
"""
from __future__ import annotations

import argparse

from ..core.errors import ConfigError
from .config import DispatcherServerConfig, WorkerServerConfig, worker_addresses

_PORT_HELP = "where the server listens (default {}; all interfaces: keep it inside a network policy)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    roles = parser.add_subparsers(dest="role", required=True, metavar="{dispatcher,worker}")
    dispatcher = roles.add_parser("dispatcher", help="the dispatcher (one): hands each job's shards to the workers",
                                  description="A tf.data service dispatcher for `shardflow train --data-service`: "
                                              "the Trainer's static sharding needs its workers named (--worker or "
                                              "--workers with --worker-template).")
    add = dispatcher.add_argument
    add("--port", type=int, default=5050, help=_PORT_HELP.format(5050) + "; 0: any free port")
    add("--journal", help="its journal directory (path or gs://) on a volume that outlives it: a dispatcher "
                          "restarted with it and the same port resumes its jobs")
    add("--worker", action="append", default=[], metavar="HOST:PORT",
        help="a worker's address, repeatable: fixed workers make the static sharding (exact order) the Trainer needs")
    add("--workers", type=int, metavar="N", help="N fixed workers named by --worker-template")
    add("--worker-template", metavar="HOST{i}:PORT", help="worker i's address, i = 0..N-1 (a StatefulSet's pods: "
                                                          "worker-{i}.workers:5051)")
    worker = roles.add_parser("worker", help="a worker (any number): runs each job's shard of the input",
                              description="A tf.data service worker: registers with its dispatcher and runs the "
                                          "Trainer's input on its CPUs (it reads the shards itself).")
    add = worker.add_argument
    add("--dispatcher", metavar="[grpc://]HOST:PORT", help="its dispatcher (required)")
    add("--port", type=int, default=5051, help=_PORT_HELP.format(5051))
    add("--advertise", metavar="HOST:PORT", help="the address the dispatcher and the Trainer reach it at (default "
                                                 "localhost:PORT; on a cluster, the pod's stable DNS name)")
    for name, role in (("dispatcher", dispatcher), ("worker", worker)):  # a leftover flag is checked against
        role.set_defaults(command_parser=role, command=f"data-service {name}")  # this server's, and named so


def config_from_args(args: argparse.Namespace, extra: list[str]) -> DispatcherServerConfig | WorkerServerConfig:
    del extra  # not a Beam command: always empty
    if args.role == "dispatcher":
        return DispatcherServerConfig(port=args.port, journal=args.journal,
                                      workers=(*args.worker, *worker_addresses(args.workers, args.worker_template)))
    if not args.dispatcher:
        raise ConfigError("a worker needs --dispatcher HOST:PORT")
    return WorkerServerConfig(dispatcher=args.dispatcher, port=args.port, advertised=args.advertise)
