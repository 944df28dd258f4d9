"""Exports the trained model as a SavedModel whose signatures take the image as the user has it.

`serving_default` takes serialized tf.Examples in ExampleGen's format; `serving_image` takes
encoded image files (JPEG/PNG, string [None], what a TF Serving REST client sends as {"b64": ...}).
For PNG/JPEG-stored uint8 images both accept any size and channel layout: the graph applies
ingest's EXIF orientation, channels and resize (`core.serving_image`); an image at the stored size
gives exactly the pixels it gave before. Then the same `RawToModel` preprocessing as
training (the tf.Transform graph when there is one) and returns `probabilities` and `class_ids`
(the contract in `shardflow.core.model_info`); for string labels also `classes` and `scores` (the
names of the classes and their probabilities, TF Serving's classification outputs that TFMA reads)
and `predicted_class` (the name of the arg-max class). Every output covers the trained classes only:
a string label's OOV unit is dropped and the rest renormalised (`served_probabilities`). It is
written where the Trainer's `OutputDir` stages `model` (locally `MOUT/.staging/model`, renamed into
place when published; on an object store the final `MOUT/model/` prefix itself, trusted once
`training.json` is written), `shardflow_model.json` last.

    export_model(model, to_model, task, info, out.staged("model"), is_chief=True)
    served = tf.saved_model.load("MOUT/model").signatures["serving_default"]
    served(examples=tf.constant([record_bytes]))["class_ids"]

A detector (task "detection") answers both signatures with the TF OD API's outputs instead
(`box_schema.DETECTION_OUTPUTS`, `served_detections`): the top MAX_DETECTIONS heat-map peaks, a class's
duplicates suppressed (`nms_iou`, detection_outputs.py), boxes normalised to the image the request carried
(`serving_image` resizes a photo of any size as ExampleGen's --resize did: letterboxed, then the boxes moved
back onto the photo, or stretched, so normalised boxes are the original's), classes as label map ids.
"""
from __future__ import annotations

import os
import shutil
import tempfile

import tensorflow as tf
import tf_keras as keras

from ..core import storage
from ..core.cloud_env import enable_tensorflow_filesystems
from ..core.box_schema import DETECTION_OUTPUTS, DETECTION_TASK, MAX_DETECTIONS
from ..core.errors import ConfigError
from ..core.image_decode import CODED
from ..core.label_map_file import write_label_map
from ..core.model_info import IMAGE_INPUT, IMAGE_SIGNATURE, SERVING_INPUT, SERVING_SIGNATURE, ModelInfo, write_model_info
from .detection_outputs import NMS_IOU, in_request_frame, suppress_duplicates
from .features import RawToModel
from .task import TrainingTask

WEIGHTS_PREFIX = "variables/variables"  # the SavedModel's own checkpoint: what --warm-start loads
# Keras's per-layer call traces are for reviving custom layers without their code; every reader here uses the
# signatures (Evaluator, Predict, TF Serving) or the weights (warm start), and the layers have configs. Tracing
# them was most of the export (LeNet on the digits: 0.99 s of 1.06 s, measured in one process).
SAVE_TRACES = False


def serving_functions(model: keras.Model, to_model: RawToModel, task: TrainingTask,
                      nms_iou: float = NMS_IOU) -> dict[str, tf.types.experimental.ConcreteFunction]:
    """`serving_default` on tf.Examples and, for uint8 images, `serving_image` on encoded files of any size;
    a detector's duplicates suppressed above `nms_iou` (0: off; detection_outputs.py)."""
    name, stored = task.input_name, task.raw_input_spec
    spec = {name: tf.io.FixedLenFeature([], tf.string if stored.is_file else tf.float32)}
    named = task.kind == "classification" and task.label_vocabulary is not None
    names = tf.constant(task.class_names, tf.string) if named else None
    any_size = to_model.serves_any_size and stored.encoding in CODED  # raw bytes carry no size to read

    def predict(image: tf.Tensor) -> dict[str, tf.Tensor]:
        if task.kind == DETECTION_TASK:
            return served_detections(model({name: image}, training=False), task.label_map.ids, nms_iou)
        softmax = tf.cast(model({name: image}, training=False), tf.float32)
        probabilities = served_probabilities(softmax, task.num_classes)
        outputs = {"probabilities": probabilities, "class_ids": tf.argmax(probabilities, axis=-1)}
        if names is not None:
            outputs.update(class_name_outputs(names, probabilities, outputs["class_ids"]))
        return outputs

    # autograph=False: the preprocessing branches only on Python values; a user's subclassed layer is still
    # converted by Keras itself (its `call`, as Layer.__call__ does outside a disabled context).
    signatures = {}
    if to_model.serves_any_size:
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name=IMAGE_INPUT)], autograph=False)
        def serve_image(images: tf.Tensor) -> dict[str, tf.Tensor]:
            if task.kind == DETECTION_TASK and to_model.letterbox:  # boxes normalised to each request's image
                image, sizes = to_model.image_and_sizes(images)
                return in_request_frame(predict(image), sizes, tuple(stored.shape[:2]))
            return predict(to_model.image_from_files(images))

        signatures[IMAGE_SIGNATURE] = serve_image.get_concrete_function()

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name=SERVING_INPUT)], autograph=False)
    def serve(examples: tf.Tensor) -> dict[str, tf.Tensor]:
        parsed = tf.io.parse_example(examples, spec)
        if any_size:  # the image signature's function, called: its graph is traced once (LeNet: 0.9 s each)
            return signatures[IMAGE_SIGNATURE](parsed[name])
        return predict(to_model.image(parsed))

    return {SERVING_SIGNATURE: serve.get_concrete_function(), **signatures}


