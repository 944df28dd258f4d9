"""`--deterministic`: TensorFlow's op determinism on while the run builds its model and trains, off again after;
two uninterrupted runs end with the same weights (on this machine's CPU: no GPU here, where the same switch is
what TensorFlow promises equal outputs with).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import tensorflow as tf
from tensorflow.python.framework import config as tf_config

from helpers_images import write_label_pngs
from shardflow.example_gen import ExampleGenConfig, IndexSpec
from shardflow.example_gen import run as example_gen
from shardflow.trainer import ExportOptions, FitOptions, InputOptions, TrainerConfig, executor, run
from shardflow.trainer.cli import add_arguments
from shardflow.trainer.distribution import deterministic_ops



def _unseeded_crop_box() -> tf.Tensor:
    """An op TensorFlow refuses under op determinism on any device (it would draw from no seed)."""
    return tf.image.sample_distorted_bounding_box([12, 10, 1], tf.zeros([1, 0, 4]), min_object_covered=0.1,
                                                  use_image_if_no_bounding_boxes=True)[0]


@pytest.mark.unit
def test_op_determinism_is_on_inside_only_and_a_process_setting_is_kept() -> None:
    assert not tf_config.is_op_determinism_enabled()
    with deterministic_ops(False):
        assert not tf_config.is_op_determinism_enabled()
    with deterministic_ops(True):
        assert tf_config.is_op_determinism_enabled()
        with pytest.raises(ValueError, match="determinism is enabled"):
            _unseeded_crop_box()
    assert not tf_config.is_op_determinism_enabled()
    _unseeded_crop_box()  # allowed again
    tf.config.experimental.enable_op_determinism()  # the process's own choice (TF_DETERMINISTIC_OPS, a caller)
    try:
        with deterministic_ops(True):
            pass
        assert tf_config.is_op_determinism_enabled()
    finally:
        tf_config.disable_op_determinism()


@pytest.mark.unit
def test_the_help_says_what_deterministic_means() -> None:
    import argparse

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    text = next(a.help for a in parser._actions if "--deterministic" in a.option_strings)  # noqa: SLF001
    assert "same weights" in text and "op determinism" in text and "reproducible order" not in text


@pytest.fixture(scope="module")
def examples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("determinism")
    index = write_label_pngs(root, count=64, classes=3, seed=2)
    example_gen(ExampleGenConfig(indexes=(IndexSpec(str(index), "train"),), data_root=str(root),
                                 output=str(root / "out"), min_shards=2), echo=lambda _: None)
    return root / "out"


def test_two_deterministic_runs_end_with_the_same_weights(examples: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []  # op determinism as the model was built, run after run

    def build_model(*args: Any) -> Any:
        seen.append(tf_config.is_op_determinism_enabled())
        return built(*args)

    built = executor.build_model
    monkeypatch.setattr(executor, "build_model", build_model)
    digests = []
    for name in ("first", "second"):
        config = TrainerConfig(
            input=InputOptions(examples=str(examples), eval_split=None, batch_size=8, shuffle_buffer_mb=0.001,
                               augment=("flip", "rotate"), deterministic=True, seed=5, input_probe_batches=1),
            fit=FitOptions(steps=12), export=ExportOptions(output=str(tmp_path / name)))
        digests.append(run(config, echo=lambda _: None)["weights_sha256"])
        assert not tf_config.is_op_determinism_enabled(), "the run left op determinism on in the process"
    assert seen == [True, True] and digests[0] == digests[1]
