"""ExampleGen's CPU time per stage on photos, µs per row, timed in one process with ExampleGen's own functions.

    stage_times(Path("bench_out/photos"), Path("bench_out/photos/index-20000.csv"), "jpeg", rows=20_000)
    python -m benchmarks.photos_stages --root bench_out/photos --storage jpeg      # standalone

Each stage calls the function ExampleGen's row encoder calls, on the first SAMPLE rows of the index,
and is timed with the process CPU clock, one stage after another over the same rows:
read (the data root's read: open + read), hash (leakage digest), decode (TurboJPEG or Pillow,
DCT scale included), convert+resize, perceptual hash input (the near-duplicate check's thumbnail)
and perceptual hashes (batched as the chunk encoder does), encode (the storage kind), example
(tf.Example bytes + framing with CRC, written to a part file), statistics values (the per-chunk
column file). `row_encoder` is `RowEncoder.encode` whole, perceptual hash input included (ExampleGen's
default), the check that the stages add up. Once per run: the
TFDV statistics pass over the column files, and, in fresh processes, the imports of ExampleGen's launcher
and of its statistics process (TFDV on the TensorFlow stand-in, Keras blocked: statistics_process.py).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

SAMPLE = 1_000
_IMPORTS = ("import shardflow.example_gen.executor",)
_STATISTICS_IMPORTS = ("import sys", "sys.modules['keras'] = sys.modules['tf_keras'] = None",
                       "from shardflow.example_gen.statistics_process import light_imports", "light_imports()",
                       "import shardflow.example_gen.statistics")  # as statistics_process.main does


def _timed(stages: dict[str, float], name: str, fn: Callable[[], Any]) -> Any:
    started = time.process_time()
    result = fn()
    stages[name] = stages.get(name, 0.0) + time.process_time() - started
    return result


def _import_seconds(imports: tuple[str, ...] = _IMPORTS) -> float:
    """Wall seconds to run `imports` in a fresh interpreter (the launcher's modules by default)."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "; ".join(imports)], check=True, capture_output=True)
    return time.perf_counter() - started


def _photo_columns(storage: str) -> list[Any]:
    """ExampleGen's column specs for the photos' index (x, y) ingested as 224×224 RGB in `storage`."""
    from shardflow.example_gen.columns import ColumnSpec
    from shardflow.example_gen.images import ImageRules

    rules = ImageRules(10**9, "rgb", (224, 224))
    return [ColumnSpec("x", 0, "image", "uint8", (224, 224, 3), storage, rules), ColumnSpec("y", 1, "label", "int64")]


def _stages_of_rows(cells: list[list[str]], root: Path, storage: str,
                    scratch: Path) -> tuple[dict[str, float], dict[str, float], int]:
    """CPU seconds per stage over `cells`, and of the once-per-split statistics pass."""
    from shardflow.core.example_proto import encode_example
    from shardflow.core.perceptual_hash import hash_input, hashes_of
    from shardflow.core.shard_writer import PartWriter
    from shardflow.example_gen.column_files import write_column_file
    from shardflow.example_gen.data_root import open_data_root
    from shardflow.example_gen.encode_chunks import HASH_BATCH  # batched as the chunk encoder does
    from shardflow.example_gen.images import ImageRules, decode_image, encode_image
    from shardflow.example_gen.rows import content_digest
    from shardflow.example_gen.statistics import write_statistics

    data_root, stages = open_data_root(str(root)), {}
    columns = tuple(_photo_columns(storage))
    rules = columns[0].rules
    decode_only = ImageRules(10**9, "rgb", None)
    writer, values = PartWriter(str(scratch / "part.tfrecord")), {"x": [], "y": []}
    hash_inputs = []
    for path, label in cells:
        data = _timed(stages, "read", lambda: data_root.read(path))
        _timed(stages, "hash", lambda: content_digest(data))
        _timed(stages, "decode", lambda: decode_image(data, decode_only))
        image = _timed(stages, "convert+resize", lambda: decode_image(data, rules))
        hash_inputs.append(_timed(stages, "perceptual hash input", lambda: hash_input(image)))
        blob = _timed(stages, "encode", lambda: encode_image(image, storage))
        _timed(stages, "example+write", lambda: writer.write(encode_example({"x": [blob], "y": [int(label)]}), len(blob)))
        values["x"].append(len(blob))
        values["y"].append(int(label))
    stages["convert+resize"] -= stages["decode"]  # decode_image with the resize includes a decode
    for start in range(0, len(hash_inputs), HASH_BATCH):
        _timed(stages, "perceptual hashes", lambda: hashes_of(hash_inputs[start:start + HASH_BATCH]))
    _timed(stages, "example+write", writer.close)
    column_file = str(scratch / "columns.arrow")
    _timed(stages, "statistics values", lambda: write_column_file(column_file, columns, values))
    fixed: dict[str, float] = {}
    _timed(fixed, "TFDV statistics pass", lambda: write_statistics({"train": [column_file]}, columns, str(scratch / "stats")))
    return stages, fixed, len(cells)


def _row_encoder_seconds(cells: list[list[str]], root: Path, storage: str) -> float:
    from shardflow.example_gen.csv_index import Record
    from shardflow.example_gen.rows import RowEncoder
    from shardflow.example_gen.splitting import SplitAssigner

    encoder = RowEncoder(_photo_columns(storage), str(root), SplitAssigner((("train", 1),), (0,)),
                         perceptual_hashes=True)
    started = time.process_time()
    for number, row in enumerate(cells, start=1):
        encoder.encode(Record(number, list(row)), "train")
    return time.process_time() - started


def stage_times(data_root: Path, index: Path, storage: str, rows: int) -> dict[str, Any]:
    """µs of CPU per row for each stage, on the index's first SAMPLE rows (`rows` is the run's size)."""
    lines = index.read_text().splitlines()[1:SAMPLE + 1]
    cells = [line.split(",") for line in lines]
    with tempfile.TemporaryDirectory() as scratch:
        stages, fixed, count = _stages_of_rows(cells, data_root, storage, Path(scratch))
    per_row = {name: round(seconds / count * 1e6, 1) for name, seconds in stages.items()}
    per_row["sum of stages"] = round(sum(per_row.values()), 1)
    per_row["row_encoder (whole)"] = round(_row_encoder_seconds(cells, data_root, storage) / count * 1e6, 1)
    return {"storage": storage, "sample_rows": count, "run_rows": rows, "us_per_row": per_row,
            "fixed_s": {name: round(seconds, 2) for name, seconds in fixed.items()},
            "start_up_imports_s": round(_import_seconds(), 2),
            "statistics_process_imports_s": round(_import_seconds(_STATISTICS_IMPORTS), 2)}


def markdown(result: dict[str, Any]) -> str:
    imports = f"launcher imports in a fresh process {result['start_up_imports_s']} s"
    if "statistics_process_imports_s" in result:
        imports += f", statistics process imports {result['statistics_process_imports_s']} s"
    lines = [f"ExampleGen CPU per row by stage, storage {result['storage']} ({result['sample_rows']:,} rows sampled; "
             f"{imports}):", "",
             "| stage | CPU µs/row |", "|---|---:|"]
    lines += [f"| {name} | {value:,.0f} |" for name, value in result["us_per_row"].items()]
    lines += ["", "Once per run: " + ", ".join(f"{name} {value} s CPU" for name, value in result["fixed_s"].items())]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, required=True, help="photo data root (testkit.photo_data)")
    parser.add_argument("--storage", default="jpeg", choices=("jpeg", "raw", "png"))
    args = parser.parse_args(argv)
    from testkit.photo_data import ensure_photo_index, ensure_photos

    root = ensure_photos(args.root)
    result = stage_times(root, ensure_photo_index(root, SAMPLE), args.storage, SAMPLE)
    print(markdown(result))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
