"""Pretrained backbones: real weight loading from a file the test writes, real freezing, two-phase
fine-tuning that resumes in phase two, the backbone's preprocessing inside the served model, and
mixed precision with a float32 softmax. MobileNetV2 at alpha 0.35 on 96x96 photos keeps it small."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from PIL import Image

from shardflow.core.errors import ConfigError
from shardflow.example_gen import ExampleGenConfig, IndexSpec
from shardflow.example_gen import run as example_gen
from shardflow.trainer import ExportOptions, FitOptions, InputOptions, ModelOptions, TrainerConfig
from shardflow.trainer.executor import run as train
from shardflow.trainer.export import warm_start
from shardflow.trainer.fine_tuning import backbone_layer
from shardflow.trainer.model_builder import build_model
from shardflow.trainer.task import resolve_task

from helpers_images import write_csv
from helpers_processes import recorded_checkpoint, wait_for

SIZE, ALPHA = 96, 0.35


def _photo(rng: np.random.Generator, label: int) -> Image.Image:
    """Noise with a warm (label 0) or a cool (label 1) cast: a backbone with any weights tells them apart."""
    pixels = rng.integers(0, 120, (SIZE, SIZE, 3)).astype(np.int16)
    pixels[..., 0 if label == 0 else 2] += 120
    return Image.fromarray(pixels.clip(0, 255).astype(np.uint8))


@pytest.fixture(scope="module")
def photos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root, rng = tmp_path_factory.mktemp("photos"), np.random.default_rng(3)
    rows = {"train": [], "eval": []}
    for i in range(48):
        (root / "img").mkdir(exist_ok=True)
        _photo(rng, i % 2).save(root / f"img/{i}.jpg", quality=90)
        rows["eval" if i % 4 == 0 else "train"].append([f"img/{i}.jpg", ["warm", "cool"][i % 2]])
    for split, split_rows in rows.items():
        write_csv(root / f"{split}.csv", ["image", "label"], split_rows)
    example_gen(ExampleGenConfig(indexes=(IndexSpec(str(root / "train.csv"), "train"),
                                          IndexSpec(str(root / "eval.csv"), "eval")),
                                 data_root=str(root), output=str(root / "examples")), echo=lambda _: None)
    return root


@pytest.fixture(scope="module")
def weights_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[np.ndarray]]:
    """A freshly initialized headless backbone's weights, saved as Keras saves them."""
    keras.utils.set_random_seed(7)
    backbone = keras.applications.MobileNetV2(input_shape=(SIZE, SIZE, 3), alpha=ALPHA, include_top=False,
                                              weights=None)
    path = tmp_path_factory.mktemp("weights") / "mobilenet_v2_035.h5"
    backbone.save_weights(path)
    return path, backbone.get_weights()


def _config(photos: Path, out: Path, weights: Path, **options: object) -> TrainerConfig:
    base = TrainerConfig(input=InputOptions(examples=str(photos / "examples"), batch_size=8, input_probe_batches=1),
                         model=ModelOptions(name="mobilenet_v2", weights=str(weights), backbone_alpha=ALPHA),
                         fit=FitOptions(steps=1), export=ExportOptions(output=str(out)))
    return base.replaced(**{"steps": None, **options})


def _trained_backbone(photos: Path, weights: Path, out: Path) -> list[np.ndarray]:
    """The backbone weights of the model exported in `out`, loaded into a fresh model of the same build."""
    model = build_model(resolve_task(_config(photos, out, weights, epochs=1).input), _config(photos, out, weights,
                                                                                             epochs=1))
    warm_start(model, out / "model")
    return backbone_layer(model).get_weights()


def test_the_weights_file_is_loaded_into_the_backbone(photos: Path, weights_file: tuple) -> None:
    path, saved = weights_file
    config = _config(photos, photos / "unused", path, epochs=1)
    loaded = backbone_layer(build_model(resolve_task(config.input), config)).get_weights()
    assert len(loaded) == len(saved) and all(np.array_equal(a, b) for a, b in zip(loaded, saved))
    fresh = config.replaced(weights="none")
    other = backbone_layer(build_model(resolve_task(fresh.input), fresh)).get_weights()
    assert not all(np.array_equal(a, b) for a, b in zip(other, saved))  # the load made the difference


def test_a_weights_file_of_another_backbone_is_one_clear_error(photos: Path, tmp_path: Path) -> None:
    wrong = tmp_path / "resnet.h5"
    keras.applications.MobileNetV2(input_shape=(SIZE, SIZE, 3), alpha=1.0, include_top=False,
                                   weights=None).save_weights(wrong)
    config = _config(photos, tmp_path / "m", wrong, epochs=1)
    with pytest.raises(ConfigError, match=r"weights '.*resnet.h5' do not fit the .* backbone"):
        build_model(resolve_task(config.input), config)


