"""The benchmark scripts run end to end on tiny inputs and print the ratio lines benchmarks/README.md quotes."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers import tiny_experiment
from torch import nn

from ablate.config import to_yaml

pytestmark = pytest.mark.slow  # real training runs, sweeps or subprocesses: seconds to a minute each

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def run(script: str, *args: str) -> str:
    proc = subprocess.run([sys.executable, str(BENCH / script), *args], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc.stdout


def test_train_throughput_compares_every_baseline_and_measures_memory(tmp_path):
    pytest.importorskip("transformers", reason="the MarianMT baseline needs the bench extra")
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(to_yaml(tiny_experiment(tmp_path, model={"dropout": 0.1}, data={"max_tokens": 128})))
    out = run("train_throughput.py", "--config", str(cfg), "--steps", "2", "--warmup", "1", "--rounds", "2",
              "--memory-steps", "1", "--threads", "1", "--json", str(tmp_path / "train.json"))  # fmt: skip
    for line in ("training throughput ratio vs nn.Transformer:", "training throughput ratio vs MarianMT:",
                 "peak memory ratio vs MarianMT:", "training throughput ratio vs best baseline"):  # fmt: skip
        assert line in out
    results = json.loads((tmp_path / "train.json").read_text())["results"]
    assert set(results) == {"ablate", "nn.Transformer", "MarianMT"}
    assert len({r["params"] for r in results.values()}) == 1  # the same model three ways
    for r in results.values():
        assert r["tgt_tokens_per_s"] > 0 and r["peak_mib"] > 0 and r["model_tflops"] > 0 and len(r["round_seconds"]) == 2


@pytest.fixture
def bench(monkeypatch):
    """benchmarks/train_throughput.py as a module (it imports its neighbours baselines.py, common.py, train_arms.py
    and train_memory.py)."""
    monkeypatch.syspath_prepend(str(BENCH))
    import train_throughput

    return train_throughput


@pytest.fixture
def memory(bench):
    """benchmarks/train_memory.py, the peak-memory pass of train_throughput.py."""
    import train_memory

    return train_memory


def test_the_device_memory_pass_trains_on_batches_where_the_model_is(memory, monkeypatch):
    """On CUDA the pass got host batches and crashed ("Expected all tensors to be on the same device"); a model on
    the meta device stands in for one on a GPU, torch.cuda's memory counters for the GPU's."""
    seen = []
    monkeypatch.setattr(memory, "timed_pass", lambda name, model, opt, batches, smoothing, device: seen.append((device, batches)))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda device=None: None)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: 2**20)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: 5 * 2**20)
    model = nn.Linear(4, 4).to("meta")
    host = [{"src": torch.ones(2, 3, dtype=torch.long), "tgt_in": torch.ones(2, 5, dtype=torch.long), "tgt_tokens": 8}]
    assert memory.device_peak_memory("ablate", model, None, host, 0.1) == 4.0  # MiB above what was allocated before
    ((device, batches),) = seen
    assert device.type == "meta"
    assert batches[0]["src"].device.type == batches[0]["tgt_in"].device.type == "meta" and batches[0]["tgt_tokens"] == 8
    assert host[0]["src"].device.type == "cpu"  # the caller's batches stay where they were


def test_warm_up_meets_every_batch_shape_of_the_rounds_once(bench):
    def batch(b, s, t):
        return {"src": torch.zeros(b, s), "tgt_in": torch.zeros(b, t)}

    timed = [batch(4, 7, 9), batch(4, 7, 8), batch(4, 7, 9), batch(3, 7, 9), batch(4, 7, 8)]
    assert bench.one_per_shape(timed) == [timed[0], timed[1], timed[3]]


def test_step_overhead_times_ablate_trains_trainer_against_a_bare_loop(tmp_path):
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(to_yaml(tiny_experiment(tmp_path, data={"max_tokens": 128})))
    out = run("step_overhead.py", "--config", str(cfg), "--steps", "5", "--warmup", "2", "--threads", "1",
              "--json", str(tmp_path / "overhead.json"))  # fmt: skip
    ratio = float(re.search(r"step overhead ratio ablate/bare: ([0-9.]+) \(target <= 1.15\)", out).group(1))
    result = json.loads((tmp_path / "overhead.json").read_text())
    assert result["ratio"] == pytest.approx(ratio, abs=5e-4) and ratio > 0
    assert {arm: (len(s["wall"]), len(s["cpu"])) for arm, s in result["step_seconds"].items()} == {"ablate": (5, 5), "bare": (5, 5)}
    assert result["cpu_ratio"] > 0 and "CPU time ratio ablate/bare" in out
    assert "ablate train step: median" in out and "bare PyTorch step: median" in out and "torch " in out


@pytest.mark.parametrize("members", [1, 2])
def test_profile_step_profiles_only_the_window_of_ablates_trainer(tmp_path, members):
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(to_yaml(tiny_experiment(tmp_path, data={"max_tokens": 128})))
    out = run("profile_step.py", "--config", str(cfg), "--warmup", "2", "--steps", "3", "--members", str(members),
              "--out", str(tmp_path / "prof"))  # fmt: skip
    cprofile, ops = ((tmp_path / "prof" / name).read_text() for name in ("cprofile.txt", "ops.txt"))
    assert "==== cProfile, 3 steps, by cumulative ====" in cprofile and "by tottime" in cprofile
    # three training steps inside the window, no more: the step function ran exactly 3 times under cProfile
    assert re.search(r"^\s+3\s+.*module\.py:\d+\(training_step\)$", cprofile, re.M), cprofile[:3000]
    assert "==== torch.profiler, by self_cpu_time_total ====" in ops and ("aten::mm" in ops or "aten::bmm" in ops)
    assert ("MemberAdam" in ops) == (members > 1)  # the group's own step, not an ordinary run's
    assert re.search(rf"per step \({members} members?\): host [0-9.]+ ms, device -", out) and "wrote" in out


def test_decode_throughput_against_generate(tmp_path, trained_run):
    pytest.importorskip("transformers", reason="the MarianMT baseline needs the bench extra")
    cfg, summary, _ = trained_run
    # One sentence a batch: generate() stops a batch at its longest source's limit, ablate each row at its own, so
    # only then must a barely trained model that may never emit EOS decode the same tokens.
    out = run("decode_throughput.py", "--checkpoint", summary["best"]["checkpoint"], "--sentences", "6", "--beams", "1", "2",
              "--rounds", "1", "--threads", "1", "--batch-tokens", "1", "--json", str(tmp_path / "decode.json"))  # fmt: skip
    assert "greedy decoding ratio vs MarianMT generate():" in out and "beam-2 decoding ratio" in out
    results = json.loads((tmp_path / "decode.json").read_text())["results"]
    greedy = results["1"]["bleu"]
    assert greedy["ablate"] == greedy["MarianMT generate()"]  # the same function decoded greedily: the same output


def test_attention_scaling_table_csv_and_plot(tmp_path):
    out = run("attention_scaling.py", "--lengths", "16", "32", "--repeats", "1", "--threads", "1", "--only", "additive",
              "--max-gib", "0.0001", "--out", str(tmp_path / "attn"))  # fmt: skip
    assert "additive" in out and (tmp_path / "attn.png").stat().st_size > 0
    rows = list(csv.DictReader((tmp_path / "attn.csv").open()))
    assert {r["variant"] for r in rows} == {"scaled_dot_product", "additive"}  # the default comes along as reference
    by = {(r["variant"], r["length"]): r for r in rows}
    assert float(by["scaled_dot_product", "16"]["ms"]) > 0
    assert by["additive", "32"]["skipped"].startswith("est.")  # over the tiny memory budget: skipped, said so
