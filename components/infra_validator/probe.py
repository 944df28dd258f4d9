"""The infra validator's probe: load a SavedModel as TF Serving would, call it, time it, replay its warm-up file.

Run by path in a fresh interpreter, never as part of shardflow:

    python -I probe.py REQUEST.json

It imports TensorFlow only (and TF Serving's own `tensorflow_serving.apis` protos to read the
warm-up file): no shardflow, no tensorflow_io, no Keras (neither tf_keras nor Keras 3), as in a
serving container. So a model that needs an op only tensorflow_io registers, or Python code of the
project, fails to load here as it would in TF Serving. The request (JSON) names the model, for each
signature the input name and a TFRecord file of its input values (one string per record), the batch
sizes, the number of timed calls per batch size, the memory budget of one call, the warm-up file and
where to write the results. The result (JSON at `request["result"]`) holds `ok`, `error` (one line, when not ok),
`load_seconds`, `signatures`, per signature the measured activation bytes of an example,
`latency` rows, the warm-up replay counts and `modules` (the top-level Python packages loaded).

Memory is counted in bytes before any batch is timed: an example's activations are measured as
`shardflow.core.batch_memory` measures them (probe_memory.py, loaded by path), and a batch size whose
activations would exceed `memory_bytes` fails the probe in one line instead of being run. The canaries' own probabilities are computed in batches that fit.
Each signature's outputs named in `request["saved_outputs"]` (`probabilities` when not given; a detector's four
`detection_*` outputs) for every input, in input order, go to `<outputs>/<signature>.npz`, and the names, dtypes
and shapes of everything its first call returned to the result's `checked[signature]["returned"]`.
Exit status 0 when ok, 1 otherwise; judging the numbers is the caller's business.
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
import traceback
from typing import Any

FORBIDDEN = ("shardflow", "tensorflow_io", "tf_keras", "keras")  # never in a serving process
# Set to None in sys.modules (unimportable): TensorFlow 2.16 imports Keras 3 when it can and catches the ImportError.
# With Keras 3: 4.0 s and 613 MB of RSS to import; without: 2.2 s, 442 MB (docs/infra-validation.md).
KERAS = ("keras", "tf_keras")
OUTPUT = "probabilities"
MIN_TIMED_CALLS = 3  # per batch size, whatever the time budget


def _beside(name: str) -> Any:
    """The module `name`.py of this folder, loaded by path: `python -I` leaves the folder off sys.path, and a
    serving process imports no shardflow (nor is the module entered in sys.modules: not a package it loaded)."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                     f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


memory = _beside("probe_memory")


class ProbeError(Exception):
    """A failure at one stage of the probe, said in one line."""


def _one_line(err: BaseException) -> str:
    """The error's own line: TensorFlow's runtime errors open with a heading ("Graph execution error:")
    and a node's location, and say what went wrong in the last line before the node name."""
    noise = ("[[", "Detected at node", "<stack traces", "File ")
    lines = [line.strip() for line in str(err).strip().splitlines() if line.strip()]
    said = [line for line in lines if not line.startswith(noise)]
    message = (said[-1] if said[0].endswith(":") and len(said) > 1 else said[0]) if said else ""
    message = message if len(message) <= 300 else message[:297] + "..."
    return f"{type(err).__name__}: {message}" if not isinstance(err, ProbeError) else message


def _stage(what: str, call: Any) -> Any:
    """Runs `call()`; any error becomes a ProbeError saying at which stage it happened."""
    try:
        return call()
    except ProbeError:
        raise
    except Exception as err:  # noqa: BLE001 - the model's code can raise anything; report it in one line
        raise ProbeError(f"{what}: {_one_line(err)}") from err


def _records(tf: Any, path: str) -> list[bytes]:
    return [record.numpy() for record in tf.data.TFRecordDataset(path)]


def _cycled(values: list[bytes], count: int) -> list[bytes]:
    return [values[i % len(values)] for i in range(count)]


def _call(tf: Any, function: Any, name: str, values: list[bytes]) -> dict[str, Any]:
    return function(**{name: tf.constant(values, tf.string)})


def _predict_all(tf: Any, np: Any, function: Any, name: str, values: list[bytes], batch: int,
                 saved: list[str]) -> dict[str, Any]:
    """The signature's `saved` outputs for every value, in batches of `batch`."""
    parts: dict[str, list[Any]] = {output: [] for output in saved}
    for start in range(0, len(values), batch):
        out = _call(tf, function, name, values[start:start + batch])
        missing = [output for output in saved if output not in out]
        if missing:
            raise ProbeError(f"returns no {missing[0]!r} (returns {sorted(out)})")
        for output in saved:
            parts[output].append(out[output].numpy())
    return {output: np.concatenate(arrays) for output, arrays in parts.items()}


