"""ExampleGen with its index, data root, images and output on S3 (the moto server on loopback), and once on gs://.

Every run goes through the real `shardflow example-gen` command; the bucket is inspected with the
test's own boto3 client, independent of shardflow's storage layer.
"""
from __future__ import annotations

import gzip
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from helpers_images import png_bytes, random_pixels, write_csv, write_png
from helpers_s3 import get_bytes, list_keys, put_bytes, upload_tree
from s3_server import ACCESS_KEY, SECRET_KEY
from shardflow.cli import main as shardflow_main
from shardflow.core.example_rows import read_example_rows
from shardflow.core.manifest import Manifest
from shardflow.core.tfrecord import iter_records

SHARDFLOW = str(Path(sys.executable).with_name("shardflow"))
NUM_FILES = 12
SHAPE = (8, 8, 3)


def _dataset(root: Path, rows: int, extra_rows: list[list[object]] = ()) -> Path:
    """`rows` rows of small RGB PNGs (NUM_FILES files, repeated) with a label and a row id, plus `extra_rows`."""
    rng = np.random.default_rng(3)
    for i in range(NUM_FILES):
        write_png(root / "img" / f"{i:03d}.png", random_pixels(rng, SHAPE))
    body = [[f"img/{r % NUM_FILES:03d}.png", r % 3, r] for r in range(rows)]
    write_csv(root / "all.csv", ["x", "y", "row_id"], body + list(extra_rows))
    return root


def _data_lines(csv_text: str) -> int:
    """Data rows counted from the CSV text itself: non-blank lines after the header (no quoted newlines here)."""
    return sum(1 for line in csv_text.splitlines()[1:] if line.strip())


def _args(index: str, root: str, out: str, *extra: str) -> list[str]:
    return ["example-gen", "--index", index, "--data-root", root, "--output", out, *extra]


def _records(name: str, data: bytes) -> list[bytes]:
    if name.endswith(".gz"):
        data = gzip.decompress(data)
    return list(iter_records(io.BytesIO(data), name))


def _row_id(record: bytes) -> int:
    from tensorflow.core.example import example_pb2

    return example_pb2.Example.FromString(record).features.feature["row_id"].int64_list.value[0]


def _assert_listed_equals_stored(s3_server, out: str, manifest: dict, rows: int) -> None:
    """The manifest lists exactly the objects under Split-*/, they parse whole, and hold every row once."""
    stored = [k for k in list_keys(s3_server, out) if k.startswith("Split-")]
    listed = [s["path"] for split in manifest["splits"].values() for s in split["shards"]]
    assert sorted(stored) == sorted(listed)
    ids = []
    for split in manifest["splits"].values():
        for shard in split["shards"]:
            data = get_bytes(s3_server, f"{out}/{shard['path']}")
            assert len(data) == shard["bytes"]
            records = _records(shard["path"], data)
            assert len(records) == shard["num_examples"]
            ids += [_row_id(r) for r in records]
    assert sorted(ids) == list(range(rows))
    assert not [k for k in list_keys(s3_server, out) if k.startswith(".staging") or ".tmp" in k]


