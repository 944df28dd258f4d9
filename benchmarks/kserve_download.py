"""What KServe's storage initializer downloads for a pushed version: its bytes against the version's, and its time.

    python -m benchmarks.kserve_download --root /tmp/kd                 # a local serving directory
    moto_server -H 127.0.0.1 -p 5055 &                                   # or any S3 endpoint, with the AWS variables
    AWS_ENDPOINT_URL=http://127.0.0.1:5055 ... python -m benchmarks.kserve_download --root s3://bucket/kd

Pushes one model of `--megabytes` random variables into ROOT/serving, then runs
`kserve_storage.Storage.download(storage_uri, OUT)` in .venv-kserve (`make kserve-setup`) under /usr/bin/time.
Prints one JSON line: the version's bytes, the download's bytes and files, their ratio, wall and CPU seconds.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
from pathlib import Path

from shardflow.core import storage
from shardflow.pusher import push_model, read_pointer
from testkit.serving_oracle import candidate

KSERVE_PYTHON = Path(__file__).resolve().parents[1] / ".venv-kserve" / "bin" / "python"
DOWNLOAD = "import sys; from kserve_storage import Storage; Storage.download(sys.argv[1], sys.argv[2])"


def measure(root: str, megabytes: int) -> dict:
    model, _ = candidate(root, "big", "none")
    storage.write_bytes(storage.join(model, "variables", "variables.data-00000-of-00001"), os.urandom(megabytes << 20))
    serving = storage.join(root, "serving")
    push_model(model, serving, gated_against=None)
    pointer = read_pointer(serving)
    version_bytes = sum(storage.size(path) for path in storage.list_files(pointer["model"]))
    out = Path(tempfile.mkdtemp(prefix="kserve-download-"))
    timed = subprocess.run(["/usr/bin/time", "-f", "%e %U %S", str(KSERVE_PYTHON), "-c", DOWNLOAD,
                            pointer["storage_uri"], str(out)], capture_output=True, text=True, check=True)
    wall, user, system = (float(x) for x in timed.stderr.strip().splitlines()[-1].split())
    files = [Path(folder, name) for folder, _, names in os.walk(out, followlinks=True) for name in names]
    downloaded = sum(path.stat().st_size for path in files)
    return {"storage_uri": pointer["storage_uri"], "version": pointer["version"], "version_bytes": version_bytes,
            "downloaded_bytes": downloaded, "files": sorted(str(p.relative_to(out)) for p in files),
            "ratio": round(downloaded / version_bytes, 4), "wall_s": wall, "cpu_s": round(user + system, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="a local folder or an s3:// / gs:// prefix, written into")
    parser.add_argument("--megabytes", type=int, default=32)
    args = parser.parse_args()
    print(json.dumps(measure(args.root, args.megabytes)))


if __name__ == "__main__":
    main()
