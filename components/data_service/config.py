"""The tf.data service's two servers, as `shardflow data-service dispatcher|worker` starts them.

>>> DispatcherServerConfig(port=5050, journal="/vol/journal").fault_tolerant
True
>>> WorkerServerConfig(dispatcher="grpc://dispatcher:5050", port=5051).dispatcher_address
'dispatcher:5050'
>>> worker_addresses(2, "worker-{i}.workers:5051")
('worker-0.workers:5051', 'worker-1.workers:5051')
>>> WorkerServerConfig(dispatcher="dispatcher", port=5051)
Traceback (most recent call last):
...
shardflow.core.errors.ConfigError: --dispatcher must be [grpc://]HOST:PORT, got 'dispatcher'
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..core.errors import ConfigError

ROLES = ("dispatcher", "worker")
_ADDRESS = re.compile(r"^(grpc://)?(?P<host>[^:/\s]+):(?P<port>\d+)$")


def check_port(name: str, port: int, any_port: bool = False) -> None:
    """A TCP port; `any_port`: 0 (the system picks one) is allowed too."""
    if isinstance(port, bool) or not isinstance(port, int) or not (0 if any_port else 1) <= port <= 65535:
        raise ConfigError(f"{name} must be a TCP port (1-65535{', or 0: any free one' if any_port else ''}), "
                          f"got {port!r}")


def host_port(name: str, address: str) -> str:
    """`[grpc://]HOST:PORT` → `HOST:PORT`, checked."""
    match = _ADDRESS.match(address or "")
    if match is None:
        raise ConfigError(f"{name} must be [grpc://]HOST:PORT, got {address!r}")
    check_port(name, int(match["port"]))
    return f"{match['host']}:{match['port']}"


def worker_addresses(count: int | None, template: str | None) -> tuple[str, ...]:
    """`--workers N --worker-template T`: T with {i} = 0..N-1 (a StatefulSet's pods have such names)."""
    if count is None and template is None:
        return ()
    if count is None or template is None or "{i}" not in template or count < 1:
        raise ConfigError(f"--workers N (>= 1) and --worker-template with {{i}} go together, got {count!r} and "
                          f"{template!r}")
    return tuple(template.replace("{i}", str(i)) for i in range(count))


@dataclass(frozen=True, kw_only=True)
class DispatcherServerConfig:
    """`port`: where it listens (all interfaces: TensorFlow's servers take no bind address); `journal`: its
    work directory (a path or gs:// URI on a volume that outlives the pod): with it, the dispatcher journals
    its state and a restarted one resumes the jobs (fault-tolerant mode); `workers`: the workers'
    HOST:PORT, fixed, for a static sharding (a training stream's exact order needs it)."""

    port: int
    journal: str | None = None
    workers: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_port("--port", self.port, any_port=True)
        object.__setattr__(self, "workers", tuple(host_port("--worker", w) for w in self.workers))

    @property
    def fault_tolerant(self) -> bool:
        return self.journal is not None

    def check_inputs(self) -> None:
        """Nothing read here: the journal is created by the dispatcher when absent."""


@dataclass(frozen=True, kw_only=True)
class WorkerServerConfig:
    """`dispatcher`: [grpc://]HOST:PORT; `port`: where it listens; `advertised`: the HOST:PORT the dispatcher
    and the consumers reach it at (default localhost:PORT; on a cluster, its pod's stable DNS name)."""

    dispatcher: str
    port: int
    advertised: str | None = None

    def __post_init__(self) -> None:
        host_port("--dispatcher", self.dispatcher)
        check_port("--port", self.port)
        if self.advertised is not None:
            object.__setattr__(self, "advertised", host_port("--advertise", self.advertised))

    @property
    def dispatcher_address(self) -> str:
        return host_port("--dispatcher", self.dispatcher)

    @property
    def worker_address(self) -> str:
        return self.advertised or f"localhost:{self.port}"

    def check_inputs(self) -> None:
        """Nothing read here: a worker waits for its dispatcher."""
