"""KServe's own storage initializer on a storageUri, then TF Serving's version rule on what it downloaded.

    found = kserve_download("s3://b/serving/7/model", tmp_path / "mnt")   # Storage.download, in .venv-kserve
    found.version, found.files, found.bytes, found.integer_folders

`kserve-storage` (KServe's storage-initializer code) pins protobuf 7, so it runs in its own environment
(.venv-kserve, `make kserve-setup`) as a subprocess, with this process's AWS / STORAGE_EMULATOR_HOST variables,
as an InferenceService's init container runs it before `tensorflow_model_server --model_base_path=/mnt/models`
(with S3_MAX_FILE_CONCURRENCY=1, its own setting: one S3 download process instead of four, for the tests' CPU).
TF Serving's rule there (no models.config under KServe): the highest integer-named folder of the base path;
it loads that folder as a SavedModel, so the version is only loadable when its saved_model.pb is there.
"""
from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KSERVE_PYTHON = ROOT / ".venv-kserve" / "bin" / "python"
DOWNLOAD = "import sys; from kserve_storage import Storage; Storage.download(sys.argv[1], sys.argv[2])"


@dataclass(frozen=True)
class Download:
    integer_folders: list[int]  # the download's top-level integer-named folders, sorted
    version: int | None  # what TF Serving would load: the highest of them, when it holds saved_model.pb
    files: dict[str, bytes]  # every file downloaded, relative to the download's root ('/'-separated)

    @property
    def bytes(self) -> int:
        return sum(len(data) for data in self.files.values())

    def version_files(self, version: int) -> dict[str, bytes]:
        """The files of one integer folder, relative to it."""
        prefix = f"{version}/"
        return {name[len(prefix):]: data for name, data in self.files.items() if name.startswith(prefix)}


def kserve_download(storage_uri: str, out_dir: Path) -> Download:
    """`Storage.download(storage_uri, out_dir)` in KServe's environment, then what TF Serving would load there."""
    assert KSERVE_PYTHON.is_file(), f"{KSERVE_PYTHON} is missing: run `make kserve-setup` (make test does)"
    env = {**os.environ, "PYTHONPATH": "", "S3_MAX_FILE_CONCURRENCY": "1"}  # KServe's knob: one download process
    done = subprocess.run([str(KSERVE_PYTHON), "-c", DOWNLOAD, storage_uri, str(out_dir)], capture_output=True,
                          text=True, timeout=180, env=env)
    assert done.returncode == 0, f"kserve-storage failed on {storage_uri}: {done.stderr[-3000:]}"
    files = {}
    for folder, _, names in os.walk(out_dir, followlinks=True):  # a local URI is downloaded as symlinks
        for name in names:
            path = Path(folder, name)
            files[path.relative_to(out_dir).as_posix()] = path.read_bytes()
    integers = sorted(int(p.name) for p in Path(out_dir).iterdir() if p.is_dir() and p.name.isdigit())
    top = integers[-1] if integers else None
    loadable = top is not None and (Path(out_dir) / str(top) / "saved_model.pb").is_file()
    return Download(integers, top if loadable else None, files)
