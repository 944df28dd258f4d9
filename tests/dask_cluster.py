"""A shared-nothing Dask cluster for the tests: a scheduler and N workers as separate processes.

Each worker runs from its own empty working directory with its own TMPDIR, DASK_TEMPORARY_DIRECTORY,
`--local-directory` and HOME (so no ~/.aws either), and gets object-store settings only through the
environment it is given (the AWS_* variables). Optionally (`hide`) each worker runs in its own mount
namespace in which the given local directories (the launcher's data and outputs) are covered by an
empty tmpfs: a worker that tried to read the launcher's disk would find nothing there. With
`isolate_network`, each worker also runs in its own network namespace that has nothing but its own
loopback: relays in the launcher (sockets opened inside each namespace by a thread that entered it,
see `Relay`) carry exactly the scheduler's port, the `reachable` ports (the S3 server) and the other
workers' ports, all on 127.0.0.1 — no other address is created or reached. Every process is started
in its own process group and the whole group is killed at `stop()`.
"""
from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

from loopback_server import free_port

# What a worker inherits from the launcher's environment; everything else it is given explicitly.
INHERITED = ("PATH", "LANG", "LC_ALL", "TF_USE_LEGACY_KERAS", "TF_CPP_MIN_LOG_LEVEL")


CLONE_NEWNET = 0x40000000


def can_hide_directories() -> bool:
    """Whether this process may create mount namespaces (root with CAP_SYS_ADMIN)."""
    return _can_unshare("--mount", "--propagation", "private")


def can_isolate_network() -> bool:
    """Whether this process may create network namespaces and enter them (setns)."""
    return _can_unshare("--net", "sh", "-c", "ip link set lo up") and hasattr(ctypes.CDLL(None), "setns")


def _can_unshare(*args: str) -> bool:
    if not shutil.which("unshare") or os.geteuid() != 0:
        return False
    command = ["unshare", *args] if args[-1] != "private" else ["unshare", *args, "true"]
    return subprocess.run(command, capture_output=True).returncode == 0


def _in_namespace(namespace: str | None, make: Callable[[], socket.socket]) -> socket.socket:
    """`make()` run by a thread that entered the network namespace at `namespace` (None: this one's).

    A socket belongs to the namespace it was created in, whichever thread uses it later."""
    result: list = []

    def run() -> None:
        try:
            if namespace:
                fd = os.open(namespace, os.O_RDONLY)
                try:
                    if ctypes.CDLL(None, use_errno=True).setns(fd, CLONE_NEWNET) != 0:
                        raise OSError(ctypes.get_errno(), f"setns {namespace}")
                finally:
                    os.close(fd)
            result.append(make())
        except BaseException as error:  # handed to the caller
            result.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if isinstance(result[0], BaseException):
        raise result[0]
    return result[0]


class Relay:
    """Listens on 127.0.0.1:`port` in namespace `listen_ns` and pipes every connection to
    127.0.0.1:`port` in namespace `target_ns` (None: the launcher's own)."""

    def __init__(self, port: int, listen_ns: str | None, target_ns: str | None) -> None:
        self.port, self.target_ns = port, target_ns
        deadline = time.monotonic() + 10
        while True:  # a fresh namespace's loopback may not be up yet
            try:
                self.sock = _in_namespace(listen_ns, self._listener)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        threading.Thread(target=self._accept, daemon=True).start()

    def _listener(self) -> socket.socket:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        sock.listen(64)
        return sock

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:  # closed
                return
            try:
                out = _in_namespace(self.target_ns, socket.socket)
                out.connect(("127.0.0.1", self.port))
            except OSError:
                conn.close()
                continue
            for source, sink in ((conn, out), (out, conn)):
                threading.Thread(target=_pipe, args=(source, sink), daemon=True).start()

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        except OSError:
            pass
        self.sock.close()


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(1 << 16):
            sink.sendall(data)
        sink.shutdown(socket.SHUT_WR)
    except OSError:
        source.close()
        sink.close()


