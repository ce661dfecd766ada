"""Sweep files are validated on load (naming the row and key), plan the right trials, and keep names inside out_dir."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sweep_files import ROOT, VARIANTS, write

from ablate.cli import main
from ablate.config import ConfigError
from ablate.config.paper import row_group
from ablate.sweep.load import load_sweep
from ablate.sweep.plan import plan_for
from ablate.sweep.spec import diff_from_base, nest, safe_name


def test_variants_expand_to_rows_times_seeds_with_their_differences(tmp_path):
    sweep = load_sweep(write(tmp_path, VARIANTS + f"out_dir: {tmp_path}/out\n"))
    assert type(plan_for(sweep)).__name__ == "Variants" and sweep.name == "demo"
    assert sweep.rows() == [("base", 1), ("base", 2), ("A-h1", 1), ("A-h1", 2), ("E-learned", 1), ("E-learned", 2)]
    cfg = sweep.config_for(sweep.variants["A-h1"], seed=2)
    assert (cfg.model.heads, cfg.model.d_k, cfg.model.d_model, cfg.seed) == (1, 64, 64, 2)
    assert diff_from_base(sweep, cfg) == {"model.heads": (4, 1), "model.d_k": (None, 64), "model.d_v": (None, 64), "seed": (1, 2)}
    assert diff_from_base(sweep, sweep.config_for({})) == {}


def test_row_seeds_give_a_row_seeds_of_its_own(tmp_path):
    sweep = load_sweep(write(tmp_path, VARIANTS + "row_seeds: {base: [1, 2, 3], E-learned: [7]}\n"))
    assert sweep.rows() == [("base", 1), ("base", 2), ("base", 3), ("A-h1", 1), ("A-h1", 2), ("E-learned", 7)]


@pytest.mark.parametrize(
    "body, named",
    [
        ("variants:\n  A-h1: {model.haeds: 1}\n", ["A-h1", "model.haeds", "model.heads"]),  # typo in a row: row, key, suggestion
        ("variants:\n  bad: {model.heads: 3}\n", ["bad", "heads"]),  # d_model 64 not divisible by 3 heads
        ("variants:\n  bad: {model.attention: nope}\n", ["bad", "nope", "scaled_dot_product"]),
        ("variants:\n  base: {}\nseedz: [1]\n", ["seedz", "seeds"]),  # unknown top-level key
        (
            "variants:\n  base: {}\noverrides: {train.val_bleu: false, train.eval_record: false}\n",
            ["val/bleu", "train.val_bleu and train.eval_record are both false"],
        ),
        ("variants:\n  base: {}\nrow_seeds: {bsae: [1]}\n", ["row_seeds", "bsae", "base"]),
        ("variants:\n  base: {}\nrow_seeds: {base: [1, one]}\n", ["row_seeds.'base'", "integers"]),
        ("variants:\n  base: {}\nseeds: [1, 1]\n", ["seeds", "twice"]),
        ("variants:\n  base: {}\nsearch:\n  model.heads: {type: categorical, choices: [2]}\n", ["exactly one"]),
        ("search:\n  model.heads: {type: categorical, choices: [2, 4]}\n", ["n_trials or timeout"]),
        ("search:\n  train.lr_scale: {type: float, low: 2, high: 1}\nn_trials: 2\n", ["train.lr_scale", "low < high"]),
        ("search:\n  train.lr_scale: {type: float, low: 0, high: 1, log: true}\nn_trials: 2\n", ["log", "> 0"]),
        ("search:\n  model.nope: {type: int, low: 1, high: 2}\nn_trials: 2\n", ["model.nope"]),
        ("search:\n  x: {type: uniform, low: 1, high: 2}\nn_trials: 2\n", ["'x'", "categorical"]),
        ("variants:\n  base: {}\nsampler: annealing\n", ["sampler.name", "annealing", "tpe"]),
        ("variants:\n  base: {}\npruner: {name: medain}\n", ["pruner.name", "medain", "median"]),
        ("variants:\n  base: {}\nobjective: {metric: val/bleu, direction: up}\n", ["direction", "up"]),
        ("variants:\n  base: {}\nobjective: {terms: {val/bleu: 1, speed/tok_s: 0.01}}\n", ["'speed/tok_s'", "speed/tokens_per_s"]),
        ("variants:\n  base: {}\nobjective: {metric: bleu}\n", ["no run reports a metric 'bleu'"]),
        ("variants:\n  base: {}\nobjective: {metric: [a]}\n", ["objective.metric must be one metric name", "['a']"]),
        ("variants:\n  base: {}\nobjective: {metric: {a: 1}}\n", ["objective.metric must be one metric name"]),
        ("variants:\n  base: !!python/object/apply:os.system ['echo owned']\n", ["safe", "YAML"]),
        ("variants:\n  base: {}\nmembers: 0\n", ["members=0", ">= 1"]),
        ("variants:\n  base: {}\nmember_data: mixed\n", ["member_data", "mixed", "shared"]),
        ("variants:\n  base: {}\n  t: {logging.tags: quickstart}\n", ["variant 't'", "'quickstart' is not a list (write [quickstart])"]),
    ],
)
def test_broken_sweep_files_fail_before_any_trial_naming_what_is_wrong(tmp_path, body, named):
    path = write(tmp_path, f"name: demo\nbase: base.yaml\n{body}")
    with pytest.raises(ConfigError) as err:
        load_sweep(path)
    msg = str(err.value)
    assert str(path) in msg
    for word in named:
        assert word in msg, (word, msg)


def test_missing_sweep_file_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="sweep file not found: .*nope.yaml"):
        load_sweep(tmp_path / "nope.yaml")


def test_dry_run_prints_trials_and_differences_and_starts_nothing(tmp_path, capsys):
    path = write(tmp_path, VARIANTS + f"out_dir: {tmp_path}/out\n")
    assert main(["sweep", str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert (
        f"6 trials, into {tmp_path}/out/\n" in out
        and "A-h1" in out
        and "model.heads: 4 -> 1" in out
        and "model.positional: sinusoidal -> learned" in out
    )
    assert not (tmp_path / "out").exists() and "no row is named 'base'" not in out
    path = write(tmp_path, "name: demo\nbase: base.yaml\nvariants:\n  ref: {}\n  A: {model.heads: 2}\n")
    assert main(["sweep", str(path), "--dry-run"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "note: no row is named 'base' (ref, A): `ablate table` compares every row with the base row" in out


def test_cli_reports_a_broken_sweep_with_exit_code_2(tmp_path, capsys):
    path = write(tmp_path, "name: demo\nbase: base.yaml\nvariants:\n  A: {model.heads: 0}\n")
    assert main(["sweep", str(path)]) == 2
    assert "variant 'A'" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["../../etc/passwd", "/abs/path", "..", "a/../../b", "row with spaces", "", "x" * 300])
def test_safe_name_cannot_leave_its_directory(tmp_path, name):
    cleaned = safe_name(name)
    assert cleaned and "/" not in cleaned and not cleaned.startswith(".") and len(cleaned) <= 80
    assert (tmp_path / cleaned).resolve().parent == tmp_path.resolve()


def test_a_trial_or_group_folder_already_holding_files_is_not_trained_into(tmp_path):
    """A study restored from an older copy numbers its new trials as the lost ones were: every one of them failed with
    "out_dir already holds a run" (the lost trials' folders, their only record, are kept)."""
    sweep = load_sweep(write(tmp_path, f"name: demo\nbase: base.yaml\nvariants:\n  A: {{}}\nout_dir: {tmp_path}/out\n"))
    first = sweep.trial_dir(0, "A")
    assert first.name == "0000-A" and sweep.trial_dir(0, "A") == first
    first.mkdir(parents=True)
    assert sweep.trial_dir(0, "A") == first  # made, still empty: its own trial writes into it next
    (first / "config.yaml").write_text("x")
    assert sweep.trial_dir(0, "A").name == "0000-A-2"
    (sweep.trial_dir(0, "A") / "summary.json").parent.mkdir()
    (tmp_path / "out" / "trials" / "0000-A-2" / "summary.json").write_text("{}")
    assert sweep.trial_dir(0, "A").name == "0000-A-3"
    group = sweep.group_dir(4, "A")
    group.mkdir(parents=True)
    (group / "train.log").write_text("")
    assert sweep.group_dir(4, "A").name == "0004-A-2"


def test_a_section_given_whole_merges_with_dotted_keys_and_is_never_written_into(tmp_path):
    """Front-door review: nest() stored the sweep's own `train: {...}` and wrote a row's train.warmup into it, so every
    later trial in the worker trained with that warmup; and a row's `model: {d_ff: 64}` replaced the sweep's
    model.heads, so the trial trained what --dry-run did not show."""
    shared = {"train": {"max_steps": 20}}
    assert nest({**shared, "train.warmup": 10}) == {"train": {"max_steps": 20, "warmup": 10}}
    assert shared == {"train": {"max_steps": 20}}
    assert nest({"model.heads": 2, "model": {"d_ff": 64}, "train.max_steps": 20, "train": {"warmup": 10}}) == {
        "model": {"heads": 2, "d_ff": 64},
        "train": {"max_steps": 20, "warmup": 10},
    }
    assert nest({"model": {"heads": 2}, "model.heads": 4}) == {"model": {"heads": 4}}  # a later key wins
    assert nest({"model": {"d_model": 32, "heads": 2}}, {"model": {"d_ff": 128}}) == {"model": {"d_model": 32, "heads": 2, "d_ff": 128}}
    text = "name: n\nbase: base.yaml\noverrides: {train: {max_steps: 20}, model.heads: 2}\n"
    sweep = load_sweep(
        write(tmp_path, text + "variants: {w10: {train.warmup: 10}, x: {model: {d_ff: 64}}, after: {}, t: {train: {warmup: 5}}}\n")
    )
    assert (sweep.config_for(sweep.variants["t"]).train.max_steps, sweep.config_for(sweep.variants["t"]).train.warmup) == (20, 5)
    for row in ("w10", "x", "after"):  # each as --dry-run describes it, in one worker, in this order
        assert sweep.config_for(sweep.variants[row]) == sweep.row_config(sweep.variants[row]), row
    after = sweep.config_for(sweep.variants["after"])
    assert (after.train.warmup, after.train.max_steps, after.model.heads) == (sweep.config_for({}).train.warmup, 20, 2)


def test_nest_and_row_group():
    assert nest({"model.heads": 4, "model.d_k": 8, "seed": 1}) == {"model": {"heads": 4, "d_k": 8}, "seed": 1}
    assert (row_group("A-h1"), row_group("base"), row_group("big")) == ("A", "base", "big")
    assert (row_group("base-2x"), row_group("attn-additive")) == ("base-variants", "attn")  # a control is not the base


@pytest.mark.slow  # every row of every shipped sweep file loaded: seconds; the default set stays under a minute
def test_shipped_sweep_files_pass_validation(monkeypatch):
    monkeypatch.chdir(ROOT)
    files = sorted((ROOT / "sweeps").glob("*.yaml"))
    assert files
    for path in files:
        load_sweep(path)


def test_a_row_naming_an_unregistered_variant_is_told_how_a_sweep_names_its_plugins(tmp_path):
    """A sweep file takes no `plugins=[FILE]` on its command line: the hint said a run's way of naming one."""
    path = write(tmp_path, "name: p\nbase: base.yaml\nvariants:\n  base: {}\n  odd: {model.positional: nosuch}\n")
    with pytest.raises(ConfigError) as err:
        load_sweep(path)
    assert "variant 'odd'" in str(err.value) and "plugins=[FILE] on the command line" not in str(err.value)
    assert (
        "name the file so it is imported: `overrides: {plugins: [FILE]}` in the sweep file, or `plugins: [FILE]` in its base config)"
        in str(err.value)
    )


def test_plugin_files_in_the_sweep_overrides_are_relative_to_the_sweep_file(tmp_path, monkeypatch):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "mine.py").write_text("MARK = 1\n")
    path = write(tmp_path, "name: p\nbase: base.yaml\noverrides: {plugins: [sub/mine.py]}\nvariants: {base: {}}\n")
    monkeypatch.chdir("/")  # not where the sweep file is
    sweep = load_sweep(path)
    assert sweep.overrides["plugins"] == [str(tmp_path / "sub" / "mine.py")]
    assert sweep.config_for({}).plugins == [str(tmp_path / "sub" / "mine.py")]


