"""Issue 38 item 7: parameters are counted on the meta device (any size, nothing allocated), and a model whose
training state cannot fit in the memory available is refused before it is built, naming its size."""

from __future__ import annotations

import resource

import pytest
from helpers import tiny_model

from ablate.cli import main
from ablate.config import DataConfig, ExperimentConfig
from ablate.model import build_transformer, count_parameters
from ablate.run import memory
from ablate.run.memory import memory_problem, parameter_count


def test_the_meta_count_is_the_built_models_count():
    cfg = ExperimentConfig(model=tiny_model(positional="learned"), data=DataConfig(vocab_size=64))
    assert parameter_count(cfg) == count_parameters(build_transformer(cfg.model, 64))


def test_a_model_of_hundreds_of_gigabytes_is_counted_without_allocating_it(tmp_path, capsys):
    (tmp_path / "c.yaml").write_text("model: {enc_layers: 2, dec_layers: 2, d_ff: 256, heads: 4}\ndata: {vocab_size: 2000}\n")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert main(["params", str(tmp_path / "c.yaml"), "model.d_model=32768"]) == 0
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200 * 1024  # KiB: no 100 GB of weights built
    assert "25,904,022,528" in capsys.readouterr().out


def test_a_model_too_large_for_the_memory_left_is_refused_naming_its_size(monkeypatch):
    cfg = ExperimentConfig(model=tiny_model(), data=DataConfig(vocab_size=64))
    cfg.train.accelerator = "cpu"
    params = parameter_count(cfg)["total"]
    monkeypatch.setattr(memory, "host_available", lambda: 16 * params - 1)
    problem = memory_problem(cfg, params)
    assert problem.startswith(f"the model has {params:,} parameters (model.enc_layers=2, ") and "model.d_model=16" in problem
    assert "training needs at least 0.0 GB (16 bytes a parameter, before activations)" in problem and "make the model smaller" in problem
    monkeypatch.setattr(memory, "host_available", lambda: 16 * params)
    assert memory_problem(cfg, params) is None
    monkeypatch.setattr(memory, "host_available", lambda: None)  # nothing known: nothing refused
    assert memory_problem(cfg, params) is None


def test_a_member_group_needs_its_members_memory_and_is_refused_naming_them(monkeypatch):
    cfg = ExperimentConfig(model=tiny_model(), data=DataConfig(vocab_size=64))
    cfg.train.accelerator = "cpu"
    params = parameter_count(cfg)["total"]
    monkeypatch.setattr(memory, "host_available", lambda: 16 * params * 4)  # room for four runs' training state
    assert memory_problem(cfg, params, members=4) is None
    problem = memory_problem(cfg, params, members=5)
    assert problem.startswith(f"the model has {params:,} parameters (") and f"; 5 members (members.size) hold {5 * params:,}:" in problem
    assert problem.endswith("make the model smaller or train fewer members")


def test_the_host_memory_left_is_the_least_of_the_kernels_the_address_space_limits_and_the_cgroups(monkeypatch):
    monkeypatch.setattr(memory, "_meminfo", lambda: 8 << 30)
    monkeypatch.setattr(memory, "_cgroup", lambda: None)
    monkeypatch.setattr(memory.resource, "getrlimit", lambda kind: (2 << 30, resource.RLIM_INFINITY))
    used = memory._field(memory.Path("/proc/self/status"), "VmSize:")
    assert memory.host_available() == max((2 << 30) - used, 0)
    monkeypatch.setattr(memory.resource, "getrlimit", lambda kind: (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    assert memory.host_available() == 8 << 30


def test_train_refuses_before_anything_is_built_or_written(tmp_path, monkeypatch):
    from ablate.run.train import train

    monkeypatch.setattr(memory, "host_available", lambda: 1000)
    built = []
    monkeypatch.setattr("ablate.run.train.TranslationDataModule", lambda *a: built.append(a))
    cfg = ExperimentConfig(model=tiny_model(), data=DataConfig(vocab_size=64), out_dir=str(tmp_path / "run"))
    cfg.train.accelerator = "cpu"
    with pytest.raises(ValueError, match=r"the model has [\d,]+ parameters .*training needs at least"):
        train(cfg)
    assert not built and not (tmp_path / "run").exists()
