"""order_stats: NumPy's medians and distinct labels, to the bit, without importing numpy.ma."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import loaded_in_child

from spotdiff_cli.analysis.order_stats import distinct_labels, median


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.uint8, np.int64, np.int32])
def test_median_is_numpys_to_the_bit(dtype):
    rng = np.random.default_rng(7)
    for n in [*range(1, 40), 1000, 1001, 20_000]:
        values = (rng.normal(size=n) * 50 + 100).astype(dtype)
        ours, numpys = median(values), np.median(values)
        assert np.asarray(ours).dtype == np.asarray(numpys).dtype
        assert np.asarray(ours).tobytes() == np.asarray(numpys).tobytes(), (dtype, n)


def test_median_of_images_lists_and_nans():
    rng = np.random.default_rng(3)
    image = rng.random((37, 52)).astype(np.float32)
    assert median(image) == np.median(image)
    assert median([1, 4, 2, 8]) == np.median([1, 4, 2, 8]) == 3.0
    with_nan = rng.random(101)
    with_nan[17] = np.nan
    assert np.isnan(median(with_nan)) and np.isnan(np.median(with_nan))
    with pytest.warns(RuntimeWarning):
        assert np.isnan(median(np.array([], np.float32)))


def test_distinct_labels_are_numpys_unique():
    rng = np.random.default_rng(5)
    for labels in (rng.integers(0, 9, 500), rng.integers(3, 4, 7), np.array([], np.int64)):
        ours, numpys = distinct_labels(labels), np.unique(labels)
        assert ours.tolist() == numpys.tolist()
        assert ours.dtype == numpys.dtype or labels.size == 0


def test_a_caption_does_not_import_numpy_ma():
    """The point of the module: a cold caption never pays numpy.ma's import (18-22 ms)."""
    code = (
        "from spotdiff_cli.api import describe_pair\n"
        "describe_pair('examples/parking-lot/before.jpg', 'examples/parking-lot/after.jpg')"
    )
    assert loaded_in_child(code, "numpy.ma") == [False]
