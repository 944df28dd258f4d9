"""The Trainer's input on the tf.data service against its own CPU, side by side (issue 45).

    python -m benchmarks.run_all --only data_service                       # 3k 224-px JPEG photos
    python -m benchmarks.run_all --only data_service --ds-rows 1k --ds-epochs 2

ExampleGen writes `rows` 224-px JPEG photos (the photo benchmarks' set). Each contender is a real
`shardflow train` process (LeNet, batches of 32, `--augment flip,rotate,crop,brightness,contrast`,
`--deterministic`), and servers are real `shardflow data-service` processes; `taskset` pins each to a
core of this 2-core machine, so "a node of one core" and "a CPU worker beside it" are separate CPUs:

- `local`: the Trainer alone on core 0 (its own CPU reads, decodes, crops, augments and trains);
- `offload`: the Trainer on core 0, the dispatcher and one worker on core 1 (`--data-service`);
- `shared`: the Trainer, the dispatcher and the worker all on core 0 (what the service itself costs).

Rates are the Trainer's steady training rate (training.json: the epochs after the first). The CPU
contenders train a cheap model (global average pooling and a softmax layer) instead, so that the
input is most of the work, and take the Trainer process's own CPU time (user + system, from
/proc) between the end of its first epoch and the end of its last, per trained example.

What travels: the stream's elements as the model takes them (float32 pixels after augmentation: the
same values as the local stream's, so the same weights), uncompressed; bytes an example are measured
from one batch of the served stream, and the served stream alone is read with and without tf.data's
compression.

Targets: offload ≥ 1.2× local; shared ≥ 0.85× local; the Trainer's CPU an example through the service
≤ 0.4× the local stream's.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

from .photos_bench import photo_examples
from .suites import parse_size

NAME = "data_service"
BATCH = 32
AUGMENT = "flip,rotate,crop,brightness,contrast"
SHARDFLOW = str(Path(sys.executable).with_name("shardflow"))
CHEAP_MODEL = '''import tf_keras as keras


def build(features, num_classes, task):
    name = next(iter(features))
    image = keras.Input(shape=(224, 224, 3), name=name)
    pooled = keras.layers.GlobalAveragePooling2D()(image)
    return keras.Model({name: image}, keras.layers.Dense(num_classes, activation="softmax")(pooled))
'''


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("data_service")
    group.add_argument("--ds-rows", type=parse_size, default=3_000, help="photos in the train split (default 3k)")
    group.add_argument("--ds-epochs", type=int, default=3, help="epochs per run; the first is not timed (default 3)")


class _Servers:
    """A dispatcher and one worker pinned to `core`, killed on exit."""

    def __init__(self, work: Path, core: int) -> None:
        self.port, worker = free_port(), free_port()
        pin = ["taskset", "-c", str(core), SHARDFLOW, "data-service"]
        self.processes = [
            subprocess.Popen([*pin, "dispatcher", "--port", str(self.port), "--worker", f"localhost:{worker}"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
            subprocess.Popen([*pin, "worker", "--dispatcher", f"localhost:{self.port}", "--port", str(worker)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
        del work

    def __enter__(self) -> str:
        return f"grpc://localhost:{self.port}"

    def __exit__(self, *exc: object) -> None:
        self.worker_peak_rss = _peak_rss(self.processes[1].pid)
        for process in self.processes:
            process.kill()
            process.wait()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("localhost", 0))
        return probe.getsockname()[1]


def _peak_rss(pid: int) -> int:
    """The process's peak resident set so far, in bytes (VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def _train(examples: Path, out: Path, epochs: int, *extra: str) -> dict[str, Any]:
    """One pinned Trainer run: its summary, and its CPU seconds from the end of epoch 1 to the last's."""
    argv = ["taskset", "-c", "0", SHARDFLOW, "train", "--examples", str(examples), "--output", str(out),
            "--epochs", str(epochs), "--batch-size", str(BATCH), "--deterministic", "--augment", AUGMENT,
            "--input-probe-batches", "1", "--eval-split", "", *extra]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    marks, said, peak = [], [], 0
    for line in _lines(process):
        said.append(line)
        if line.startswith("train: epoch ") and " steps in " in line:
            marks.append(_cpu_seconds(process.pid))
            peak = _peak_rss(process.pid)  # after the last epoch's line: training's peak, export's excluded
    if process.wait() != 0:
        raise RuntimeError("".join(said)[-2000:])
    summary = json.loads((out / "training.json").read_text())
    trained = (epochs - 1) * summary["optimizer_steps"] // epochs * BATCH
    return {"rate": summary["input_report"]["training_examples_per_second"], "examples_timed": trained,
            "cpu_s": round(marks[-1] - marks[0], 2), "peak_rss_bytes": peak,
            "data_service": summary.get("data_service")}


def _lines(process: subprocess.Popen) -> Iterator[str]:
    assert process.stdout is not None
    yield from process.stdout


