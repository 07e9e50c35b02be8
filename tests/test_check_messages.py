"""The messages of the checks that listed code calls as one line (issue 24): each names the
argument and what it got, as it did when the checks were written out in the listed code."""
import re

import d2lattn  # noqa: F401  (first: the numpy shim)
import numpy as onp
import pytest
from mxnet import np

from d2lattn import pooling
from d2lattn.bert import mean_pool
from d2lattn.gpt import next_token_probs
from d2lattn.transformer import AddNorm


def test_nadaraya_watson_names_bad_training_data_and_kernel():
    with pytest.raises(ValueError, match=re.escape("x_train and y_train must be non-empty and "
                                                   "of equal length, got shapes (3,) and (2,)")):
        pooling.nadaraya_watson([1, 2, 3], [1, 2], [0.5])
    with pytest.raises(TypeError, match="kernel must be a function of u, got 3"):
        pooling.nadaraya_watson([1, 2], [1, 2], [0.5], kernel=3)
    with pytest.raises(TypeError, match=re.escape("kernel must map u (1, 2) to an array of its "
                                                  "shape")):
        pooling.nadaraya_watson([1, 2], [1, 2], [0.5], kernel=lambda u: 1.0)


def test_nw_kernel_regression_names_the_shapes():
    net = pooling.NWKernelRegression()
    net.initialize()
    with pytest.raises(ValueError, match=re.escape("expected queries (m,), keys and values "
                                                   "(m, n); got shapes (2,), (3, 4), (3, 4)")):
        net(np.zeros(2), np.zeros((3, 4)), np.zeros((3, 4)))


@pytest.mark.parametrize("kwargs, message", [
    ({"temperature": -1}, "temperature must be a finite number >= 0, got -1"),
    ({"top_p": 0}, re.escape("top_p must be None or a number in (0, 1], got 0")),
    ({"top_k": 0}, "top_k must be an int >= 1, got 0"),
])
def test_next_token_probs_names_bad_settings(kwargs, message):
    with pytest.raises(ValueError, match=message):
        next_token_probs(onp.zeros(3), **kwargs)
    with pytest.raises(ValueError, match="logits must be a non-empty 1-D array of finite"):
        next_token_probs(onp.array([0.0, onp.nan]))


def test_add_norm_and_mean_pool_name_the_shape():
    add_norm = AddNorm(0.0)
    add_norm.initialize()
    with pytest.raises(ValueError, match=re.escape("X must have a width (last axis) >= 1, got "
                                                   "shape (2, 3, 0)")):
        add_norm(np.zeros((2, 3, 0)), np.zeros((2, 3, 0)))
    with pytest.raises(ValueError, match=re.escape("X must be (batch, steps, num_hiddens), got "
                                                   "shape (2, 3)")):
        mean_pool(np.zeros((2, 3)), np.array([1, 2]))
