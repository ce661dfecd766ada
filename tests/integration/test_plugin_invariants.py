"""A researcher's own variant goes through the model's invariants with ablate's own tests: ABLATE_TEST_PLUGINS
(tests/conftest.py) registers it before collection, and the covering sets take it in (docs/variants.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a pytest of its own, twice a test (about 10 s each)

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


POSITIONAL = """
import torch
from ablate.model.members import member_rows
from ablate.model.positional import POSITIONAL, RelativePosition
from ablate.registry import register

@register(POSITIONAL, "mine_test")
class LogDistance(RelativePosition):
    adds_bias = True

    def __init__(self, *, heads, d_k, max_positions, causal, members=None):
        super().__init__(heads=heads, d_k=d_k, max_positions=max_positions, causal=causal)
        self.members = members
        self.weight = torch.nn.Parameter(torch.rand(*([members] if members else []), heads, 1, 1) + 0.5)

    def bias(self, q, q_pos, k_pos, scale):
        penalty = -self.weight * torch.log1p((q_pos[:, None] - k_pos[None, :]).abs().float()).to(q.dtype)
        if self.members is None:
            return penalty
        return MEMBERS
"""


def _invariants(tmp_path: Path, source: str, test_file: str = "test_transformer.py") -> subprocess.CompletedProcess:
    plugin = tmp_path / "mine.py"
    plugin.write_text(source)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", f"tests/unit/model/{test_file}", "-k", "mine_test"],
        cwd=ROOT, capture_output=True, text=True, timeout=600, env={**os.environ, "ABLATE_TEST_PLUGINS": str(plugin)},
    )  # fmt: skip


def test_a_kernel_that_ignores_the_mask_fails_causality_and_one_that_keeps_it_passes(tmp_path):
    peeks = _invariants(tmp_path, KERNEL.replace("MASK", "None"))  # the decoder sees the tokens ahead: it trains, and nothing else says so
    assert peeks.returncode == 1, peeks.stdout[-2000:]
    assert "FAILED tests/unit/model/test_transformer.py::test_invariant[decoder_is_causal-mine_test-" in peeks.stdout
    sound = _invariants(tmp_path, KERNEL.replace("MASK", "mask"))
    assert sound.returncode == 0 and " passed" in sound.stdout and "failed" not in sound.stdout, sound.stdout[-2000:]


def test_a_member_branch_that_gives_every_member_the_first_ones_weight_fails_on_the_batched_path(tmp_path):
    """A CPU trains members one at a time through the ordinary branch; only this test runs the batched one on a CPU."""
    wrong = _invariants(tmp_path, POSITIONAL.replace("MEMBERS", "penalty[:1].repeat_interleave(q.size(0), 0)"), "test_members.py")
    assert wrong.returncode == 1, wrong.stdout[-2000:]
    failed = "FAILED tests/unit/model/test_members.py::test_each_member_computes_what_its_own_model_computes[mine_test-"
    assert f"{failed}batched]" in wrong.stdout and f"{failed}cpu]" not in wrong.stdout
    sound = _invariants(tmp_path, POSITIONAL.replace("MEMBERS", "member_rows(penalty, q.size(0) // self.members)"), "test_members.py")
    assert sound.returncode == 0 and "2 passed" in sound.stdout, sound.stdout[-2000:]
