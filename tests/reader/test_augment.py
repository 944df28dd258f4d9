"""Train-time augmentation: masks move with their images, randomness is seeded, eval is untouched."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from shardflow.trainer.augment import GEOMETRIC, AugmentLayer, _identity, _matrix, op_seeds, _warp, augment_batch

pytestmark = pytest.mark.unit  # in process, small generated data, no server: make test-fast runs it


def _blocks(batch: int = 8, size: int = 32) -> tuple[tf.Tensor, tf.Tensor]:
    """Images whose single channel is their mask's id (0, 1, 2) in large blocks: alignment is checkable."""
    rng = np.random.default_rng(0)
    coarse = rng.integers(0, 3, size=(batch, size // 8, size // 8))
    masks = np.kron(coarse, np.ones((8, 8), dtype=np.int64)).astype(np.int32)
    return tf.constant(masks[..., None].astype(np.float32)), tf.constant(masks)


@pytest.mark.parametrize("ops", [("flip",), ("flip_vertical",), ("rotate",), ("crop",), GEOMETRIC])
def test_geometric_ops_move_image_and_mask_together(ops: tuple[str, ...]) -> None:
    images, masks = _blocks()
    moved_images, moved_masks = augment_batch(images, masks, ops, tf.constant([1, 2]))
    moved_images, moved_masks = moved_images.numpy()[..., 0], moved_masks.numpy()
    assert moved_masks.dtype == np.int32 and set(np.unique(moved_masks)) <= {0, 1, 2}
    assert not np.array_equal(moved_masks, masks.numpy()), "the op changed nothing"
    # Away from block edges bilinear sampling returns the block's value exactly: it must be the mask's id.
    settled = np.abs(moved_images - np.round(moved_images)) < 1e-3
    assert settled.mean() > 0.5
    agreement = (np.round(moved_images) == moved_masks)[settled].mean()
    assert agreement > 0.99, f"image and mask disagree on {1 - agreement:.1%} of settled pixels"


def test_photometric_ops_change_images_only_and_the_seed_decides() -> None:
    images, masks = _blocks()
    a_images, a_masks = augment_batch(images, masks, ("brightness", "contrast"), tf.constant([0, 5]))
    b_images, _ = augment_batch(images, masks, ("brightness", "contrast"), tf.constant([0, 5]))
    c_images, _ = augment_batch(images, masks, ("brightness", "contrast"), tf.constant([0, 6]))
    np.testing.assert_array_equal(a_masks.numpy(), masks.numpy())
    np.testing.assert_array_equal(a_images.numpy(), b_images.numpy())
    assert not np.allclose(a_images.numpy(), c_images.numpy())
    assert not np.allclose(a_images.numpy(), images.numpy())


def test_the_augment_layer_acts_in_training_only() -> None:
    images, _ = _blocks()
    layer = AugmentLayer(("flip", "brightness"), seed=3)
    np.testing.assert_array_equal(layer(images, training=False).numpy(), images.numpy())
    first, second = layer(images, training=True).numpy(), layer(images, training=True).numpy()
    assert not np.allclose(first, images.numpy()) and not np.allclose(first, second)


def test_flips_alone_reverse_exactly_as_the_warp_would() -> None:
    """Flip-only ops take the reverse shortcut: the same images and masks as the projective warp, bit for bit."""
    images, masks = _blocks(batch=16)
    images = images + tf.random.stateless_uniform(images.shape, seed=[1, 1])  # distinct values, not blocks
    ops = ("brightness", "flip", "flip_vertical")
    seed = tf.constant([4, 9])
    got_images, got_masks = augment_batch(images, masks, ops, seed)
    seeds = op_seeds(ops, seed)
    matrices = _identity(16)
    for index in (1, 2):
        matrices = tf.linalg.matmul(matrices, _matrix(ops[index], images, seeds[index]))
    warped = _warp(images, matrices, "BILINEAR")
    want_images, _ = augment_batch(warped, None, ("brightness",), seed)  # brightness draws from seeds[0] as above
    np.testing.assert_allclose(got_images.numpy(), want_images.numpy(), atol=1e-5)
    want_masks = tf.cast(tf.round(_warp(tf.cast(masks[..., None], tf.float32), matrices, "NEAREST")[..., 0]), tf.int32)
    np.testing.assert_array_equal(got_masks.numpy(), want_masks.numpy())
    moved = [not np.array_equal(a, b) for a, b in zip(got_masks.numpy(), masks.numpy())]
    assert 0 < sum(moved) < 16  # some examples flipped, some not
