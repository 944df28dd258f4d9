"""A real MLflow tracking server on loopback for the tests: `mlflow server` with a SQLite store and served
artifacts, started by the tests (about 11 s: its database's migrations). `restart()` starts it again on the
same port and database, as an operator brings a killed server back."""
from __future__ import annotations

import signal
import sys
from pathlib import Path

from loopback_server import LoopbackServer, free_port


class MlflowServer(LoopbackServer):
    def __init__(self, root: Path, port: int | None = None) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        port = port or free_port()
        mlflow = Path(sys.executable).with_name("mlflow")
        argv = [str(mlflow), "server", "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}",
                "--artifacts-destination", str(root / "artifacts"), "--host", "127.0.0.1", "--port", str(port),
                "--workers", "1"]
        log = root / f"mlflow-{len(list(root.glob('mlflow-*.log')))}.log"
        super().__init__("mlflow server", argv, port, "/health", log, timeout=120, group=True)

    def kill(self) -> None:
        """SIGKILL to the server and its workers: no shutdown, as when its node is lost."""
        self.stop(signal.SIGKILL)

    def restart(self) -> "MlflowServer":
        return MlflowServer(self.root, self.port)