def test_example_gen_all_on_s3_equals_local_run(s3_server, s3_bucket, tmp_path, empty_cwd) -> None:
    data = _dataset(tmp_path / "data", 40, [["img/missing.png", 1, 40], ["img/000.png", "not-int", 41]])
    local_out = tmp_path / "local_out"
    flags = ("--gzip", "--num-shards", "2", "--rows-per-chunk", "8", "--max-reject-fraction", "0.1")
    assert shardflow_main(_args(str(data / "all.csv"), str(data), str(local_out), *flags)) == 0
    root = upload_tree(s3_server, data, s3_bucket, "data")
    out = f"s3://{s3_bucket}/runs/out"
    secret_flag = f"--s3_secret_access_key={SECRET_KEY}"  # a Beam flag a user might pass: never recorded
    assert shardflow_main(_args(f"{root}/all.csv", root, out, *flags, secret_flag)) == 0
    assert list(empty_cwd.iterdir()) == []  # no ./s3:/... folder, no scratch files

    manifest_text = get_bytes(s3_server, f"{out}/manifest.json").decode()
    assert SECRET_KEY not in manifest_text and ACCESS_KEY not in manifest_text
    manifest = json.loads(manifest_text)
    local = json.loads((local_out / "manifest.json").read_text())
    assert manifest["splits"] == local["splits"]
    for split in manifest["splits"].values():  # byte-identical GZIP shards on S3 and on disk
        for shard in split["shards"]:
            assert get_bytes(s3_server, f"{out}/{shard['path']}") == (local_out / shard["path"]).read_bytes()
    lines = _data_lines(get_bytes(s3_server, f"{root}/all.csv").decode())
    assert lines == 42 and manifest["accepted"] + manifest["rejected"] == lines == manifest["rows"]
    assert manifest["rejected_by_reason"] == {"bad_value": 1, "missing_file": 1}
    rejects = [json.loads(line) for line in get_bytes(s3_server, f"{out}/rejects.jsonl").decode().splitlines()]
    assert [(r["row"], r["code"], r["index"]) for r in rejects] == [
        (41, "missing_file", f"{root}/all.csv"), (42, "bad_value", f"{root}/all.csv")]
    assert manifest["inputs"][0]["sha256"] == local["inputs"][0]["sha256"]
    assert get_bytes(s3_server, f"{out}/schema.pbtxt") == (local_out / "schema.pbtxt").read_bytes()
    assert sorted(k for k in list_keys(s3_server, out) if not k.startswith("Split-")) == [
        "manifest.json", "near_duplicates.jsonl", "provenance/eval.npz", "provenance/train.npz", "rejects.jsonl",
        "schema.pbtxt", "statistics/eval.pb", "statistics/train.pb"]
    for split in ("train", "eval"):  # the example rows read from S3 are the local run's
        remote = read_example_rows(out, Manifest.from_json(manifest), split)
        there = read_example_rows(local_out, Manifest.from_json(local), split)
        assert remote.row.tolist() == there.row.tolist() and list(remote.paths) == list(there.paths)
        assert remote.indexes == (f"{root}/all.csv",) and len(remote) == manifest["splits"][split]["num_examples"]
    _assert_listed_equals_stored(s3_server, out, manifest, 40)


ESCAPING_CELLS = ("../other/x.png", "%2e%2e/x.png", "s3://{other}/x.png", "s3://{bucket}/other-prefix/x.png",
                  "/etc/passwd", "s3://{bucket}/database/x.png")


def test_cells_outside_an_s3_data_root_are_rejected_unread(s3_server, s3_bucket, tmp_path) -> None:
    other = s3_server.bucket()
    escaping = [c.format(bucket=s3_bucket, other=other) for c in ESCAPING_CELLS]
    data = _dataset(tmp_path / "data", 20, [[cell, 0, 20 + i] for i, cell in enumerate(escaping)])
    root = upload_tree(s3_server, data, s3_bucket, "data")
    # Valid images wherever a wrong implementation would look: reading one would accept its row.
    image = png_bytes(random_pixels(np.random.default_rng(9), SHAPE))
    outside = [f"s3://{s3_bucket}/other/x.png", f"s3://{s3_bucket}/x.png", f"s3://{other}/x.png",
               f"s3://{s3_bucket}/other-prefix/x.png", f"s3://{s3_bucket}/database/x.png"]
    for uri in outside:
        put_bytes(s3_server, uri, image)
    log = Path(s3_server._log.name)
    log_start = log.stat().st_size
    out = tmp_path / "out"
    assert shardflow_main(_args(f"{root}/all.csv", root, str(out), "--max-reject-fraction", "0.5")) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["accepted"] == 20 and manifest["rejected_by_reason"] == {"path_escapes_root": len(escaping)}
    rejects = [json.loads(line) for line in (out / "rejects.jsonl").read_text().splitlines()]
    assert [(r["row"], r["path"], r["code"]) for r in rejects] == [
        (21 + i, cell, "path_escapes_root") for i, cell in enumerate(escaping)]
    assert all(r["reason"] == f"path escapes the data root: {r['path']}" for r in rejects)
    requests = log.read_bytes()[log_start:].decode(errors="replace")
    assert f"/{s3_bucket}/data/img/000.png" in requests  # the server logs the objects read ...
    for uri in outside:  # ... and none outside the data root
        assert uri[len("s3:/"):] not in requests, uri