def _returned(out: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """What a call returned, as the judge checks it: each output's dtype and shape."""
    return {key: {"dtype": value.dtype.name, "shape": [int(d) for d in value.shape]} for key, value in out.items()}


def _latency(tf: Any, np: Any, function: Any, name: str, values: list[bytes], sizes: list[int],
             calls: int, budget: float) -> list[dict[str, Any]]:
    """p50/p99 per batch size over `calls` timed calls (after one untimed call of that size), fewer (at least
    MIN_TIMED_CALLS) once `budget` seconds were spent: a large model's batches of photos take long."""
    rows = []
    for size in sizes:
        batch = tf.constant(_cycled(values, size), tf.string)
        function(**{name: batch})
        seconds: list[float] = []
        while len(seconds) < calls and (len(seconds) < MIN_TIMED_CALLS or sum(seconds) < budget):
            started = time.perf_counter()
            function(**{name: batch})
            seconds.append(time.perf_counter() - started)
        ms = np.asarray(seconds) * 1000.0
        rows.append({"batch_size": size, "calls": len(seconds), "p50_ms": round(float(np.percentile(ms, 50)), 3),
                     "p99_ms": round(float(np.percentile(ms, 99)), 3), "mean_ms": round(float(ms.mean()), 3)})
    return rows


def _check_signature(function: Any, signature: str, name: str) -> None:
    _, inputs = function.structured_input_signature
    if set(inputs) != {name}:
        raise ProbeError(f"signature {signature!r} takes {sorted(inputs)}, the canaries feed {name!r}")


def _signature(tf: Any, np: Any, model: Any, signature: str, spec: dict[str, Any],
               request: dict[str, Any]) -> dict[str, Any]:
    """One signature: its outputs for every canary (saved), the first call's time and outputs, the latency table."""
    function, name = model.signatures[signature], spec["input"]
    _check_signature(function, signature, name)
    values = _records(tf, spec["file"])
    if not values:
        raise ProbeError(f"no canary inputs for signature {signature!r}")
    started = time.perf_counter()
    first = _stage(f"calling {signature!r}", lambda: _call(tf, function, name, values[:1]))
    first_ms = (time.perf_counter() - started) * 1000.0
    example = _stage(f"measuring {signature!r}",
                     lambda: memory.example_bytes(lambda batch: _call(tf, function, name, batch), values))
    too_large = memory.batch_problem(signature, request["batch_sizes"], example, request.get("memory_bytes"))
    if too_large:
        raise ProbeError(too_large)
    batch = max(request["batch_sizes"])
    saved = request.get("saved_outputs") or [OUTPUT]
    answers = _stage(f"calling {signature!r}", lambda: _predict_all(tf, np, function, name, values, batch, saved))
    np.savez(os.path.join(request["outputs"], f"{signature}.npz"), **answers)
    rows = _stage(f"timing {signature!r}", lambda: _latency(tf, np, function, name, values,
                                                            request["batch_sizes"], request["latency_calls"],
                                                            request["latency_seconds"]))
    return {"input": name, "canaries": len(values), "first_call_ms": round(first_ms, 3), "example_bytes": example,
            "returned": _returned(first), "latency": [{"signature": signature, **row} for row in rows]}


def _warmup_request(index: int, raw: bytes, model: Any) -> tuple[str, Any]:
    """Record `index` as (its signature, its PredictRequest); a ProbeError when TF Serving could not replay it."""
    from tensorflow_serving.apis import prediction_log_pb2

    log = prediction_log_pb2.PredictionLog.FromString(raw)
    if log.WhichOneof("log_type") != "predict_log":
        raise ProbeError(f"warm-up record {index} is a {log.WhichOneof('log_type')}, not a predict_log")
    request = log.predict_log.request
    signature = request.model_spec.signature_name or "serving_default"
    if signature not in model.signatures:
        raise ProbeError(f"warm-up record {index} names signature {signature!r}, which the model lacks")
    return signature, request


def _answered_already(tf: Any, request: Any, shape: tuple[str, int], ran: set[tuple[str, int]],
                      answered: dict[str, tuple[str, set[bytes]]]) -> bool:
    """Whether running the request would only repeat calls made: its signature already ran a batch of its size,
    and it feeds that signature's input only strings the probe called the signature with (the canaries)."""
    signature, _ = shape
    name, values = answered.get(signature, ("", set()))
    if shape not in ran or set(request.inputs) != {name}:
        return False
    proto = request.inputs[name]
    return proto.dtype == tf.string.as_datatype_enum and all(value in values for value in proto.string_val)


def _replay_warmup(tf: Any, model: Any, path: str, answered: dict[str, tuple[str, set[bytes]]]) -> dict[str, Any]:
    """Every PredictionLog of the warm-up file checked as TF Serving replays it: each names a signature the model
    has, and each is run through it, unless the run would repeat calls already made (`_answered_already`: the
    same signature and batch size, only canaries it answered). 250 single-canary requests of a 256-record file
    took 1.2-2.4 s to run again; one run per signature and batch size keeps every shape's check."""
    counts: dict[str, int] = {}
    ran: set[tuple[str, int]] = set()
    started = time.perf_counter()
    for index, raw in enumerate(_records(tf, path)):
        signature, request = _warmup_request(index, raw, model)
        inputs = {key: tf.constant(tf.make_ndarray(value)) for key, value in request.inputs.items()}
        size = int(next(iter(inputs.values())).shape[0]) if inputs else 0
        counts[signature] = counts.get(signature, 0) + 1
        if _answered_already(tf, request, (signature, size), ran, answered):
            continue
        out = _stage(f"replaying warm-up record {index} ({signature!r})",
                     lambda: model.signatures[signature](**inputs))
        rows = {int(tensor.shape[0]) for tensor in out.values()}
        if rows != {size}:
            raise ProbeError(f"warm-up record {index}: outputs of {sorted(rows)} rows for a batch of {size}")
        ran.add((signature, size))
    return {"records": sum(counts.values()), "by_signature": counts, "run": len(ran),
            "seconds": round(time.perf_counter() - started, 3)}


def import_tensorflow() -> Any:
    """TensorFlow as a serving process has it: without Keras (KERAS), whatever TensorFlow would import."""
    # with it, importing TensorFlow imports tf_keras; the executor already drops it (tensorflow_only_environment)
    os.environ.pop("TF_USE_LEGACY_KERAS", None)
    for name in KERAS:
        sys.modules.setdefault(name, None)
    import tensorflow as tf

    return tf


def probe(request: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    tf = import_tensorflow()

    started = time.perf_counter()
    model = _stage("loading the model", lambda: tf.saved_model.load(request["model"]))
    result: dict[str, Any] = {"load_seconds": round(time.perf_counter() - started, 3),
                              "tensorflow": tf.__version__, "signatures": sorted(model.signatures)}
    if not result["signatures"]:
        raise ProbeError("the SavedModel has no signatures: TF Serving would have nothing to serve")
    unfed = [name for name in result["signatures"] if name not in request["inputs"]]
    if unfed:
        raise ProbeError(f"signatures {unfed} take inputs no canary can feed: they cannot be checked")
    checked = {name: _signature(tf, np, model, name, request["inputs"][name], request)
               for name in result["signatures"]}
    result["checked"] = {name: {k: v for k, v in part.items() if k != "latency"} for name, part in checked.items()}
    result["latency"] = [row for part in checked.values() for row in part["latency"]]
    if request.get("warmup"):
        answered = {name: (spec["input"], set(_records(tf, spec["file"]))) for name, spec in request["inputs"].items()}
        result["warmup"] = _replay_warmup(tf, model, request["warmup"], answered)
    return result


def loaded_packages() -> list[str]:
    """The top-level packages imported (a name blocked by None in sys.modules is not one)."""
    loaded = [name for name, module in list(sys.modules.items()) if module is not None]
    return sorted({name.split(".")[0] for name in loaded if not name.startswith("_")})


def main(argv: list[str]) -> int:
    with open(argv[1], encoding="utf-8") as file:
        request = json.load(file)
    result: dict[str, Any] = {"ok": False}
    try:
        result.update(probe(request))
        result["ok"] = True
    except Exception as err:  # noqa: BLE001 - reported as the result's one-line error
        traceback.print_exc()
        result["error"] = _one_line(err)
    result["modules"] = loaded_packages()
    forbidden = [name for name in result["modules"] if name.startswith(FORBIDDEN)]
    if forbidden:
        result["ok"], result["error"] = False, f"the probe had {forbidden} loaded: not a TensorFlow-only process"
    temporary = request["result"] + ".tmp"
    with open(temporary, "w", encoding="utf-8") as file:
        json.dump(result, file, indent=2)
    os.replace(temporary, request["result"])
    if not result["ok"]:
        print(result["error"], file=sys.stderr)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    code = main(sys.argv)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # no teardown: 1.4 s of TensorFlow's after the digits model (2 busy cores); the result is written