def _transfer(examples: Path, dispatcher: str, batches: int = 40) -> dict[str, Any]:
    """The served training stream read alone in this process (pinned to core 0): what an example weighs as
    the Trainer receives it, and its rate and this process's CPU with and without tf.data's compression."""
    import tensorflow as tf

    from shardflow.core import service_job
    from shardflow.trainer.config import InputOptions
    from shardflow.trainer.features import RawToModel
    from shardflow.trainer.input_pipeline import build_streams
    from shardflow.trainer.task import resolve_task

    os.sched_setaffinity(0, {0})
    inputs = InputOptions(examples=str(examples), eval_split=None, batch_size=BATCH, augment=tuple(AUGMENT.split(",")),
                          deterministic=True, data_service=dispatcher)
    task = resolve_task(inputs)
    measured: dict[str, Any] = {}
    for compression in ("AUTO", None):
        service_job.TRANSFER_COMPRESSION = compression  # what the stream built next uses
        served = iter(build_streams(task, inputs, BATCH, 1, RawToModel(task, None), echo=lambda _: None).train)
        parts = tf.nest.flatten(next(served))
        cpu, wall = time.process_time(), time.perf_counter()
        for _ in range(batches):
            next(served)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        measured[str(compression)] = {"ex_per_s": round(batches * BATCH / wall, 1),
                                      "client_cpu_ms_per_ex": round(1000 * cpu / (batches * BATCH), 3)}
    os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))
    return {"dtypes": sorted({p.dtype.name for p in parts}), "bytes": sum(p.numpy().nbytes for p in parts) // BATCH,
            "compression": measured}


def run(args: argparse.Namespace, sizes: Any, work: Path) -> dict[str, Any]:
    del sizes
    examples = photo_examples(work, args.ds_rows, "data-service")
    runs, epochs = work / "data-service-runs", args.ds_epochs
    model = work / "cheap_model.py"
    model.write_text(CHEAP_MODEL)
    result: dict[str, Any] = {"rows": args.ds_rows, "epochs": epochs, "batch": BATCH, "augment": AUGMENT}
    result["local"] = _train(examples, runs / "local", epochs)
    servers = _Servers(work, core=1)
    with servers as target:
        result["offload"] = _train(examples, runs / "offload", epochs, "--data-service", target)
    result["offload"]["worker_peak_rss_bytes"] = servers.worker_peak_rss
    with _Servers(work, core=1) as target:
        result["transfer"] = _transfer(examples, target)
    with _Servers(work, core=0) as target:
        result["shared"] = _train(examples, runs / "shared", epochs, "--data-service", target)
    cheap = ("--model", f"{model}:build")
    result["cpu_local"] = _train(examples, runs / "cpu-local", epochs, *cheap)
    with _Servers(work, core=1) as target:
        result["cpu_offload"] = _train(examples, runs / "cpu-offload", epochs, *cheap, "--data-service", target)
    per_example = {k: result[k]["cpu_s"] / result[k]["examples_timed"] for k in ("cpu_local", "cpu_offload")}
    r = {"offload": result["offload"]["rate"] / result["local"]["rate"],
         "shared": result["shared"]["rate"] / result["local"]["rate"],
         "cpu": per_example["cpu_offload"] / per_example["cpu_local"]}
    result["ratios"] = {k: round(v, 3) for k, v in r.items()}
    result["met"] = {"offload ≥ 1.2×": r["offload"] >= 1.2, "shared ≥ 0.85×": r["shared"] >= 0.85,
                     "Trainer CPU an example ≤ 0.4×": r["cpu"] <= 0.4}  # on the unrounded ratios
    return result


def markdown(result: dict[str, Any]) -> str:
    if "failed" in result:
        return f"failed: {result['failed']}"
    rows = [("LeNet, Trainer alone on core 0", "local"), ("LeNet, worker on core 1", "offload"),
            ("LeNet, worker on the Trainer's core", "shared"), ("cheap model, Trainer alone", "cpu_local"),
            ("cheap model, worker on core 1", "cpu_offload")]
    lines = [f"{result['rows']:,} 224-px JPEG photos, batches of {result['batch']}, `--augment {result['augment']}`, "
             f"{result['epochs']} epochs (the first not timed).", "",
             "| run | training ex/s | Trainer CPU s (timed epochs) | ex timed | Trainer peak RSS |",
             "|---|---:|---:|---:|---:|"]
    for label, key in rows:
        run_ = result[key]
        lines.append(f"| {label} | {run_['rate']:,.1f} | {run_['cpu_s']} | {run_['examples_timed']:,} | "
                     f"{run_['peak_rss_bytes']:,} bytes |")
    t, r = result["transfer"], result["ratios"]
    lines += ["", f"The worker's peak RSS in the LeNet run: {result['offload']['worker_peak_rss_bytes']:,} bytes.",
              f"What travels: {', '.join(t['dtypes'])}, {t['bytes']:,} bytes an example. The served stream read "
                  "alone on core 0, one worker on core 1: " + "; ".join(
                      f"compression {k}: {v['ex_per_s']:,} ex/s, {v['client_cpu_ms_per_ex']} ms of the reader's CPU "
                      "an example" for k, v in t["compression"].items()) + " (the stream uses None).",
              f"Ratios: offload {r['offload']}× local, shared {r['shared']}× local, Trainer CPU an example through "
              f"the service {r['cpu']}× local.", "",
              "Targets: " + ", ".join(f"{k}: {'met' if v else 'missed'}" for k, v in result["met"].items())]
    return "\n".join(lines)