def test_plugin_files_in_a_row_are_relative_to_the_sweep_file_too(tmp_path, monkeypatch):
    """A row's own `plugins:` was resolved against the cwd: the sweep file loaded from its own folder only."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "mine.py").write_text("MARK = 1\n")
    body = "name: p\nbase: base.yaml\nvariants: {base: {}, own: {plugins: [sub/mine.py], model.heads: 1}, odd: {plugins: 3}}\n"
    path = write(tmp_path, body)
    monkeypatch.chdir("/")  # not where the sweep file is
    sweep = load_sweep(path, to_run=False)
    assert sweep.variants["own"] == {"plugins": [str(tmp_path / "sub" / "mine.py")], "model.heads": 1}
    assert sweep.variants["odd"] == {"plugins": 3}  # not a list of files: told by the row's own check
    with pytest.raises(ConfigError, match="variant 'odd'"):
        load_sweep(path)
    assert load_sweep(write(tmp_path, body.replace("plugins: 3", "plugins: null")), to_run=False).variants["odd"] == {"plugins": []}


def _count_compositions(monkeypatch) -> dict[str, int]:
    """Counts full compositions (ablate.experiment.compose, which load_config calls) and rows set on the base."""
    import ablate.experiment
    import ablate.sweep.spec

    counts = {"full": 0, "leaves": 0}

    def counted(kind, real):
        def wrapper(*args, **kwargs):
            counts[kind] += 1
            return real(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(ablate.experiment, "compose", counted("full", ablate.experiment.compose))
    monkeypatch.setattr(ablate.sweep.spec, "with_leaves", counted("leaves", ablate.sweep.spec.with_leaves))
    return counts


@pytest.mark.parametrize("seeds", ["seeds: [1]\n", "seeds: [1, 2, 3, 4, 5]\n", "row_seeds: {r0: [1, 2, 3, 4, 5]}\n"])
def test_loading_and_dry_running_compose_each_row_once_never_per_seed(tmp_path, capsys, monkeypatch, seeds):
    """Issue 38 item 9: a sweep file's rows are composed once each (the base in full, every row on it), through
    validation, the basis check and the dry run's table, however many seeds a row has."""
    rows = "".join(f"  r{i}: {{train.lr_scale: {0.5 + i / 100}, model.d_ff: {64 * (1 + i % 3)}}}\n" for i in range(40))
    path = write(tmp_path, f"name: demo\nbase: base.yaml\nbasis: {{stop: steps, weights: final}}\n{seeds}variants:\n  base: {{}}\n{rows}")
    counts = _count_compositions(monkeypatch)
    assert main(["sweep", str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    trials = 41 * 5 if "seeds: [1, 2, 3, 4, 5]" in seeds else 41 + 4 if "row_seeds" in seeds else 41
    assert f"{trials} trials" in out and "model.d_ff: 128 -> 192, train.lr_scale: 1.0 -> 0.52" in out
    assert counts == {"full": 1, "leaves": 40}, counts


def test_a_row_set_on_the_base_equals_the_row_composed_in_full(tmp_path):
    """What loading reads (row_config) is what a trial trains (config_for), seed included."""
    sweep = load_sweep(write(tmp_path, VARIANTS + "overrides: {train.max_steps: 7, logging.tags: [x]}\n"))
    for row, seed in sweep.rows():
        assert replace(sweep.row_config(sweep.variants[row]), seed=seed) == sweep.config_for(sweep.variants[row], seed)


def test_a_row_the_base_cannot_take_leaf_by_leaf_is_composed_in_full_and_named_when_wrong(tmp_path):
    path = write(
        tmp_path, "name: demo\nbase: base.yaml\nvariants:\n  base: {}\n  tags: {logging.tags: [a, b]}\n  bad: {model.heads: four}\n"
    )
    with pytest.raises(ConfigError, match=r"variant 'bad': .*model.heads"):
        load_sweep(path)
    path.write_text(path.read_text().replace("  bad: {model.heads: four}\n", ""))
    assert load_sweep(path).row_config({"logging.tags": ["a", "b"]}).logging.tags == ["a", "b"]


def test_members_set_how_many_trials_of_a_row_train_as_one_model(tmp_path):
    path = write(
        tmp_path,
        "name: demo\nbase: base.yaml\nvariants:\n  base: {}\n  big: {members.size: 1}\nseeds: [1, 2, 3]\nmembers: 3\nmember_data: shared\n",
    )
    sweep = load_sweep(path)
    assert sweep.row_config({}).members.size == 3 and sweep.row_config({}).members.data == "shared"
    assert sweep.row_config(sweep.variants["big"]).members.size == 1  # a row sets its own
    sweep.set_members(2)  # `members: auto` resolved to 2: the study-wide size; a row's own stays
    assert sweep.row_config({}).members.size == 2 and sweep.row_config(sweep.variants["big"]).members.size == 1
    sweep.set_members(2, force=True)  # `ablate sweep --members 2`, which overrides the file's members: every row's too
    assert sweep.row_config({}).members.size == 2 and sweep.row_config(sweep.variants["big"]).members.size == 2
    assert sweep.config_for(sweep.variants["big"], seed=1).members.size == 2  # as a trial's worker composes it
    search = write(
        tmp_path,
        "name: s\nbase: base.yaml\nsearch:\n  train.lr_scale: {type: float, low: 0.5, high: 2}\n  seed: {type: int, low: 1, high: 9}\nn_trials: 4\nmembers: 2\n",
    )
    assert load_sweep(search).row_config({}).members.size == 2  # member-able keys only: accepted


def test_an_objective_no_run_can_log_is_refused_and_a_plugins_near_miss_doubted(tmp_path, caplog):
    """`val/blue` trained every trial to its end, which then failed on it, after a warning: with no plugin named no
    callback can log a val/* metric of its own, so it is refused at load. With a plugin, a near miss of ablate's own
    is said, not refused, and a plugin's own name far from them (`val/grad_norm`) loads without a word."""
    (tmp_path / "p.py").write_text("")
    for metric, doubted in (("val/blue", True), ("val/grad_norm", False), ("val/bleu", False)):
        text = f"name: d\nbase: base.yaml\nvariants: {{base: {{}}}}\nobjective: {{metric: {metric}}}\n"
        if metric != "val/bleu":
            with pytest.raises(ConfigError) as err:
                load_sweep(write(tmp_path, text))
            assert f"no run reports a metric '{metric}'" in str(err.value) and "no plugin is named" in str(err.value)
            assert ("did you mean 'val/bleu'" in str(err.value)) is doubted
        caplog.clear()
        sweep = load_sweep(write(tmp_path, text + "overrides: {plugins: [p.py]}\n"))
        assert sweep.objective.terms == {metric: 1.0}
        assert ("did you mean 'val/bleu'" in caplog.text and "plugin's callback" in caplog.text) is doubted, caplog.text


def test_an_objective_a_plugin_installed_as_a_package_may_log_is_not_refused(tmp_path, monkeypatch):
    """A package registering through the ablate.plugins entry points loads in every run unnamed: its callback's
    val/my_metric was refused as unloggable."""
    from ablate import plugins

    text = "name: d\nbase: base.yaml\nvariants: {base: {}}\nobjective: {metric: val/my_metric}\n"
    monkeypatch.setattr(plugins, "installed", lambda: True)
    assert load_sweep(write(tmp_path, text)).objective.terms == {"val/my_metric": 1.0}
    monkeypatch.setattr(plugins, "installed", lambda: False)
    with pytest.raises(ConfigError, match="no plugin is named .* or installed"):
        load_sweep(write(tmp_path, text))


def test_a_dry_run_names_the_storage_a_file_gives_with_its_password_masked(tmp_path, capsys):
    path = write(tmp_path, VARIANTS + f"out_dir: {tmp_path}/out\nstorage: postgresql://ablate:Pw9secret@127.0.0.1:1/db\n")
    assert main(["sweep", str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"6 trials, into {tmp_path}/out/, the study in postgresql://ablate:***@127.0.0.1:1/db\n" in out and "Pw9secret" not in out
