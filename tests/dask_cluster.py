"""A shared-nothing Dask cluster for the tests: a scheduler and N workers as separate processes.

Each worker runs from its own empty working directory with its own TMPDIR, DASK_TEMPORARY_DIRECTORY,
`--local-directory` and HOME (so no ~/.aws either), and gets object-store settings only through the
environment it is given (the AWS_* variables). Optionally (`hide`) each worker runs in its own mount
namespace in which the given local directories (the launcher's data and outputs) are covered by an
empty tmpfs: a worker that tried to read the launcher's disk would find nothing there. Every process
is started in its own process group and the whole group is killed at `stop()`.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from s3_server import free_port

# What a worker inherits from the launcher's environment; everything else it is given explicitly.
INHERITED = ("PATH", "LANG", "LC_ALL", "TF_USE_LEGACY_KERAS", "TF_CPP_MIN_LOG_LEVEL")


def can_hide_directories() -> bool:
    """Whether this process may create mount namespaces (root with CAP_SYS_ADMIN)."""
    if not shutil.which("unshare") or os.geteuid() != 0:
        return False
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "true"],
                          capture_output=True).returncode == 0


class DaskCluster:
    """`dask scheduler` and `workers` x `dask worker` (1 thread each) on 127.0.0.1."""

    def __init__(self, workers: int = 2, env: dict[str, str] | None = None, hide: tuple[Path, ...] = ()) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="shardflow-dask-"))  # outside pytest's tree (may be hidden)
        self.port = free_port()
        self.address = f"tcp://127.0.0.1:{self.port}"
        self.hidden = hide
        self.worker_dirs = [self.root / f"worker{i}" for i in range(workers)]
        self._processes: list[subprocess.Popen] = []
        self._logs: list = []
        try:
            self._start("scheduler", [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                                      "--port", str(self.port), "--no-dashboard"], self.root / "scheduler", {}, ())
            for i, home in enumerate(self.worker_dirs):
                command = [sys.executable, "-m", "distributed.cli.dask_worker", self.address, "--name", f"w{i}",
                           "--nthreads", "1", "--nworkers", "1", "--host", "127.0.0.1", "--no-dashboard",
                           "--local-directory", str(home / "local"), "--death-timeout", "60"]
                self._start(f"worker{i}", command, home, env or {}, hide)
            self._wait_for_workers(workers, timeout=60)
        except BaseException:
            self.stop()
            raise

    def _start(self, name: str, command: list[str], home: Path, extra: dict[str, str], hide: tuple[Path, ...]) -> None:
        for sub in ("cwd", "tmp", "local"):
            (home / sub).mkdir(parents=True, exist_ok=True)
        env = {k: os.environ[k] for k in INHERITED if k in os.environ}
        env.update(HOME=str(home), TMPDIR=str(home / "tmp"), DASK_TEMPORARY_DIRECTORY=str(home / "tmp"),
                   PYTHONDONTWRITEBYTECODE="1", **extra)
        if hide:  # a private mount namespace: the hidden directories are empty tmpfs mounts
            mounts = " && ".join(f"mount -t tmpfs -o size=1m shardflow-hidden {_quote(p)}" for p in hide)
            command = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                       f"{mounts} && exec {' '.join(_quote(c) for c in command)}"]
        log = open(self.root / f"{name}.log", "wb")
        self._logs.append(log)
        self._processes.append(subprocess.Popen(command, cwd=home / "cwd", env=env, stdout=log,
                                                stderr=subprocess.STDOUT, start_new_session=True))

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

    def stop(self) -> None:
        """Kills every process group this cluster started (nannies and their worker children)."""
        for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
            for pgid in self.alive():
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


def _quote(text: object) -> str:
    return "'" + str(text).replace("'", "'\"'\"'") + "'"
