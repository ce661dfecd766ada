"""Unit-test fixtures."""

import pytest
import torch

torch.set_num_threads(1)  # tiny tensors: more threads only add overhead and contention


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
