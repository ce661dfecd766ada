"""benchmarks/members.py end to end on a tiny corpus: every way trains, the ratios and memory are reported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import tiny_experiment

from ablate.config import to_yaml

pytestmark = pytest.mark.slow  # three fresh processes train tiny models

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def test_members_benchmark_reports_throughput_ratios_and_peak_memory(tmp_path):
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(to_yaml(tiny_experiment(tmp_path, model={"dropout": 0.1}, data={"max_tokens": 128})))
    out = tmp_path / "members.json"
    args = ["--config", str(cfg), "--members", "3", "--steps", "2", "--rounds", "2", "--memory-steps", "1", "--json", str(out)]
    proc = subprocess.run([sys.executable, str(BENCH / "members.py"), *args], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["members"] == 3 and result["rounds"] == 2
    assert set(result["seconds_median"]) == {"runs", "members", "run-0", "member-1"}
    speeds = result["tokens_per_s"]
    assert speeds["members"] == pytest.approx(3 * speeds["members_per_member"])
    assert all(v > 0 for v in speeds.values())
    assert min(result["ratio_members_vs_one_run"], result["ratio_members_vs_runs"], result["ratio_member1_step_vs_run"]) > 0
    assert 0 <= result["padded_share"] < 1
    assert all(result["peak_mib"][way] > 0 for way in ("run-0", "member-1", "members"))
    assert result["tolerance"] == 3  # the sampler's, as training uses it
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=BENCH).stdout.strip() or None
    assert result["environment"]["commit"] == head  # a result names the code it measured


def test_member_data_benchmark_reports_padding_and_shared_order_per_tolerance(tmp_path):
    """benchmarks/member_data.py: a wider tolerance pads more and shares less; independent runs share nothing."""
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(to_yaml(tiny_experiment(tmp_path, data={"max_tokens": 64})))
    out = tmp_path / "data.json"
    args = ["--config", str(cfg), "--members", "4", "--tolerances", "0", "6", "--json", str(out)]
    proc = subprocess.run([sys.executable, str(BENCH / "member_data.py"), *args], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())[str(cfg)]
    narrow, wide, runs = result["tolerance 0"], result["tolerance 6"], result["independent runs"]
    assert result["one run"]["padded"] == pytest.approx(narrow["padded"], abs=0.02)
    assert narrow["padded"] < wide["padded"] < runs["padded"]
    assert narrow["same_step"] > wide["same_step"] > runs["same_step"]
    assert narrow["classes"] > wide["classes"] >= 1


def test_member_spread_benchmark_compares_a_groups_spread_with_independent_runs(tmp_path):
    """benchmarks/member_spread.py: every seed's final figures from both arms, and their spreads compared."""
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(to_yaml(tiny_experiment(tmp_path, model={"dropout": 0.1}, data={"max_tokens": 128})))
    out = tmp_path / "spread.json"
    args = ["--config", str(cfg), "--members", "3", "--json", str(out), "train.max_steps=3", "train.val_every_steps=3"]
    proc = subprocess.run([sys.executable, str(BENCH / "member_spread.py"), *args], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    (batch,) = result["batches"]
    assert batch["seeds"] == [1, 2, 3] and len(batch["seconds"]["runs"]) == 3
    values = batch["values"]["val/ppl"]
    assert len(values["members"]) == len(values["runs"]) == 3
    assert values["members"] != values["runs"]  # members see other batches than their runs
    ppl = result["val/ppl"]
    low, high = ppl["sd_ratio_interval_90"]
    assert low < ppl["sd_ratio"] < high and ppl["members"]["df"] == ppl["runs"]["df"] == 2
    assert 0 <= ppl["brown_forsythe_p"] <= 1 and 0 <= ppl["welch_p"] <= 1
    assert "val/ppl" in proc.stdout and "val/bleu" in proc.stdout
    # Batches measured apart are compared together, each about its own mean.
    again = tmp_path / "again.json"
    proc = subprocess.run([sys.executable, str(BENCH / "member_spread.py"), "--combine", str(out), str(out), "--json", str(again)],
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    both = json.loads(again.read_text())["val/ppl"]
    assert both["members"]["df"] == 4 and both["sd_ratio"] == pytest.approx(ppl["sd_ratio"])


def test_member_bias_and_schedule_pairing_benchmarks_compare_group_means(tmp_path):
    """benchmarks/member_bias.py: G groups on their own schedules, each counted once by its mean, against runs; and
    benchmarks/schedule_pairing.py: another row's groups on the same schedules against those."""
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(to_yaml(tiny_experiment(tmp_path, model={"dropout": 0.1}, data={"max_tokens": 128})))
    out = tmp_path / "bias.json"
    args = [
        "--config",
        str(cfg),
        "--groups",
        "2",
        "--members",
        "2",
        "--runs",
        "2",
        "--json",
        str(out),
        "train.max_steps=3",
        "train.val_every_steps=3",
    ]
    proc = subprocess.run([sys.executable, str(BENCH / "member_bias.py"), *args], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert [g["first_seed"] for g in result["groups"]] == [201, 203] and len(result["runs"]["val/ppl"]) == 2
    ppl = result["val/ppl"]
    assert ppl["group_means"] == pytest.approx([sum(g["values"]["val/ppl"]) / 2 for g in result["groups"]])
    low, high = ppl["delta_interval_95"]
    assert low < ppl["delta"] < high and 0 <= ppl["welch_p"] <= 1 and ppl["members"]["groups"] == 2
    assert "members - runs" in proc.stdout
    # schedule_pairing.py: the same groups for another row, schedule by schedule against these.
    pairs = tmp_path / "pairing.json"
    args = ["--base-from", str(out), "--json", str(pairs), "model.dropout=0.3"]
    proc = subprocess.run([sys.executable, str(BENCH / "schedule_pairing.py"), *args], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    paired = json.loads(pairs.read_text())
    assert paired["first_seeds"] == [201, 203] and paired["row_overrides"] == ["model.dropout=0.3"]
    ppl = paired["val/ppl"]
    assert ppl["base"] == pytest.approx(result["val/ppl"]["group_means"]) and ppl["row"] != ppl["base"]
    assert ppl["delta"] == pytest.approx(sum(ppl["row"]) / 2 - sum(ppl["base"]) / 2) and ppl["se_unpaired"] > 0
    assert "SE unpaired" in proc.stdout
    # Runs of another config are refused, not compared.
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"config": "elsewhere.yaml", "overrides": [], "batches": []}))
    proc = subprocess.run([sys.executable, str(BENCH / "member_bias.py"), "--config", str(cfg), "--runs-from", str(other)],
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode != 0 and "another config" in proc.stderr


def test_members_commands_benchmark_times_a_group_against_its_runs_as_commands(tmp_path):
    """benchmarks/members_commands.py: `ablate train --members K` against K `ablate train` commands, round by round."""
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(to_yaml(tiny_experiment(tmp_path, data={"max_tokens": 128})))
    out = tmp_path / "commands.json"
    args = ["--config", str(cfg), "--members", "2", "--rounds", "1", "--json", str(out), "train.max_steps=3", "train.val_every_steps=3"]
    proc = subprocess.run([sys.executable, str(BENCH / "members_commands.py"), *args], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    (round_,) = result["rounds"]
    assert round_["members_s"] > 0 and round_["runs_s"] > 0 and len(round_["ppl_members"]) == len(round_["ppl_runs"]) == 2
    assert result["median_ratio"] == pytest.approx(round_["runs_s"] / round_["members_s"])