def _kill_when_staged(args: list[str], s3_server, out: str, log_path: Path) -> None:
    """Runs the command in its own process group and SIGKILLs it once a part or shard object exists."""
    env = {**os.environ, **s3_server.env}
    with open(log_path, "wb") as log:
        process = subprocess.Popen([SHARDFLOW, *args], stdout=log, stderr=subprocess.STDOUT, env=env,
                                   start_new_session=True)
        deadline = time.monotonic() + 240
        try:
            while not [k for k in list_keys(s3_server, out) if k.startswith(".staging/parts/")]:
                assert process.poll() is None, f"the run ended (rc {process.returncode}) first: {log_path.read_text()}"
                assert time.monotonic() < deadline, "no part object within 240 s"
                time.sleep(0.05)
            os.killpg(process.pid, signal.SIGKILL)
        finally:
            process.wait(timeout=60)
    assert process.returncode == -signal.SIGKILL


def test_killed_s3_run_leaves_no_manifest_and_rerun_lists_no_stale_shard(s3_server, s3_bucket, tmp_path) -> None:
    rows = 120
    root = upload_tree(s3_server, _dataset(tmp_path / "data", rows), s3_bucket, "data")
    out = f"s3://{s3_bucket}/out"
    flags = ("--rows-per-chunk", "10")
    assert shardflow_main(_args(f"{root}/all.csv", root, out, *flags, "--num-shards", "3")) == 0
    assert sorted(list_keys(s3_server, f"{out}/Split-train")) == [f"data-0000{i}-of-00003.tfrecord" for i in range(3)]
    _kill_when_staged(_args(f"{root}/all.csv", root, out, *flags, "--num-shards", "2"), s3_server, out,
                      tmp_path / "killed.log")
    keys = list_keys(s3_server, out)
    assert "manifest.json" not in keys  # withdrawn first by the killed run: nothing reads as complete
    assert any(k.startswith(".staging/") for k in keys)  # the kill really left staged work behind
    assert shardflow_main(_args(f"{root}/all.csv", root, out, *flags, "--num-shards", "2")) == 0
    manifest = json.loads(get_bytes(s3_server, f"{out}/manifest.json"))
    assert manifest["rows"] == manifest["accepted"] == rows
    assert all(len(s["shards"]) == 2 for s in manifest["splits"].values())
    _assert_listed_equals_stored(s3_server, out, manifest, rows)


def test_s3_rerun_with_fewer_shards_leaves_none_stale(s3_server, s3_bucket, tmp_path) -> None:
    root = upload_tree(s3_server, _dataset(tmp_path / "data", 30), s3_bucket, "data")
    out = f"s3://{s3_bucket}/out"
    assert shardflow_main(_args(f"{root}/all.csv", root, out, "--num-shards", "4", "--gzip")) == 0
    assert len(list_keys(s3_server, f"{out}/Split-train")) == 4
    # Two worker processes: each builds its own S3 client from the environment, nothing else.
    workers = ("--direct_running_mode=multi_processing", "--direct_num_workers=2")
    assert shardflow_main(_args(f"{root}/all.csv", root, out, "--num-shards", "1", "--split", "train=1", *workers)) == 0
    manifest = json.loads(get_bytes(s3_server, f"{out}/manifest.json"))
    assert list(manifest["splits"]) == ["train"]
    shards = [k for k in list_keys(s3_server, out) if k.startswith("Split-")]
    assert shards == ["Split-train/data-00000-of-00001.tfrecord"]
    _assert_listed_equals_stored(s3_server, out, manifest, 30)


def test_missing_s3_inputs_are_one_line_errors(s3_server, s3_bucket, tmp_path, capsys) -> None:
    root = upload_tree(s3_server, _dataset(tmp_path / "data", 5), s3_bucket, "data")
    out = f"s3://{s3_bucket}/out"
    assert shardflow_main(_args(f"{root}/nope.csv", root, out)) == 2
    assert shardflow_main(_args(f"{root}/all.csv", f"s3://{s3_bucket}/empty", out)) == 2
    errors = capsys.readouterr().err.splitlines()
    assert [e for e in errors if "error:" in e] == [
        f"shardflow example-gen: error: index file '{root}/nope.csv' does not exist",
        f"shardflow example-gen: error: data_root 's3://{s3_bucket}/empty' is not a prefix with objects below it"]
    assert list_keys(s3_server, out) == []


