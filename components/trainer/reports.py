"""What a training run reports: the input pipeline's own rate vs the training rate, and loss curves.

The input probe reads the training stream alone (no model) for a number of batches after a
warm-up. It reads the stream as training does (read, parse, decode, transform graph, augment) but
without the shuffle window: batches cut from a window already in memory would time no reading at
all. The verdict is "input-bound" when that rate is less than `HEADROOM` times the rate training
actually reached, i.e. the accelerator could go faster than the input can feed it.

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
WARMUP_BATCHES = 5
# The probe stops after this long (at least one batch): a rate over 2 s of reading is steady enough to
# compare with training's. 50 batches of 64 224-px JPEGs took 3.4 s of a 3-epoch photo run (1.6 epochs
# of 2,400 photos decoded before the first step); digits batches take milliseconds and all 50 are read.
PROBE_SECONDS = 2.0


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
    memory: what the model could train at if its input kept up. Runs after the weights are saved and hashed:
    a training-mode call may move normalization statistics and dropout counters."""
    inputs, targets, weights = (*batch, None)[:3]

    @tf.function
    def gradients() -> list:
        with tf.GradientTape() as tape:
            loss = model.compute_loss(inputs, targets, model(inputs, training=True), weights)
        return tape.gradient(loss, model.trainable_variables)

    tf.nest.map_structure(lambda g: g.numpy() if g is not None else None, gradients())  # traced here
    start = time.perf_counter()
    for _ in range(batches):
        done = gradients()
    tf.nest.map_structure(lambda g: g.numpy() if g is not None else None, done)
    return batches * global_batch / (time.perf_counter() - start)


def service_advice(input_rate: float, step_rate: float) -> dict:
    """How far input holds training back, and the tf.data service workers (each as fast as this node's input)
    that would feed the model's step with HEADROOM to spare."""
    return {"step_examples_per_second": round(step_rate, 1),
            "input_share_of_step_rate": round(min(1.0, input_rate / step_rate), 2),
            "service_workers_needed": max(1, math.ceil(HEADROOM * step_rate / input_rate)),
            "service_rule": "workers = ceil(HEADROOM x the step's rate / this node's input rate); a worker with the "
                            "CPUs of this node (docs/cluster.md)"}


def input_verdict(input_rate: float, training_rate: float | None) -> str:
    if training_rate is None:
        return "unknown"
    return "input-bound" if input_rate < HEADROOM * training_rate else "not input-bound"


def write_input_report(path: str, input_rate: float, training_rate: float | None, details: dict,
                       step_rate: Callable[[], float] | None = None) -> dict:
    """input_report.json; when input-bound, `step_rate()` (the model's step alone) sizes the service's workers."""
    report = {
        "input_examples_per_second": round(input_rate, 1),
        "training_examples_per_second": round(training_rate, 1) if training_rate else None,
        "ratio_input_to_training": round(input_rate / training_rate, 2) if training_rate else None,
        "verdict": input_verdict(input_rate, training_rate),
        "rule": f"input-bound when the input pipeline alone is slower than {HEADROOM}x the training rate",
        **details,
    }
    if report["verdict"] == "input-bound" and step_rate is not None:
        report.update(service_advice(input_rate, step_rate()))
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
