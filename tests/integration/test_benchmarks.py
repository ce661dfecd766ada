"""The benchmark scripts run end to end on tiny inputs and print the ratio lines benchmarks/README.md quotes."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import tiny_experiment

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
