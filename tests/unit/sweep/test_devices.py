"""Trials packed on GPUs, on a CPU machine: the device count, the GPUs' memory and the probe's training run are faked,
worker processes are recorded instead of started."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import optuna
import pytest
import yaml
from helpers import multi30k_names
from sweep_files import write

from ablate.cli import main
from ablate.config import ConfigError
from ablate.sweep import commands as sweep_commands
from ablate.sweep import devices, probe
from ablate.sweep.load import load_sweep

GIB = 2**30
H100 = "NVIDIA H100 80GB HBM3"
ROWS = "name: demo\nbase: base.yaml\nobjective: {metric: val/loss, direction: minimize}\nvariants:\n  base: {}\n  big: {model.d_model: 128, model.d_ff: 512}\n"


def report(peak_gib: float = 7.0, free_gib: tuple[float, ...] = (80.0,), name: str = H100) -> dict:
    """What the probe's child prints: its peak reserved memory and each visible GPU's free memory."""
    return {
        "peak_reserved": int(peak_gib * GIB),
        "steps": 20,
        "gpus": [{"name": name, "free": int(f * GIB), "total": 80 * GIB} for f in free_gib],
    }


@pytest.fixture
def gpus(monkeypatch, tmp_path):
    """A machine with `n` GPUs (set with gpus(n, inherited=...)), no MPS daemon, and a probe that reports `probed`."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("ABLATE_SWEEP_STORAGE", raising=False)
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", str(tmp_path / "no-mps"))
    (tmp_path / "proc").mkdir()
    monkeypatch.setattr(devices, "PROC", tmp_path / "proc")
    calls = []

    def fake_probe(sweep, overrides, seed, visible):
        calls.append((overrides, visible))
        return state.probed

    monkeypatch.setattr(probe, "run_probe", fake_probe)
    state = types.SimpleNamespace(probed=report(), probes=calls)

    def setup(n: int, inherited: str | None = None):
        monkeypatch.setattr(devices, "gpu_count", lambda: n)
        if inherited is not None:
            monkeypatch.setenv("CUDA_VISIBLE_DEVICES", inherited)
        return state

    return setup


@pytest.fixture
def started(monkeypatch):
    """Worker processes `ablate sweep` would start: (argv, CUDA_VISIBLE_DEVICES or None) of each, none started."""
    procs = []

    class FakePopen:
        stdout = None

        def __init__(self, cmd, env=None, **kwargs):
            procs.append((cmd, env.get("CUDA_VISIBLE_DEVICES")))

        def poll(self):
            return 0

        def wait(self):
            return 0

    monkeypatch.setattr(
        sweep_commands, "subprocess", types.SimpleNamespace(Popen=FakePopen, PIPE=subprocess.PIPE, STDOUT=subprocess.STDOUT)
    )
    monkeypatch.setattr(sweep_commands.signal, "signal", lambda *a: None)  # the test process keeps its own handlers
    return procs


@pytest.fixture(autouse=True)
def _corpus_found(tmp_path, monkeypatch):
    """`ablate sweep` looks for its trials' corpus before any starts; the trials here are faked and never read it, so
    a folder of the Multi30k names stands in (with ABLATE_DATA_DIR unset the sweep would try to download it)."""
    monkeypatch.setenv("ABLATE_DATA_DIR", str(multi30k_names(tmp_path / "data")))


def sweep_file(tmp_path, extra: str = "") -> str:
    return str(write(tmp_path, ROWS + f"out_dir: {tmp_path}/out\noverrides: {{logging.wandb: false}}\nworkers: 2\n" + extra))


def flat(text: str) -> str:
    return " ".join(text.split())  # rich wraps long lines at 160 columns when not on a terminal


# -- which worker sees which GPU ---------------------------------------------------------------------------------


