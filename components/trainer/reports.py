"""What a training run reports: the input pipeline's own rate vs the training rate, and loss curves.

The input probe reads the training stream alone (no model) for a number of batches after a
warm-up. It reads the stream as training does (read, parse, decode, transform graph, augment) but
without the shuffle window: batches cut from a window already in memory would time no reading at
all. The verdict compares it with the model's step alone (gradients of batches held in memory, no
input): "input-bound" when the input is less than `HEADROOM` times as fast as the step, i.e. the
accelerator could go faster than the input can feed it. Two probes, each timed alone over seconds,
are compared: not the training rate, which is close to the input rate exactly when a run is
input-bound, so that any load on the machine while one of them was timed flipped the verdict.

    rate = probe_input_rate(streams.probe, batches=50, global_batch=64)
    report = write_input_report("MOUT/input_report.json", rate, timer.steady_rate(), details)
    write_rate_scalars("MOUT/tensorboard/input", report, timer.epochs, step=240)
"""
from __future__ import annotations

import io
import math
import time
from typing import Any, Callable

import tensorflow as tf

from ..core import storage

HEADROOM = 1.2
WARMUP_BATCHES = 3
# The probe stops after this long (at least one batch). 224-px JPEG photos, batches of 64, 9 windows of each
# length in 3 processes: 1 s of reading varied as much as 2 s did (coefficient of variation 7.8 % against
# 7.0 %, means 1,529 and 1,494 ex/s), 0.5 s twice as much (17.8 %): 1 s is steady enough to compare with
# training's rate (HEADROOM) and takes 1 s less of each run. Digits batches take milliseconds: all 50 are read.
PROBE_SECONDS = 1.0


def probe_input_rate(dataset: tf.data.Dataset, batches: int, global_batch: int) -> tuple[float, int]:
    """(examples/s, batches read) of `dataset` alone over at most `batches` batches and PROBE_SECONDS, after
    WARMUP_BATCHES (fills buffers, traces)."""
    iterator = iter(dataset)
    for _ in range(WARMUP_BATCHES):
        next(iterator)
    start = time.perf_counter()
    read = 0
    while read < batches and (read == 0 or time.perf_counter() - start < PROBE_SECONDS):
        next(iterator)
        read += 1
    return read * global_batch / (time.perf_counter() - start), read


# The step probe: gradients of this many batches (after one that traces), enough for a steady figure on a
# LeNet (~0.2 s a step of 32 224-px photos on one core) without lengthening a run by much.
STEP_PROBE_BATCHES = 10


def probe_step_rate(model: Any, batch: tuple, global_batch: int, batches: int = STEP_PROBE_BATCHES) -> float:
    """Examples/s of the model's training step alone (forward, loss, gradients; no update) on one batch held in
    memory, over at most `batches` steps and PROBE_SECONDS (at least 2 steps): what the model could train at
    if its input kept up. Runs after the weights are saved and hashed:
    a training-mode call may move normalization statistics and dropout counters."""
    inputs, targets, weights = (*batch, None)[:3]

    @tf.function
    def gradients() -> list:
        with tf.GradientTape() as tape:
            loss = model.compute_loss(inputs, targets, model(inputs, training=True), weights)
        return tape.gradient(loss, model.trainable_variables)

    def wait(grads: list) -> None:
        tf.nest.map_structure(lambda g: g.numpy() if g is not None else None, grads)

    wait(gradients())  # traced here
    start, done = time.perf_counter(), 0
    while done < batches and (done < 2 or time.perf_counter() - start < PROBE_SECONDS):
        wait(gradients())  # each step waited for: the clock may stop the probe after any of them
        done += 1
    return done * global_batch / (time.perf_counter() - start)


def service_advice(input_rate: float, step_rate: float) -> dict:
    """How far input holds training back, and the tf.data service workers (each as fast as this node's input)
    that would feed the model's step with HEADROOM to spare."""
    return {"step_examples_per_second": round(step_rate, 1),
            "input_share_of_step_rate": round(min(1.0, input_rate / step_rate), 2),
            "service_workers_needed": max(1, math.ceil(HEADROOM * step_rate / input_rate)),
            "service_rule": "workers = ceil(HEADROOM x the step's rate / this node's input rate); a worker with the "
                            "CPUs of this node (docs/cluster.md)"}


