"""core.batch_memory: an example's cost measured from the process's peak memory, and the batch fitted to a budget."""
from __future__ import annotations

import numpy as np
import pytest

from shardflow.core.batch_memory import MB, MAX_BATCH, UNMEASURED_BATCH, batch_for, check_fits, size_batch
from shardflow.core.errors import ConfigError

pytestmark = pytest.mark.unit


def _model_holding(per_example: int):
    """A 'model' whose call holds `per_example` bytes of touched memory per record, then frees them."""
    def call(records: list[bytes]) -> int:
        activations = np.ones(per_example * len(records), np.uint8)  # np.ones touches every page
        return int(activations[::4096].sum())
    return call


@pytest.mark.parametrize("per_example", [16 * MB, 40 * MB])
def test_measured_example_cost_is_what_a_call_holds_per_example(per_example: int) -> None:
    sizing = size_batch([_model_holding(per_example)], [b"r"] * 4, budget_bytes=400 * MB)
    assert sizing.example_bytes == pytest.approx(per_example, rel=0.1)
    assert sizing.batch_size == 400 * MB // sizing.example_bytes
    assert sizing.rule == "budget"


def test_the_costliest_of_two_models_sizes_the_batch() -> None:
    # the cheap model runs first: memory it freed must not hide part of the costly one's growth
    sizing = size_batch([_model_holding(10 * MB), _model_holding(30 * MB)], [b"r"] * 4, budget_bytes=300 * MB)
    assert sizing.example_bytes == pytest.approx(30 * MB, rel=0.1)
    assert sizing.batch_size in (9, 10)


def test_an_explicit_batch_that_cannot_fit_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigError) as refused:
        size_batch([_model_holding(20 * MB)], [b"r"] * 4, budget_bytes=100 * MB, requested=8)
    message = str(refused.value)
    assert "\n" not in message and message.startswith("--batch-size 8 needs about 1")
    assert "over the 100 MB budget" in message
    fits = size_batch([_model_holding(20 * MB)], [b"r"] * 4, budget_bytes=100 * MB, requested=4)
    assert (fits.batch_size, fits.rule) == (4, "explicit")


def test_tiny_examples_are_capped_and_one_record_is_not_measured() -> None:
    assert size_batch([_model_holding(1000)], [b"r"] * 4, budget_bytes=1024 * MB).batch_size == MAX_BATCH
    unmeasured = size_batch([_model_holding(1000)], [b"r"], budget_bytes=1024 * MB)
    assert (unmeasured.example_bytes, unmeasured.batch_size) == (None, UNMEASURED_BATCH)
    assert batch_for(example_bytes=2 << 30, budget_bytes=1 << 30) == 1  # never 0: one example is always tried
    check_fits(10**6, None, MB, "--batch-size")  # nothing measured: nothing to refuse
