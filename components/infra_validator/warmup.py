"""TF Serving's warm-up file: `assets.extra/tf_serving_warmup_requests`, PredictionLog records it replays.

When TF Serving loads a version it runs every request of this TFRecord file before it marks the
version available, so the first real request pays no start-up cost (lazy initialization, memory
allocation, kernels' first runs). The records are PredictRequests built from the Evaluator's
canaries, each a run of consecutive canaries (cycling when there are fewer than asked): first one
request per signature and batch size, so every shape TF Serving will be sent runs once, then
single-example requests taking turns over the signatures, the common online request. So the file
holds about `count + Σ batch sizes × signatures` canaries, not `count` × the mean batch (a 224×224
JPEG canary is ~20 KB: 256 requests of 1, 8, 32 in turn would be ~70 MB, these ~7 MB).

    records = warmup_records({"serving_default": ("examples", canary_records)}, count=256, batch_sizes=(1, 8, 32))
"""
from __future__ import annotations

from typing import Sequence

from ..core.tfrecord import frame


def _batch(values: list[bytes], start: int, size: int) -> list[bytes]:
    return [values[(start + i) % len(values)] for i in range(size)]


def warmup_records(inputs: dict[str, tuple[str, list[bytes]]], count: int,
                   batch_sizes: Sequence[int]) -> list[bytes]:
    """`count` serialized PredictionLogs over every signature in `inputs` ({name: (input, values)})."""
    import tensorflow as tf
    from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

    names = sorted(inputs)
    shapes = [(name, size) for size in batch_sizes for name in names]
    plan = (shapes + [(names[i % len(names)], 1) for i in range(max(0, count - len(shapes)))])[:count]
    offsets = dict.fromkeys(names, 0)
    records = []
    for signature, size in plan:
        input_name, values = inputs[signature]
        request = predict_pb2.PredictRequest(model_spec=model_pb2.ModelSpec(signature_name=signature))
        batch = _batch(values, offsets[signature], size)
        request.inputs[input_name].CopyFrom(tf.make_tensor_proto(batch, dtype=tf.string, shape=[size]))
        offsets[signature] += size
        log = prediction_log_pb2.PredictionLog(predict_log=prediction_log_pb2.PredictLog(request=request))
        records.append(log.SerializeToString())
    return records


def warmup_file_bytes(records: list[bytes]) -> bytes:
    """The records as one uncompressed TFRecord file (what TF Serving reads)."""
    return b"".join(frame(record) for record in records)