# Training cannot outrun its input: with the input alone at least this many times the training rate, the
# input held nothing back, and the step probe (a trace and up to 10 steps: seconds on a photo backbone)
# is skipped. Load on the machine moves the two rates by less than this (2 CPU hogs: 253-278 ex/s).
CLEARLY_AHEAD = 2 * HEADROOM


def input_verdict(input_rate: float, training_rate: float | None, step_rate: float | None = None) -> str:
    """"input-bound" when the input alone is less than HEADROOM x the model's step alone; without a step
    probe (several workers, or the input far ahead of training), against the training rate."""
    if step_rate is not None:
        return "input-bound" if input_rate < HEADROOM * step_rate else "not input-bound"
    if training_rate is None:
        return "unknown"
    return "input-bound" if input_rate < HEADROOM * training_rate else "not input-bound"


def needs_step_probe(input_rate: float, training_rate: float | None) -> bool:
    return training_rate is not None and input_rate < CLEARLY_AHEAD * training_rate


def write_input_report(path: str, input_rate: float, training_rate: float | None, details: dict,
                       step_rate: Callable[[], float] | None = None) -> dict:
    """input_report.json. `step_rate()` (the model's step alone, one process) is timed unless the input was
    clearly ahead of training; the verdict compares the input with it, and when input-bound it sizes the
    service's workers."""
    step = step_rate() if step_rate is not None and needs_step_probe(input_rate, training_rate) else None
    against = "the model's step alone" if step is not None else "the training rate"
    report = {
        "input_examples_per_second": round(input_rate, 1),
        "training_examples_per_second": round(training_rate, 1) if training_rate else None,
        "ratio_input_to_training": round(input_rate / training_rate, 2) if training_rate else None,
        "verdict": input_verdict(input_rate, training_rate, step),
        "rule": f"input-bound when the input pipeline alone is slower than {HEADROOM}x {against}",
        **details,
    }
    if step is not None:
        report["step_examples_per_second"] = round(step, 1)
    if report["verdict"] == "input-bound" and step is not None:
        report.update(service_advice(input_rate, step))
    storage.write_json(path, report)
    return report


def write_rate_scalars(log_dir: str, report: dict, epochs: list[dict], step: int) -> None:
    """The input report as TensorBoard scalars in `log_dir` (a local path or a URI, through tf.io.gfile).

    Per epoch (step = epoch number): the training rate of that epoch; at the last optimizer `step`:
    the input pipeline's own rate, the steady training rate and their ratio.
    """
    writer = tf.summary.create_file_writer(log_dir)
    with writer.as_default(), tf.summary.record_if(True):  # whatever recording rule a caller's context set
        for entry in epochs:
            if entry["examples_per_second"] is not None:
                tf.summary.scalar("rate/epoch_training_examples_per_second", entry["examples_per_second"],
                                  step=entry["epoch"])
        for name in ("input_examples_per_second", "training_examples_per_second", "ratio_input_to_training"):
            if report.get(name) is not None:
                tf.summary.scalar(f"rate/{name}", report[name], step=step)
    writer.close()


def plot_curves(entries: list[dict], path: str) -> None:
    """Loss and the first metric per epoch, train and validation, as a PNG at `path` (a local path or a URI)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    epochs = [e["epoch"] for e in entries]
    metrics = [k for k in entries[0] if k not in ("epoch", "optimizer_steps") and not k.startswith("val_")]
    figure, axes = plt.subplots(1, len(metrics), figsize=(5 * len(metrics), 3.5), squeeze=False)
    for axis, metric in zip(axes[0], metrics):
        axis.plot(epochs, [e[metric] for e in entries], marker="o", label=f"train {metric}")
        if f"val_{metric}" in entries[0]:
            axis.plot(epochs, [e[f"val_{metric}"] for e in entries], marker="o", label=f"eval {metric}")
        axis.set_xlabel("epoch")
        axis.set_title(metric)
        axis.legend()
        axis.grid(alpha=0.3)
    figure.tight_layout()
    png = io.BytesIO()
    figure.savefig(png, format="png", dpi=100)
    plt.close(figure)
    storage.write_bytes(path, png.getvalue())  # whole or absent, the storage layer's one temp scheme