@pytest.mark.parametrize("init", ["raise ImportError('libc10_cuda.so: cannot open shared object file')", "import no_such_dependency"])
def test_a_torch_that_fails_to_import_is_said_to_be_broken_not_taken_for_no_gpu(tmp_path, monkeypatch, init):
    """`except Exception: return 0` made a broken torch look like a machine without GPUs: the sweep planned every trial
    on the CPU, and each failed importing torch. Only a torch not installed at all counts as no GPU."""
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(init + "\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    with pytest.raises(
        OSError,
        match=r"^torch fails to import, so the GPUs here cannot be counted \((ImportError: libc10_cuda|ModuleNotFoundError: No module named 'no_such_dependency')",
    ):
        devices.gpu_count()
    monkeypatch.setitem(sys.modules, "torch", None)  # not installed: `import torch` finds none
    assert devices.gpu_count() == 0


def test_visible_gpus_are_the_inherited_list_of_indices_or_uuids_cut_to_the_devices_cuda_found(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(devices, "gpu_count", lambda: 2)
    assert devices.visible_gpus() == ["0", "1"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    assert devices.visible_gpus() == ["3", "5"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-8f3a, GPU-77c1,GPU-dead")  # CUDA stops at an entry it cannot find
    assert devices.visible_gpus() == ["GPU-8f3a", "GPU-77c1"]
    monkeypatch.setattr(devices, "gpu_count", lambda: 0)
    assert devices.visible_gpus() == []


def test_workers_interleave_over_the_gpus_and_a_ddp_trial_gets_a_block_of_them():
    assert devices.assign(["0", "1"], 4, 2, 1, "--workers") == ["0", "1", "0", "1"]
    assert devices.assign(["3", "5"], 3, 2, 1, "--workers") == ["3", "5", "3"]  # a partial fill spreads over both
    assert devices.assign(["0", "1", "2", "3"], 2, 1, 2, "--workers") == ["0,1", "2,3"]
    with pytest.raises(ValueError, match=r"--workers 5 needs 5 trial slots, but 2 GPU\(s\) x trials_per_gpu 2 give 4"):
        devices.assign(["0", "1"], 5, 2, 1, "--workers")
    with pytest.raises(ValueError, match=r"3 worker\(s\) x gpus_per_trial 2 need 6 GPUs, but 4 are visible"):
        devices.assign(["0", "1", "2", "3"], 3, 1, 2, "--workers")


def test_a_sweep_runs_trials_per_gpu_workers_pinned_to_each_inherited_gpu(gpus, started, tmp_path, capsys):
    state = gpus(2, inherited="3,5")
    path = sweep_file(tmp_path, "trials_per_gpu: 2\nseeds: [1, 2]\n")  # 4 trials for the 4 slots
    assert main(["sweep", path]) == 0
    out = flat(capsys.readouterr().out)
    # (worker index, the device argument it records on its trials, its CUDA_VISIBLE_DEVICES)
    assert [(cmd[4], cmd[-1], env) for cmd, env in started] == [("0", "3", "3"), ("1", "5", "5"), ("2", "3", "3"), ("3", "5", "5")]
    assert [cmd[1:4] for cmd, _ in started] == [["-m", "ablate.sweep.worker", path]] * 4
    # The explicit 2 is checked against the largest row, probed on the sweep's GPUs.
    assert state.probes == [({"model.d_model": 128, "model.d_ff": 512}, ["3", "5"])]
    assert "trials_per_gpu 2: fits, 2 x 7.0 GiB = 14.0 GiB of 72.0 GiB usable (largest row 'big' peaks at 7.0 GiB reserved;" in out
    line = "0 trials finished, 4 queued, 2 GPUs x 2 trials each, CUDA MPS: off (no daemon; trials time-share each GPU)"
    assert line in out and f"{line} (" not in out  # every slot has a trial: no fewer workers


def test_the_flag_overrides_the_file_and_gpus_per_trial_two_composes_without_a_probe(gpus, started, tmp_path, capsys):
    state = gpus(4)
    assert main(["sweep", sweep_file(tmp_path, "trials_per_gpu: 3\n"), "--trials-per-gpu", "1", "--workers", "2"]) == 0
    assert [env for _, env in started] == ["0", "1"] and state.probes == []  # 1 per GPU: nothing to check
    started.clear()
    path = write(tmp_path, ROWS + f"out_dir: {tmp_path}/out2\noverrides: {{logging.wandb: false}}\ngpus_per_trial: 2\n")
    assert main(["sweep", str(path)]) == 0
    assert [env for _, env in started] == ["0,1", "2,3"] and state.probes == []
    assert "2 queued, 4 GPUs, 2 per trial, CUDA MPS: off" in flat(capsys.readouterr().out)


def test_trials_per_gpu_with_gpus_per_trial_a_bad_value_and_too_many_workers_are_refused(gpus, started, tmp_path, capsys):
    gpus(2)
    with pytest.raises(ConfigError) as err:
        load_sweep(sweep_file(tmp_path, "trials_per_gpu: 2\ngpus_per_trial: 2\n"))
    assert str(tmp_path / "sweep.yaml") in str(err.value)
    assert "trials_per_gpu 2 and gpus_per_trial 2 cannot be combined" in str(err.value)
    for bad in ("0", "two", "1.5", "true", "[2]"):
        with pytest.raises(ConfigError, match=r"sweep\.yaml: trials_per_gpu=.* must be an integer >= 1 or 'auto'"):
            load_sweep(sweep_file(tmp_path, f"trials_per_gpu: {bad}\n"))
    assert load_sweep(sweep_file(tmp_path, "trials_per_gpu: auto\n")).trials_per_gpu == "auto"
    path = write(tmp_path, ROWS + f"out_dir: {tmp_path}/out\ngpus_per_trial: 2\n")
    assert main(["sweep", str(path), "--trials-per-gpu", "2"]) == 2
    assert f"{path}: --trials-per-gpu 2 and gpus_per_trial 2 cannot be combined" in capsys.readouterr().err
    assert main(["sweep", sweep_file(tmp_path), "--trials-per-gpu", "lots"]) == 2
    assert "--trials-per-gpu='lots' must be an integer >= 1 or 'auto'" in capsys.readouterr().err
    assert main(["sweep", sweep_file(tmp_path), "--trials-per-gpu", "2", "--workers", "5"]) == 2
    assert "--workers 5 needs 5 trial slots, but 2 GPU(s) x trials_per_gpu 2 give 4" in capsys.readouterr().err
    assert started == [] and not (tmp_path / "out").exists()


def test_an_explicit_n_that_does_not_fit_is_refused_with_both_numbers_before_the_study_starts(gpus, started, tmp_path, capsys):
    gpus(1).probed = report(peak_gib=7.0, free_gib=(80.0,))
    assert main(["sweep", sweep_file(tmp_path), "--trials-per-gpu", "12"]) == 2
    err = flat(capsys.readouterr().err)
    assert (
        "--trials-per-gpu 12 does not fit: 12 x 7.0 GiB = 84.0 GiB, but 72.0 GiB are usable (largest row 'big' peaks at 7.0 GiB "
        f"reserved; 80.0 GiB free on {H100} less 10% headroom); at most 10 fit, or use auto" in err
    )
    assert started == [] and not (tmp_path / "out").exists()
    assert main(["sweep", sweep_file(tmp_path, "trials_per_gpu: 11\n")]) == 2
    assert f"{tmp_path / 'sweep.yaml'}: trials_per_gpu 11 does not fit: 11 x 7.0 GiB = 77.0 GiB" in flat(capsys.readouterr().err)


# -- auto ----------------------------------------------------------------------------------------------------------


def test_auto_prints_n_and_the_numbers_behind_it_and_runs_that_many_workers(gpus, started, tmp_path, capsys, monkeypatch):
    gpus(1).probed = report(peak_gib=7.1, free_gib=(80.0,))
    monkeypatch.setattr(probe, "cpu_cores", lambda: 32)
    assert main(["sweep", sweep_file(tmp_path, "trials_per_gpu: auto\n")]) == 0
    out = flat(capsys.readouterr().out)
    assert f"trials_per_gpu auto: 10 (largest row 'big' peaks at 7.1 GiB reserved; 80.0 GiB free on {H100} less 10% headroom)" in out
    # 10 slots, but the study has 2 rows: workers beyond them would only start and stop.
    assert "1 GPU x 10 trials each, CUDA MPS: off (no daemon; trials time-share each GPU) (2 workers for the 2 trials left)" in out
    assert [env for _, env in started] == ["0", "0"]


def test_auto_takes_the_fullest_gpu_and_is_capped_by_the_cpu_cores_each_gpu_gets(gpus, tmp_path, monkeypatch):
    state = gpus(2)
    sweep = load_sweep(sweep_file(tmp_path))
    said = []
    state.probed = report(peak_gib=1.0, free_gib=(139.0, 40.0), name="NVIDIA H200")  # another job holds 99 GiB of the second
    monkeypatch.setattr(probe, "cpu_cores", lambda: 100)
    assert probe.resolve(sweep, "auto", "x", ["0", "1"], said.append) == 36  # 40 GiB less 10% = 36 GiB
    assert (
        said[-1] == "trials_per_gpu auto: 36 (largest row 'big' peaks at 1.0 GiB reserved; 40.0 GiB free on NVIDIA H200 less 10% headroom)"
    )
    monkeypatch.setattr(probe, "cpu_cores", lambda: 16)
    assert probe.resolve(sweep, "auto", "x", ["0", "1"], said.append) == 8
    assert said[-1].endswith("less 10% headroom; 36 fit, capped at 8: 16 CPU cores for 2 GPU(s), 1 per trial)")
    state.probed = report(peak_gib=50.0, free_gib=(50.0,))
    assert probe.resolve(sweep, "auto", "x", ["0"], said.append) == 1
    assert said[-1].endswith("not even one fits inside the headroom, so 1)")
    assert said[0].startswith("measuring GPU memory: row 'big' (") and "the sweep's largest) trains 20 steps on GPU 0" in said[0]


def test_the_largest_config_of_a_search_space_is_found_among_its_valid_corners(tmp_path):
    text = (
        "name: s\nbase: base.yaml\nobjective: {metric: val/loss, direction: minimize}\nn_trials: 4\nsampler: {name: tpe}\n"
        "search:\n  model.d_ff: {type: int, low: 64, high: 1024}\n  model.heads: {type: categorical, choices: [4, 3]}\n"
        "  model.d_model: {type: categorical, choices: [64, 48]}\n"
    )
    what, overrides, seed, cfg, params = probe.largest(load_sweep(write(tmp_path, text)))
    assert what == "config model.d_ff=1024, model.heads=4, model.d_model=64"  # heads 3 with d_model 64: invalid
    assert overrides == {"model.d_ff": 1024, "model.heads": 4, "model.d_model": 64}
    assert cfg.model.d_ff == 1024 and seed is None and params > 0
    huge = text.replace("{type: int, low: 64, high: 1024}", f"{{type: categorical, choices: {list(range(64, 263))}}}")
    with pytest.raises(ValueError, match=r"trials_per_gpu auto measures the search space's largest config.* it has 796 \(at most 256\)"):
        probe.largest(load_sweep(write(tmp_path, huge)))


def test_on_cpu_trials_per_gpu_is_ignored_with_one_line_and_the_first_line_is_unchanged(gpus, started, tmp_path, capsys):
    gpus(0)
    assert main(["sweep", sweep_file(tmp_path, "trials_per_gpu: auto\n")]) == 0
    out = capsys.readouterr().out
    assert out.count("trials_per_gpu auto ignored: trials train on CPU (no GPU visible)") == 1
    line = next(x for x in out.splitlines() if x.startswith("study 'demo'"))
    assert line.endswith("0 trials finished, 2 queued") and "MPS" not in out
    assert [(len(cmd), env) for cmd, env in started] == [(6, None), (6, None)]  # the file's 2 workers, no device argument


# -- the probe process -----------------------------------------------------------------------------------------------


def test_the_probe_trains_the_row_in_a_child_pinned_to_the_gpus_and_removes_its_run_directory(tmp_path, monkeypatch):
    seen = {}

    def fake_run(cmd, env, capture_output, text):
        config = Path(cmd[-2])
        seen.update(cmd=cmd, env=env["CUDA_VISIBLE_DEVICES"], cfg=yaml.safe_load(config.read_text()), dir=config.parent)
        return subprocess.CompletedProcess(cmd, 0, "Using bf16\n" + probe.MARK + json.dumps(report()) + "\n", "")

    monkeypatch.setattr(probe.subprocess, "run", fake_run)
    sweep = load_sweep(sweep_file(tmp_path))
    assert probe.run_probe(sweep, {"model.d_model": 128, "model.d_ff": 512}, 7, ["3", "5"]) == report()
    assert seen["cmd"][1:3] == ["-m", "ablate.sweep.probe"] and seen["cmd"][-1] == str(probe.PROBE_STEPS) and seen["env"] == "3,5"
    cfg = seen["cfg"]
    assert (cfg["model"]["d_model"], cfg["seed"], cfg["logging"]["wandb"], cfg["train"]["val_max_sentences"]) == (128, 7, False, 0)
    assert Path(cfg["out_dir"]).parent == seen["dir"] and not seen["dir"].exists()  # a temporary run directory, removed

    def oom(cmd, env, capture_output, text):
        return subprocess.CompletedProcess(
            cmd, 1, "", "Traceback ...\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.0 GiB\n"
        )

    monkeypatch.setattr(probe.subprocess, "run", oom)
    with pytest.raises(ValueError, match=r"probe \(a 20-step run on GPU 3\) failed with exit code 1: torch.OutOfMemoryError: CUDA out of"):
        probe.run_probe(sweep, {}, None, ["3", "5"])


def test_the_probe_child_trains_the_config_and_reports_the_peak_and_each_gpus_free_memory(tmp_path, monkeypatch):
    """The child's real training path on CPU (train.accelerator cpu), with CUDA's memory functions standing in."""
    import torch
    from helpers import tiny_experiment

    from ablate.config import to_yaml

    cfg = tiny_experiment(tmp_path, train={"accelerator": "cpu", "num_threads": 1, "val_max_sentences": 0})
    (tmp_path / "probe.yaml").write_text(to_yaml(cfg))
    # The training itself as on a machine without CUDA: with torch's CUDA wheel and no driver, the faked count made
    # CUDA look available (Lightning's NVML check) and the optimizer's step asked the driver about graph capture.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda i: ((30 + i) * GIB, 80 * GIB))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i: f"gpu{i}")
    monkeypatch.setattr(torch.cuda, "max_memory_reserved", lambda i: 123 * 2**20)
    got = probe.measure_here(str(tmp_path / "probe.yaml"), 3)
    assert got == {
        "peak_reserved": 123 * 2**20,
        "steps": 3,
        "gpus": [{"name": "gpu0", "free": 30 * GIB, "total": 80 * GIB}, {"name": "gpu1", "free": 31 * GIB, "total": 80 * GIB}],
    }
    assert not (tmp_path / "run" / "checkpoints").exists()  # a probe saves nothing


# -- CUDA MPS ------------------------------------------------------------------------------------------------------


def test_mps_is_on_when_the_pipe_directory_holds_the_daemons_control_pipe(tmp_path, monkeypatch):
    proc, pipe = tmp_path / "proc", tmp_path / "mps"
    for pid, cmdline, comm in (
        ("1", b"/sbin/init\0", "init"),
        ("77", b"", "nvidia-cuda-mps"),
        ("4242", b"nvidia-cuda-mps-control\0-d\0", ""),
    ):
        (proc / pid).mkdir(parents=True)
        (proc / pid / "cmdline").write_bytes(cmdline)
        (proc / pid / "comm").write_text(comm + "\n")
    (proc / "self").mkdir()
    monkeypatch.setattr(devices, "PROC", proc)
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", str(pipe))
    assert devices.mps_processes() == [77, 4242]  # a kernel thread's empty cmdline: its comm, cut to 15 characters
    assert str(devices.mps_status()) == (
        f"CUDA MPS: off (a daemon runs as pid 77 but {pipe} holds no control pipe; set CUDA_MPS_PIPE_DIRECTORY to its pipe directory)"
    )
    pipe.mkdir()
    (pipe / "control").touch()
    assert str(devices.mps_status()) == f"CUDA MPS: on (daemon found at {pipe}, pid 77)"
    for pid in ("77", "4242"):
        (proc / pid / "cmdline").write_bytes(b"python\0")
    assert str(devices.mps_status()) == f"CUDA MPS: on (daemon found at {pipe}; its process is not visible from here)"
    (pipe / "control").unlink()
    assert str(devices.mps_status()) == "CUDA MPS: off (no daemon; trials time-share each GPU)"
    monkeypatch.delenv("CUDA_MPS_PIPE_DIRECTORY")
    monkeypatch.setattr(devices, "MPS_PIPE_DIR", pipe)
    (pipe / "control").touch()
    assert devices.mps_status().on  # the default pipe directory when the variable is unset


def test_the_sweeps_first_line_says_mps_is_on(gpus, started, tmp_path, capsys, monkeypatch):
    gpus(1)
    (tmp_path / "mps").mkdir()
    (tmp_path / "mps" / "control").touch()
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", str(tmp_path / "mps"))
    assert main(["sweep", sweep_file(tmp_path)]) == 0
    out = flat(capsys.readouterr().out)
    assert f"1 GPU x 1 trial each, CUDA MPS: on (daemon found at {tmp_path / 'mps'}; its process is not visible from here)" in out


def test_a_trial_records_the_gpu_its_worker_was_pinned_to_and_none_on_cpu(tmp_path, monkeypatch):
    from ablate.sweep import worker
    from ablate.sweep.plan import plan_for

    def finish(handle, trial, sweep, index):
        handle.study.tell(trial, 1.0)

    monkeypatch.setattr(worker, "run_trial", finish)
    sweep = load_sweep(write(tmp_path, ROWS + f"out_dir: {tmp_path}/out\n"))
    recorded = []
    for url, gpu in ((f"sqlite:///{tmp_path}/gpu.db", "GPU-8f3a"), (f"sqlite:///{tmp_path}/cpu.db", None)):
        study = worker.open_sweep_study(sweep, url).study
        plan_for(sweep).queue(study)
        worker.run_worker(sweep, url, 0, gpu=gpu)
        recorded.append([t.user_attrs.get("gpu", "absent") for t in study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))])
    assert recorded == [["GPU-8f3a", "GPU-8f3a"], ["absent", "absent"]]


# -- members auto --------------------------------------------------------------------------------------------------


def test_members_auto_fills_the_gpu_with_members_capped_by_a_rows_seeds_and_packs_trials_with_what_is_left(gpus, tmp_path, monkeypatch):
    state = gpus(1)
    state.probed = report(peak_gib=2.0, free_gib=(80.0,))  # 72 GiB usable: 36 runs' worth
    monkeypatch.setattr(probe, "cpu_cores", lambda: 32)
    sweep = load_sweep(sweep_file(tmp_path, "seeds: [1, 2, 3, 4, 5, 6, 7, 8]\nmembers: auto\n"))
    said = []
    k, measured = probe.resolve_members(sweep, "auto", ["0"], said.append)
    assert k == 8 and "members auto: 8 per model" in said[-1] and "36 fit, capped at 8" in said[-1]
    # trials_per_gpu auto then packs trials of 8 members: 72 // (8 x 2) = 4, one probe for both
    assert probe.resolve(sweep, "auto", "x", ["0"], said.append, members=8, probe=measured) == 4 and len(state.probes) == 1
    assert probe.resolve_members(sweep, 3, ["0"], said.append)[0] == 8  # beside 3 trials a GPU: 12 fit, still capped at 8
    state.probed = report(peak_gib=30.0, free_gib=(80.0,))
    assert probe.resolve_members(sweep, 2, ["0"], said.append)[0] == 1  # 72 // (2 x 30) = 1


def test_members_auto_on_cpu_trains_each_trial_alone_and_says_so(tmp_path, capsys):
    from ablate.sweep.commands import gpu_layout

    sweep = load_sweep(sweep_file(tmp_path, "members: auto\ntrials_per_gpu: 1\n"))
    sweep.overrides["train.accelerator"] = "cpu"
    sweep._composed.clear()
    from rich.console import Console

    gpu_layout(sweep, "x", Console())
    assert "members auto: 1 (trials train on CPU" in capsys.readouterr().out and sweep.row_config({}).members.size == 1