@pytest.fixture(scope="module")
def head_model(photos: Path, weights_file: tuple, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One epoch of the head phase alone (backbone frozen), exported: the model two tests below read."""
    out = tmp_path_factory.mktemp("head")
    train(_config(photos, out, weights_file[0], epochs=1, freeze_epochs=1), echo=lambda _: None)
    return out


def test_head_phase_keeps_the_backbone_and_fine_tuning_moves_only_its_top(photos: Path, weights_file: tuple,
                                                                          head_model: Path, tmp_path: Path) -> None:
    path, saved = weights_file
    head_only = _trained_backbone(photos, path, head_model)
    assert all(np.array_equal(a, b) for a, b in zip(head_only, saved))  # frozen: not one value moved
    top = 10
    summary = train(_config(photos, tmp_path / "tuned", path, epochs=2, freeze_epochs=1, fine_tune_layers=top),
                    echo=lambda _: None)
    config = _config(photos, tmp_path / "tuned", path, epochs=1)
    model = build_model(resolve_task(config.input), config)
    warm_start(model, tmp_path / "tuned" / "model")
    reference = build_model(resolve_task(config.input), config)  # the saved weights, layer by layer
    layers, before = backbone_layer(model).layers, backbone_layer(reference).layers
    changed = {layer.name for layer, old in zip(layers, before)
               if any(not np.array_equal(a, b) for a, b in zip(layer.get_weights(), old.get_weights()))}
    movable = {layer.name for layer in layers[-top:] if layer.weights and
               not isinstance(layer, keras.layers.BatchNormalization)}
    assert changed and changed <= movable, (changed, movable)
    history = summary["history"]
    assert [e["phase"] for e in history] == ["head", "fine_tune"] and [e["epoch"] for e in history] == [1, 2]
    assert summary["optimizer_steps"] == history[-1]["optimizer_steps"] == 2 * history[0]["optimizer_steps"]


def test_the_served_model_applies_the_backbones_preprocessing_to_pixels_as_before(photos: Path, weights_file: tuple,
                                                                                   head_model: Path) -> None:
    path, _ = weights_file  # the head phase's model: its trained head reads the backbone's features as any would
    served = tf.saved_model.load(str(head_model / "model"))
    photo = (photos / "img" / "0.jpg").read_bytes()
    big = tf.io.encode_jpeg(tf.image.resize(tf.io.decode_jpeg(photo), (150, 170), antialias=True)
                            .numpy().round().astype(np.uint8)).numpy()  # another size: resized in the graph
    out = served.signatures["serving_image"](images=tf.constant([photo, big]))
    # Two string labels: two served classes (the network's third unit, the OOV id, is not served).
    assert out["probabilities"].shape == (2, 2) and np.allclose(out["probabilities"].numpy().sum(1), 1, atol=1e-5)
    config = _config(photos, head_model, path, epochs=1)
    model = build_model(resolve_task(config.input), config)
    warm_start(model, head_model / "model")
    pixels = tf.cast(tf.io.decode_jpeg(photo, dct_method="INTEGER_ACCURATE"), tf.float32)[tf.newaxis] / 255.0
    direct = model({"image": pixels}, training=False).numpy()  # [0, 1] in, as every shardflow model takes
    trained = direct[0, :2] / direct[0, :2].sum()  # the served renormalisation of the trained classes
    np.testing.assert_allclose(out["probabilities"].numpy()[0], trained, atol=1e-4)


def test_mixed_precision_keeps_a_float32_softmax_and_computes_in_the_devices_half_type(
        photos: Path, weights_file: tuple, tmp_path: Path) -> None:
    from shardflow.trainer.distribution import precision_policy

    path, _ = weights_file
    config = _config(photos, tmp_path / "m", path, epochs=1, mixed_precision=True)
    with precision_policy(True):
        model = build_model(resolve_task(config.input), config)
    assert keras.mixed_precision.global_policy().name == "float32"  # restored: a library call leaves no trace
    assert model.get_layer("probabilities").dtype_policy.compute_dtype == "float32"
    # float16 (with loss scaling) on a GPU; bfloat16 on a CPU, where float16 is emulated and float32's range kept
    on_gpu = bool(tf.config.list_physical_devices("GPU"))
    assert backbone_layer(model).layers[2].dtype_policy.compute_dtype == ("float16" if on_gpu else "bfloat16")
    assert isinstance(model.optimizer, keras.mixed_precision.LossScaleOptimizer) == on_gpu
    summary = train(config, echo=lambda _: None)
    assert np.isfinite(summary["history"][-1]["loss"])
    assert keras.mixed_precision.global_policy().name == "float32"
    info = json.loads((tmp_path / "m" / "model" / "shardflow_model.json").read_text())
    assert info["precision"] == ("mixed_float16" if on_gpu else "mixed_bfloat16")


def test_a_run_killed_in_each_phase_resumes_there_with_the_uninterrupted_weights(photos: Path, weights_file: tuple,
                                                                                  tmp_path: Path) -> None:
    path, _ = weights_file

    def command(out: Path) -> list[str]:
        return [sys.executable, "-m", "shardflow", "train", "--examples", str(photos / "examples"), "--output",
                str(out), "--model", "mobilenet_v2", "--weights", str(path), "--backbone-alpha", str(ALPHA),
                "--epochs", "2", "--freeze-epochs", "1", "--batch-size", "4", "--checkpoint-every", "2",
                "--input-probe-batches", "1", "--deterministic", "--eval-split", ""]

    env = dict(os.environ)  # the process defaults: the command's own (core/process_defaults.py)
    whole = subprocess.run(command(tmp_path / "whole"), env=env, capture_output=True, text=True, timeout=600)
    assert whole.returncode == 0, whole.stderr[-3000:]
    out = tmp_path / "m"
    # Killed once mid-way through the head phase (its second backup of step 4 of 9), then in phase two (its own
    # backup's second checkpoint, step 4 of its 9): each time the kill lands past a whole checkpoint. One epoch
    # of each phase: the kills land inside an epoch, so later epochs of phase two would add steps, not proof.
    for backups, what in (("", "head phase"), ("fine_tune", "phase two")):
        first = subprocess.Popen(command(out), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: recorded_checkpoint(str(out / "checkpoints" / (backups or "head"))) >= 2, first, 900,
                 f"second recorded checkpoint of the {what}")
        first.send_signal(signal.SIGKILL)
        first.wait()
        assert not (out / "training.json").exists(), "the run finished before it could be killed"
    assert (out / "checkpoints" / "head-done" / "phase.json").is_file()
    head_epoch = json.loads((out / "history.json").read_text())["epochs"][0]
    second = subprocess.run(command(out), env=env, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]
    summary = json.loads((out / "training.json").read_text())
    assert [e["phase"] for e in summary["history"]] == ["head", "fine_tune"]
    per_epoch = summary["history"][0]["optimizer_steps"]
    assert summary["optimizer_steps"] == 2 * per_epoch
    assert summary["resumed_from_step"] > 0  # phase two's optimizer came back from its backup
    assert summary["history"][0] == head_epoch  # the head phase was not trained again
    assert summary["weights_sha256"] == json.loads((tmp_path / "whole" / "training.json").read_text())["weights_sha256"]


@pytest.mark.parametrize("model, shape, module", [
    ("efficientnet_b0", (32, 32, 3), "efficientnet"),
    ("resnet50", (32, 32, 1), "resnet"),  # gray: repeated to RGB before the backbone
    ("keras_applications:MobileNetV3Small", (32, 32, 3), "mobilenet_v3"),
])
def test_every_named_backbone_builds_a_classifier_with_its_own_preprocessing(model: str, shape: tuple,
                                                                            module: str) -> None:
    from shardflow.trainer.backbones import backbone_spec, classifier

    spec = backbone_spec(model)
    built = classifier(spec, "image", shape, num_classes=4, weights="none")
    assert built.output_shape == (None, 4) and spec.module.endswith(module)
    assert built.get_layer("backbone_preprocess").get_config()["module"] == spec.module
    out = built({"image": tf.random.uniform((2, *shape))}, training=False)
    assert np.allclose(out.numpy().sum(axis=1), 1, atol=1e-5)
    from shardflow.trainer.distribution import mixed_policy, precision_policy

    with precision_policy(True):  # mixed precision with this backbone: the half type inside, a float32 softmax
        mixed = classifier(spec, "image", shape, num_classes=4, weights="none")
    assert mixed.get_layer("probabilities").dtype_policy.compute_dtype == "float32"
    assert mixed({"image": tf.random.uniform((2, *shape))}).dtype == tf.float32
    half = mixed_policy().removeprefix("mixed_")  # float16 on a GPU, bfloat16 on a CPU
    assert any(layer.dtype_policy.compute_dtype == half for layer in backbone_layer(mixed).layers)


def test_the_unet_on_mobilenet_v2_segments_at_the_input_size() -> None:
    from shardflow.trainer.backbones import backbone_spec, unet_on_backbone

    model = unet_on_backbone(backbone_spec("unet_mobilenet_v2"), "image", (64, 96, 3), num_classes=3,
                             weights="none", alpha=ALPHA)
    assert model.output_shape == (None, 64, 96, 3) and not backbone_layer(model).trainable
    with pytest.raises(ConfigError, match="not divisible by 32"):
        unet_on_backbone(backbone_spec("unet_mobilenet_v2"), "image", (48, 48, 3), 3, "none", ALPHA)
    with pytest.raises(ConfigError, match="tf_keras.applications has no 'NoSuchNet'"):
        backbone_spec("keras_applications:NoSuchNet")
