"""ExampleGen on a 2-worker Dask LocalCluster gives the same examples as on the local FnApiRunner.

Also checks that ExampleGen's statistics pass (labels, metadata and payload sizes from the workers'
column files, with placeholders for pixels) equals TFDV's statistics over the real record batches.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Iterator

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pytest
import tensorflow_data_validation as tfdv
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from tensorflow_metadata.proto.v0 import schema_pb2, statistics_pb2

from helpers_images import random_pixels, write_csv, write_png
from shardflow.cli import main as shardflow_main
from shardflow.example_gen.column_files import write_column_file
from shardflow.example_gen.columns import ColumnSpec
from shardflow.example_gen.statistics import write_statistics

DASK_RUNNER = "--runner=apache_beam.runners.dask.dask_runner.DaskRunner"
NUM_ROWS = 60
COMPARED_KEYS = ("features", "splits", "compression", "rows", "accepted", "rejected", "rejected_by_reason",
                 "leakage", "statistics", "schema", "ingest_ops")


def _warm_up() -> bool:
    """Imports what the DoFns unpickle into (TensorFlow, TFDV) once per worker, both at the same time."""
    import shardflow.example_gen.pipeline  # noqa: F401

    return True


def _close_other_clients(mine: object) -> None:
    """Closes the Client each DaskRunner run opens and leaves open (Beam 2.72), newest first."""
    from dask.distributed import default_client

    while True:
        try:
            other = default_client()
        except ValueError:  # no open client left
            return
        if other is mine:
            return
        other.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, object]]:
    """A 2-worker LocalCluster: its scheduler address and a client of it."""
    temporary = tmp_path_factory.mktemp("dask")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DASK_TEMPORARY_DIRECTORY", str(temporary))
        import dask
        from dask.distributed import Client, LocalCluster

        with dask.config.set({"temporary-directory": str(temporary)}):
            local_cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
            client = Client(local_cluster)
            try:
                assert len(client.run(_warm_up)) == 2
                yield local_cluster.scheduler_address, client
            finally:
                _close_other_clients(client)
                client.close()  # the clients before the cluster
                local_cluster.close()


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """60 rows of 12x10 RGB PNGs with a label and a metadata column, plus two bad rows."""
    root = tmp_path_factory.mktemp("dask_data")
    rng = np.random.default_rng(5)
    rows: list[list[object]] = []
    for i in range(NUM_ROWS):
        write_png(root / "img" / f"{i:02d}.png", random_pixels(rng, (12, 10, 3)))
        rows.append([f"img/{i:02d}.png", i % 4, f"site{i % 3}"])
    (root / "img" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n not really")
    rows.insert(17, ["img/broken.png", 1, "site0"])
    rows.insert(40, ["img/missing.png", 2, "site1"])
    write_csv(root / "all.csv", ["x", "label", "site"], rows)
    return root


def _ingest(data: Path, out: Path, beam_args: list[str]) -> dict:
    args = ["example-gen", "--index", str(data / "all.csv"), "--data-root", str(data), "--output", str(out),
            "--rows-per-chunk", "8", "--num-shards", "2", "--gzip", "--max-reject-fraction", "0.1", *beam_args]
    assert shardflow_main(args) == 0
    return json.loads((out / "manifest.json").read_text())


def _rejects(out: Path) -> str:
    # KNOWN BUG (images.py, reported): a corrupt-image reason quotes PIL's message, which names a
    # memory address ("<_io.BytesIO object at 0x7f...>"), so it differs between processes.
    return re.sub(r" at 0x[0-9a-f]+", " at 0x?", (out / "rejects.jsonl").read_text())


def _stats(path: Path) -> statistics_pb2.DatasetFeatureStatisticsList:
    return statistics_pb2.DatasetFeatureStatisticsList.FromString(path.read_bytes())


def _assert_same_statistics(local: Path, dask: Path) -> None:
    """Equal up to float rounding: partial sums merge in another order on Dask."""
    a, b = _stats(local), _stats(dask)
    assert [d.num_examples for d in a.datasets] == [d.num_examples for d in b.datasets]
    for left, right in zip(a.datasets[0].features, b.datasets[0].features):
        assert left.path == right.path and left.type == right.type
        if left.HasField("num_stats"):
            assert right.num_stats.mean == pytest.approx(left.num_stats.mean, rel=1e-9)
            assert (right.num_stats.min, right.num_stats.max) == (left.num_stats.min, left.num_stats.max)
        if left.HasField("string_stats"):
            assert right.string_stats.top_values == left.string_stats.top_values
    assert len(a.datasets[0].features) == len(b.datasets[0].features) > 0


def test_dask_cluster_gives_the_local_runners_examples(cluster: tuple[str, object], data: Path,
                                                       tmp_path: Path) -> None:
    from dask.distributed import get_task_stream

    scheduler, client = cluster
    local = _ingest(data, tmp_path / "local", [])
    with get_task_stream(client) as stream:
        dask = _ingest(data, tmp_path / "dask", [DASK_RUNNER, f"--dask_client_address={scheduler}",
                                                    "--dask_npartitions=3"])
    assert len({task["worker"] for task in stream.data}) == 2  # both workers ran tasks of the pipeline
    assert "DaskRunner" in dask["runner"] and "local process pool" in local["runner"]
    assert {k: dask[k] for k in COMPARED_KEYS} == {k: local[k] for k in COMPARED_KEYS}
    assert local["rows"] == NUM_ROWS + 2 and local["rejected"] == 2
    assert sum(s["num_examples"] for s in local["splits"].values()) == NUM_ROWS
    shards = sorted(s["path"] for info in local["splits"].values() for s in info["shards"])
    assert len(shards) == 4 and all(p.endswith(".tfrecord.gz") for p in shards)
    for relative in [*shards, "schema.pbtxt"]:
        assert (tmp_path / "dask" / relative).read_bytes() == (tmp_path / "local" / relative).read_bytes(), relative
    assert _rejects(tmp_path / "dask") == _rejects(tmp_path / "local")
    on_disk = sorted(str(p.relative_to(tmp_path / "dask")) for p in (tmp_path / "dask").glob("Split-*/*"))
    assert on_disk == shards
    for split in local["splits"]:
        _assert_same_statistics(tmp_path / "local" / "statistics" / f"{split}.pb",
                                tmp_path / "dask" / "statistics" / f"{split}.pb")
    assert not (tmp_path / "dask" / ".staging").exists()


def _list_array(values: list, value_type: pa.DataType | None = None) -> pa.ListArray:
    offsets = pa.array(np.arange(len(values) + 1, dtype=np.int32))
    return pa.ListArray.from_arrays(offsets, pa.array(values, type=value_type))


def _batches() -> list[pa.RecordBatch]:
    rng = np.random.default_rng(3)
    batches = []
    for _ in range(5):
        n = 40
        columns = [_list_array(rng.integers(0, 10, n).tolist()),
                   _list_array([b"site%d" % rng.integers(0, 4) for _ in range(n)], pa.binary()),
                   _list_array([rng.bytes(int(rng.integers(5, 30))) for _ in range(n)], pa.binary()),
                   _list_array(rng.random(n).astype(np.float32).tolist(), pa.float32())]
        batches.append(pa.RecordBatch.from_arrays(columns, ["label", "site", "image", "score"]))
    return batches


def _run_tfdv(batches: list[pa.RecordBatch], options: tfdv.StatsOptions, path: Path) -> statistics_pb2.DatasetFeatureStatisticsList:
    def write(stats: statistics_pb2.DatasetFeatureStatisticsList) -> None:
        path.write_bytes(stats.SerializeToString())

    with beam.Pipeline(runner=FnApiRunner()) as pipeline:
        _ = pipeline | beam.Create(batches) | tfdv.GenerateStatistics(options) | beam.Map(write)
    return _stats(path)


def test_statistics_from_column_files_equal_tfdv_on_the_real_batches(tmp_path: Path) -> None:
    columns = (ColumnSpec("label", 0, "label", "int64"), ColumnSpec("site", 1, "metadata", "string"),
               ColumnSpec("image", 2, "image", "uint8", (5, 6, 1), "png"), ColumnSpec("score", 3, "metadata", "float32"))
    batches = _batches()
    paths = []
    for number, batch in enumerate(batches):
        values = {
            "label": [v[0] for v in batch.column("label").to_pylist()],
            "site": [v[0].decode() for v in batch.column("site").to_pylist()],
            "image": [len(v[0]) for v in batch.column("image").to_pylist()],
            "score": [v[0] for v in batch.column("score").to_pylist()],
        }
        paths.append(str(tmp_path / "columns" / f"{number}.arrow"))
        write_column_file(paths[-1], columns, values)
    ours = _stats(Path(write_statistics({"train": paths, "eval": []}, columns, str(tmp_path / "stats"))["train"]))
    schema = schema_pb2.Schema()
    schema.feature.add(name="image", type=schema_pb2.BYTES).image_domain.SetInParent()
    theirs = _run_tfdv(batches, tfdv.StatsOptions(schema=schema), tmp_path / "tfdv.pb")
    assert ours == theirs
    assert ours.datasets[0].num_examples == 200 and len(ours.datasets[0].features) == 4
    assert _stats(tmp_path / "stats" / "eval.pb").datasets[0].num_examples == 0