def test_spans_on_s3_are_matched_ingested_once_and_reused(s3_server, s3_bucket, tmp_path) -> None:
    for span in (1, 2):
        _dataset(tmp_path / "data" / f"span-{span}", 10 * span)
    _dataset(tmp_path / "data" / "span-x", 5)  # not a span number: never matched
    upload_tree(s3_server, tmp_path / "data", s3_bucket, "data")
    base = f"s3://{s3_bucket}/data/span-{{SPAN}}"
    args = ["example-gen", "--index", f"{base}/all.csv", "--data-root", base, "--output", f"s3://{s3_bucket}/out",
            "--span-store", f"s3://{s3_bucket}/store", "--spans", "2"]
    assert shardflow_main(args) == 0
    manifest = json.loads(get_bytes(s3_server, f"s3://{s3_bucket}/out/manifest.json"))
    assert [(s["span"], s["reused"]) for s in manifest["spans"]] == [("1", False), ("2", False)]
    assert manifest["rows"] == 30
    for split in manifest["splits"].values():  # union paths are URIs into the store, and exist
        for shard in split["shards"]:
            assert shard["path"].startswith(f"s3://{s3_bucket}/store/span-")
            assert len(get_bytes(s3_server, shard["path"])) == shard["bytes"]
    assert shardflow_main(args) == 0
    manifest = json.loads(get_bytes(s3_server, f"s3://{s3_bucket}/out/manifest.json"))
    assert [(s["span"], s["reused"]) for s in manifest["spans"]] == [("1", True), ("2", True)]


def test_aborted_s3_part_never_appears_even_when_its_stream_is_closed_later(s3_server, s3_bucket) -> None:
    from shardflow.core.shard_writer import PartWriter

    done = PartWriter(f"s3://{s3_bucket}/p/done.tfrecord")
    aborted = PartWriter(f"s3://{s3_bucket}/p/aborted.tfrecord")
    for writer in (done, aborted):
        writer.write(b"x" * 100)
    assert done.close().num_records == 1
    aborted.abort()
    aborted._stream.close()  # what the garbage collector does with the stream later: must not complete the upload
    assert list_keys(s3_server, f"s3://{s3_bucket}/p") == ["done.tfrecord"]
    assert _records("done.tfrecord", get_bytes(s3_server, f"s3://{s3_bucket}/p/done.tfrecord")) == [b"x" * 100]


def test_example_gen_on_gcs_equals_local_run(tmp_path, empty_cwd, request) -> None:
    """The same on gs:// (fake-gcs-server): index, data root and output in a bucket, shards as on disk."""
    from google.cloud import storage as gcs

    server = request.getfixturevalue("gcs_server")
    data = _dataset(tmp_path / "data", 24)
    bucket = server.bucket()
    client = gcs.Client()
    for path in sorted(p for p in data.rglob("*") if p.is_file()):
        client.bucket(bucket).blob(f"data/{path.relative_to(data).as_posix()}").upload_from_filename(str(path))
    root, out, local_out = f"gs://{bucket}/data", f"gs://{bucket}/out", tmp_path / "local_out"
    assert shardflow_main(_args(str(data / "all.csv"), str(data), str(local_out), "--gzip")) == 0
    assert shardflow_main(_args(f"{root}/all.csv", root, out, "--gzip")) == 0
    assert list(empty_cwd.iterdir()) == []
    manifest = json.loads(client.bucket(bucket).blob("out/manifest.json").download_as_bytes())
    assert manifest["splits"] == json.loads((local_out / "manifest.json").read_text())["splits"]
    stored = [k[len("out/"):] for k in server.keys(bucket, "out/Split-")]
    assert sorted(stored) == sorted(s["path"] for split in manifest["splits"].values() for s in split["shards"])
    for name in stored:
        assert client.bucket(bucket).blob(f"out/{name}").download_as_bytes() == (local_out / name).read_bytes()
    assert not [k for k in server.keys(bucket) if ".staging" in k or ".tmp" in k], "staging objects left behind"