def served_detections(maps: dict[str, tf.Tensor], label_ids: tuple[int, ...],
                      nms_iou: float = NMS_IOU) -> dict[str, tf.Tensor]:
    """The OD API's outputs of a detector's maps: float32 boxes [N, M, 4], scores and label map ids [N, M] (0
    past `num_detections`), num_detections [N]; M = MAX_DETECTIONS. Duplicates of a class suppressed above
    `nms_iou` (0: off)."""
    from .detector import HEATMAP, OFFSET, SIZE, decode_detections

    found = decode_detections(*(tf.cast(maps[key], tf.float32) for key in (HEATMAP, SIZE, OFFSET)),
                              max_detections=MAX_DETECTIONS)
    found = suppress_duplicates(found, nms_iou)
    real = tf.range(MAX_DETECTIONS)[None, :] < tf.cast(found["num_detections"], tf.int32)[:, None]
    served = tf.gather(tf.constant(label_ids, tf.float32), tf.cast(found["detection_classes"], tf.int32))
    found["detection_classes"] = tf.where(real, served, 0.0)  # class index i serves label_ids[i] (LabelMap.ids)
    return {name: found[name] for name in DETECTION_OUTPUTS}


def served_probabilities(softmax: tf.Tensor, num_classes: int) -> tf.Tensor:
    """The first `num_classes` units of the softmax, renormalised to sum to 1 (softmax over their logits).

    The units past them (a string label's OOV id) stand for labels unseen in training: Transform's
    bookkeeping, not a class to answer. Renormalised, a row is the model's distribution given that the
    label is a trained class; its arg-max is unchanged unless OOV was the arg-max. A row whose mass is all
    in the dropped units (underflow) gets 1/K for each class.
    """
    if softmax.shape[-1] == num_classes:
        return softmax
    trained = softmax[..., :num_classes]
    total = tf.reduce_sum(trained, axis=-1, keepdims=True)
    return tf.where(total > 0, tf.math.divide_no_nan(trained, total), 1.0 / num_classes)


def class_name_outputs(names: tf.Tensor, probabilities: tf.Tensor, class_ids: tf.Tensor) -> dict[str, tf.Tensor]:
    """`classes` [N, C] (every row the class names), `scores` [N, C] and `predicted_class` [N]."""
    rows = tf.shape(probabilities)[0]
    return {"classes": tf.tile(names[tf.newaxis, :], tf.stack([rows, 1])), "scores": probabilities,
            "predicted_class": tf.gather(names, class_ids)}


def export_model(model: keras.Model, to_model: RawToModel, task: TrainingTask, info: ModelInfo,
                 model_dir: str | os.PathLike, is_chief: bool, nms_iou: float = NMS_IOU) -> None:
    """Saves on every worker (saving is collective under MultiWorkerMirroredStrategy); only the chief keeps it.

    The chief writes `model_dir` (a local path or a URI) from scratch; other workers save to a local
    scratch directory of their own that is deleted right away (they share nothing but the outputs).
    """
    model.raw_to_model = to_model  # tracked, so the transform graph's assets and tables are saved with it
    signatures = serving_functions(model, to_model, task, nms_iou)
    if is_chief:
        model_dir = os.fspath(model_dir)
        storage.remove(model_dir)  # a killed earlier export's objects must not mix with this one
        enable_tensorflow_filesystems([model_dir])
        model.save(model_dir, save_format="tf", include_optimizer=False, signatures=signatures,
                   save_traces=SAVE_TRACES)
        if task.kind == DETECTION_TASK:  # the OD API's label_map.pbtxt beside the model: Push copies it with it
            write_label_map(model_dir, task.label_map)
        write_model_info(model_dir, info)
        return
    scratch = tempfile.mkdtemp(prefix="shardflow-worker-model-")
    try:
        model.save(scratch, save_format="tf", include_optimizer=False, signatures=signatures,
                   save_traces=SAVE_TRACES)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def warm_start(model: keras.Model, model_dir: str | os.PathLike) -> None:
    """Initializes `model`'s weights from an earlier export (local or URI); an error when the architectures differ."""
    model_dir = os.fspath(model_dir)
    prefix = storage.join(model_dir, *WEIGHTS_PREFIX.split("/"))
    enable_tensorflow_filesystems([model_dir])
    if not storage.is_file(f"{prefix}.index"):
        raise ConfigError(f"warm start: {model_dir} is not a SavedModel exported by shardflow train "
                                f"(no {WEIGHTS_PREFIX}.index)")
    status = model.load_weights(prefix)
    try:
        # Every weight of an uncompiled model must come from the file; a model its hook compiled
        # also has optimizer variables the export does not hold, so only a non-trivial match is asked.
        if model.optimizer:
            status.assert_nontrivial_match()
        else:
            status.assert_existing_objects_matched()
    except AssertionError as err:
        raise ValueError(f"warm start: the model in {model_dir} does not match this model's architecture: {err}") from err
    status.expect_partial()  # the export also holds the preprocessing (tables, transform graph)