class DaskCluster:
    """`dask scheduler` and `workers` x `dask worker` (1 thread each) on 127.0.0.1."""

    def __init__(self, workers: int = 2, env: dict[str, str] | None = None, hide: tuple[Path, ...] = (),
                 isolate_network: bool = False, reachable: tuple[int, ...] = ()) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="shardflow-dask-"))  # outside pytest's tree (may be hidden)
        self.port = free_port()
        self.address = f"tcp://127.0.0.1:{self.port}"
        self.hidden = hide
        self.worker_dirs = [self.root / f"worker{i}" for i in range(workers)]
        self._processes: list[subprocess.Popen] = []
        self._logs: list = []
        self._relays: list[Relay] = []
        self.isolated = isolate_network
        ports = [free_port() for _ in self.worker_dirs]
        try:
            self._start("scheduler", [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                                      "--port", str(self.port), "--no-dashboard"], self.root / "scheduler", {}, ())
            for i, home in enumerate(self.worker_dirs):
                address = f"tcp://127.0.0.1:{ports[i]}"
                command = [sys.executable, "-m", "distributed.cli.dask_worker", self.address, "--name", f"w{i}",
                           "--nthreads", "1", "--no-nanny", "--listen-address", address, "--contact-address",
                           address, "--no-dashboard", "--local-directory", str(home / "local"), "--death-timeout", "60"]
                self._start(f"worker{i}", command, home, env or {}, hide)
            if isolate_network:
                self._connect_namespaces(ports, (self.port, *reachable))
            self._wait_for_workers(workers, timeout=60)
        except BaseException:
            self.stop(remove=False)  # the logs stay for the error message's folder
            raise

    def _start(self, name: str, command: list[str], home: Path, extra: dict[str, str], hide: tuple[Path, ...]) -> None:
        for sub in ("cwd", "tmp", "local"):
            (home / sub).mkdir(parents=True, exist_ok=True)
        env = {k: os.environ[k] for k in INHERITED if k in os.environ}
        env.update(HOME=str(home), TMPDIR=str(home / "tmp"), DASK_TEMPORARY_DIRECTORY=str(home / "tmp"),
                   PYTHONDONTWRITEBYTECODE="1", **extra)
        steps = [f"mount -t tmpfs -o size=1m shardflow-hidden {_quote(p)}" for p in hide]
        if hide or (self.isolated and name != "scheduler"):  # private mount (and network) namespaces
            net = ["--net"] if self.isolated and name != "scheduler" else []
            steps = (["ip link set lo up"] if net else []) + steps
            command = ["unshare", *net, "--mount", "--propagation", "private", "sh", "-c",
                       f"{' && '.join(steps)} && exec {' '.join(_quote(c) for c in command)}"]
        log = open(self.root / f"{name}.log", "wb")
        self._logs.append(log)
        self._processes.append(subprocess.Popen(command, cwd=home / "cwd", env=env, stdout=log,
                                                stderr=subprocess.STDOUT, start_new_session=True))

    def _connect_namespaces(self, worker_ports: list[int], host_ports: tuple[int, ...]) -> None:
        """Relays: the launcher reaches each worker's port; each worker reaches `host_ports` and its peers."""
        own = os.readlink("/proc/self/ns/net")
        namespaces = []
        for process in self._processes[1:]:
            path = f"/proc/{process.pid}/ns/net"
            deadline = time.monotonic() + 10
            while os.readlink(path) == own:  # unshare has not made the namespace yet
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError(f"worker {process.pid} got no network namespace")
                time.sleep(0.02)
            namespaces.append(path)
        for port, namespace in zip(worker_ports, namespaces):
            self._relays.append(Relay(port, None, namespace))
        for i, namespace in enumerate(namespaces):
            peers = [port for j, port in enumerate(worker_ports) if j != i]
            self._relays += [Relay(port, namespace, None) for port in (*host_ports, *peers)]

    def _wait_for_workers(self, count: int, timeout: float) -> None:
        from distributed import Client

        deadline = time.monotonic() + timeout
        while True:
            try:
                with Client(self.address, timeout=5) as client:
                    client.wait_for_workers(count, timeout=max(1.0, deadline - time.monotonic()))
                    return
            except OSError:
                if any(p.poll() is not None for p in self._processes) or time.monotonic() > deadline:
                    raise RuntimeError(f"the Dask cluster did not start; see the logs in {self.root}") from None
                time.sleep(0.2)

    def worker_addresses(self) -> list[str]:
        from distributed import Client

        with Client(self.address, timeout=10) as client:
            return sorted(client.scheduler_info()["workers"])

    def log(self, name: str) -> str:
        return (self.root / f"{name}.log").read_text(errors="replace")

    def alive(self) -> list[int]:
        """Process groups of this cluster that still have a member."""
        found = []
        for process in self._processes:
            try:
                os.killpg(process.pid, 0)
                found.append(process.pid)
            except ProcessLookupError:
                pass
        return found

    def stop(self, remove: bool = True) -> None:
        """Kills every process group this cluster started (and the relays)."""
        for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            for pgid in reversed(self.alive()):  # workers before the scheduler
                os.killpg(pgid, sig)
            deadline = time.monotonic() + grace
            while self.alive() and time.monotonic() < deadline:
                for process in self._processes:
                    process.poll()  # reap the group leaders
                time.sleep(0.1)
        for process in self._processes:
            process.poll()
        for log in self._logs:
            log.close()
        for relay in self._relays:
            relay.close()
        if remove:  # the workers' folders were checked by the tests
            shutil.rmtree(self.root, ignore_errors=True)


def _quote(text: object) -> str:
    return "'" + str(text).replace("'", "'\"'\"'") + "'"
