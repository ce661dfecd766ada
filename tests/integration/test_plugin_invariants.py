"""A researcher's own variant goes through the model's invariants with ablate's own tests: ABLATE_TEST_PLUGINS
(tests/conftest.py) registers it before collection, and the covering sets take it in (docs/variants.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a pytest of its own, twice (about 10 s each)

ROOT = Path(__file__).resolve().parents[2]
KERNEL = """
import torch
from ablate.model.attention import ATTENTION, AttentionKernel, repeat_kv, softmax_attend
from ablate.registry import register

@register(ATTENTION, "mine_test")
class Mine(AttentionKernel):
    takes_bias = False

    def __init__(self, *, heads, d_k, dropout=0.0):
        super().__init__()

    def forward(self, q, k, v, mask, scale):
        k, v = repeat_kv(k, q.size(1)), repeat_kv(v, q.size(1))
        scores = q @ k.transpose(-1, -2) * scale
        return softmax_attend(scores, v, MASK, 0.0, self.training)
"""


def _invariants(tmp_path: Path, mask: str) -> subprocess.CompletedProcess:
    plugin = tmp_path / "mine.py"
    plugin.write_text(KERNEL.replace("MASK", mask))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "tests/unit/model/test_transformer.py", "-k", "mine_test"],
        cwd=ROOT, capture_output=True, text=True, timeout=600, env={**os.environ, "ABLATE_TEST_PLUGINS": str(plugin)},
    )  # fmt: skip


def test_a_kernel_that_ignores_the_mask_fails_causality_and_one_that_keeps_it_passes(tmp_path):
    peeks = _invariants(tmp_path, "None")  # the decoder sees the tokens ahead: it trains, and nothing else says so
    assert peeks.returncode == 1, peeks.stdout[-2000:]
    assert "FAILED tests/unit/model/test_transformer.py::test_invariant[decoder_is_causal-mine_test-" in peeks.stdout
    sound = _invariants(tmp_path, "mask")
    assert sound.returncode == 0 and " passed" in sound.stdout and "failed" not in sound.stdout, sound.stdout[-2000:]
