"""Two-phase fine-tuning of a pretrained backbone, as Keras' transfer-learning guide does it.

Phase "head": the backbone frozen, the new head trained at `learning_rate` for `freeze_epochs`.
Phase "fine_tune": the top `fine_tune_layers` layers of the backbone unfrozen (all of them when not
given; BatchNorm layers stay frozen and in inference mode), the model recompiled with a fresh
optimizer at `fine_tune_learning_rate` (default learning_rate / 10), for the remaining epochs.
Epochs are numbered across both phases, so history.json and TensorBoard show one run.

Each phase has its own backup (`checkpoints/<phase>/`): a run killed in a phase resumes in it. When
the head phase ends, its weights and optimizer step count are saved in `checkpoints/head-done/`
before the fine-tuning starts; a rerun finding them skips the head phase.

    plan = phase_plan(config, epochs=5, learning_rate=1e-3)     # [Phase("head", 0, 2, 1e-3), Phase("fine_tune", 2, 5, 1e-4)]
"""
from __future__ import annotations

from dataclasses import dataclass

import tf_keras as keras

from ..core import storage
from .config import ExportOptions, FitOptions, InputOptions, ModelOptions, TrainerConfig

HEAD, FINE_TUNE, ONE_PHASE = "head", "fine_tune", "train"
DONE_SUFFIX = "-done"


@dataclass(frozen=True)
class Phase:
    name: str
    first_epoch: int  # Keras' initial_epoch
    end_epoch: int  # Keras' epochs: the phase trains epochs first_epoch+1 .. end_epoch
    learning_rate: float

    @property
    def epochs(self) -> int:
        return self.end_epoch - self.first_epoch


def phase_plan(config: TrainerConfig, epochs: int, learning_rate: float) -> list[Phase]:
    """The phases of a run: one for a model that is not a backbone, else head then fine-tuning.

    >>> inputs, export = InputOptions(examples="e"), ExportOptions(output="m")
    >>> [p.name for p in phase_plan(TrainerConfig(input=inputs, fit=FitOptions(epochs=3), export=export), 3, 1e-3)]
    ['train']
    >>> backbone, fit = ModelOptions(name="mobilenet_v2"), FitOptions(epochs=3, freeze_epochs=1)
    >>> phase_plan(TrainerConfig(input=inputs, model=backbone, fit=fit, export=export), 3, 1e-3)[1]
    Phase(name='fine_tune', first_epoch=1, end_epoch=3, learning_rate=0.0001)
    """
    if not config.model.is_backbone:
        return [Phase(ONE_PHASE, 0, epochs, learning_rate)]
    frozen = epochs if config.fit.freeze_epochs is None else config.fit.freeze_epochs
    tuned = config.fit.fine_tune_learning_rate or learning_rate / 10
    plan = [Phase(HEAD, 0, frozen, learning_rate), Phase(FINE_TUNE, frozen, epochs, tuned)]
    return [phase for phase in plan if phase.epochs > 0]


def backbone_layer(model: keras.Model) -> keras.Model:
    """The backbone inside a model built by backbones.py (its layer named `backbone`)."""
    from .backbones import BACKBONE

    return model.get_layer(BACKBONE)


def freeze_for(model: keras.Model, phase: Phase, fine_tune_layers: int | None) -> None:
    """Sets which backbone layers train in `phase` (a model built by backbones.py)."""
    backbone = backbone_layer(model)
    if phase.name != FINE_TUNE:
        backbone.trainable = False
        return
    backbone.trainable = True
    layers = backbone.layers
    first_trained = 0 if fine_tune_layers is None else max(0, len(layers) - fine_tune_layers)
    for index, layer in enumerate(layers):
        frozen = index < first_trained or isinstance(layer, keras.layers.BatchNormalization)
        layer.trainable = not frozen


def done_dir(checkpoints: str, phase: Phase) -> str:
    return storage.join(checkpoints, phase.name + DONE_SUFFIX)


def save_phase_end(model: keras.Model, checkpoints: str, phase: Phase, optimizer_steps: int) -> None:
    """The weights at the end of `phase` and its step count; the JSON written last marks it complete."""
    where = done_dir(checkpoints, phase)
    model.save_weights(storage.join(where, "weights"))
    storage.write_json(storage.join(where, "phase.json"), {"phase": phase.name, "optimizer_steps": optimizer_steps})


def finished_phase(checkpoints: str, phase: Phase) -> dict | None:
    """What a completed `phase` of an earlier, killed run left ({"phase", "optimizer_steps"}), or None."""
    marker = storage.join(done_dir(checkpoints, phase), "phase.json")
    return storage.read_json(marker) if storage.is_file(marker) else None


def restore_phase_end(model: keras.Model, checkpoints: str, phase: Phase) -> None:
    model.load_weights(storage.join(done_dir(checkpoints, phase), "weights")).expect_partial()
