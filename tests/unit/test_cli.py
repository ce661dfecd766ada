"""The `ablate` command line: every subcommand parses, user errors exit 2 with "ablate CMD: error: ..." on stderr,
and `ablate params` prints the parameter table of a config."""

from __future__ import annotations

import logging
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import ablate
from ablate import cli
from ablate.config import ConfigError
from ablate.experiment import load_config
from ablate.model import build_transformer, count_parameters
from ablate.run import flags as run_flags
from ablate.training.checkpoint import CheckpointError

ROOT = Path(__file__).resolve().parents[2]
TINY = {"model": {"enc_layers": 1, "dec_layers": 2, "d_model": 16, "d_ff": 32, "heads": 2}, "data": {"vocab_size": 64}}


@pytest.fixture(autouse=True)
def _restore_ablate_logger():
    """main() sends the "ablate" logger to stderr and stops it propagating; later tests' caplog needs it back."""
    logger = logging.getLogger("ablate")
    handlers, level, propagate = list(logger.handlers), logger.level, logger.propagate
    yield
    logger.handlers[:] = handlers
    logger.setLevel(level)
    logger.propagate = propagate


def subcommands() -> set[str]:
    parser = cli.build_parser()
    [sub] = [a for a in parser._actions if a.dest == "command"]
    return set(sub.choices)


PARSES = {
    "params": (["params", "a.yaml", "model.heads=4"], {"config": ["a.yaml", "model.heads=4"]}),
    "train": (
        ["train", "a.yaml", "b.yaml", "train.max_steps=5", "--resume", "--force"],
        {"config": ["a.yaml", "b.yaml", "train.max_steps=5"], "resume": True, "force": True, "auto_resume": False, "move_aside": False},
    ),
    "sweep": (
        ["sweep", "s.yaml", "--workers", "2", "--dry-run", "--n-trials", "3", "--storage", "sqlite:///x.db"],
        {"file": "s.yaml", "workers": 2, "dry_run": True, "n_trials": 3, "storage": "sqlite:///x.db"},
    ),
    "status": (["status", "runs/sweeps/x", "--study", "x"], {"target": "runs/sweeps/x", "study": "x"}),
    "table": (
        ["table", "runs/study", "--split", "test", "--boot", "10", "--out", "o"],
        {"study": "runs/study", "split": "test", "boot": 10, "out": "o", "name": "table3", "seed": 0, "wandb": False},
    ),
    "archive": (
        ["archive", "runs/sweeps/x", "studies/x", "--split", "test"],
        {"study": "runs/sweeps/x", "dest": "studies/x", "split": "test", "device": "auto"},
    ),
    "translate": (
        ["translate", "m.ckpt", "-i", "in.txt", "-o", "out.txt", "--beam", "1", "--plugins", "p.py", "mod"],
        {
            "checkpoint": "m.ckpt",
            "input": "in.txt",
            "output": "out.txt",
            "beam": 1,
            "alpha": None,
            "batch_tokens": 4000,
            "device": "auto",
            "plugins": ["p.py", "mod"],
        },
    ),
    "evaluate": (
        ["evaluate", "m.ckpt", "--src", "s.en", "--ref", "r.de", "--longer-than", "5", "--alpha", "0.0"],
        {
            "checkpoint": "m.ckpt",
            "src": "s.en",
            "ref": "r.de",
            "longer_than": 5,
            "alpha": 0.0,
            "split": "test",
            "hyp_out": None,
            "plugins": [],
        },
    ),
    "average": (
        ["average", "a.ckpt", "b.ckpt", "-o", "avg.ckpt"],
        {"checkpoints": ["a.ckpt", "b.ckpt"], "output": "avg.ckpt", "last": 5, "run_dir": None, "force": False},
    ),
}


def test_every_subcommand_has_a_parse_case():
    assert subcommands() == set(PARSES)


@pytest.mark.parametrize("command", sorted(PARSES))
def test_subcommand_parses_into_its_handler(command):
    argv, expected = PARSES[command]
    args = cli.build_parser().parse_args(argv)
    assert args.command == command
    owner = {"params": "run", "train": "run", "sweep": "sweep", "status": "sweep", "table": "table", "archive": "archive",
             "translate": "inference", "evaluate": "inference", "average": "training"}[command]  # fmt: skip
    assert args.func.__module__ == f"ablate.{owner}.flags" and args.func.__name__ == f"run_{command}"  # its package's
    assert {k: getattr(args, k) for k in expected} == expected


def test_defaults_of_decoding_and_training_flags():
    args = cli.build_parser().parse_args(["translate", "m.ckpt"])
    assert (args.input, args.output, args.beam, args.plugins) == ("-", "-", None, [])
    args = cli.build_parser().parse_args(["train", "a.yaml"])
    assert args.config == ["a.yaml"] and not (args.resume or args.auto_resume or args.force or args.move_aside)
    args = cli.build_parser().parse_args(["evaluate", "m.ckpt", "--plugins", "a.py", "--plugins", "b.py"])
    assert args.plugins == ["a.py", "b.py"]  # repeated --plugins add up


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["nope"],
        ["average", "a.ckpt"],
        ["table", "s", "--split", "train"],
        ["sweep"],
        ["translate"],
        ["evaluate", "m.ckpt", "--beam", "two"],
    ],
    ids=["no-command", "unknown", "average-no-output", "bad-split", "sweep-no-file", "translate-no-ckpt", "non-int-beam"],
)
def test_bad_command_lines_are_usage_errors(argv, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    assert e.value.code == 2
    assert "usage: ablate" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["translate", "m.ckpt", "--beam", "0"], "argument --beam: 0 must be an integer >= 1"),
        (["evaluate", "m.ckpt", "--alpha", "nan"], "argument --alpha: nan must be a number >= 0"),
        (["evaluate", "m.ckpt", "--longer-than", "-1"], "argument --longer-than: -1 must be an integer >= 0"),
        (["evaluate", "m.ckpt", "--batch-tokens", "1e308"], "argument --batch-tokens: '1e308' is not an integer"),
        (["average", "a.ckpt", "-o", "b.ckpt", "--last", "0"], "argument --last: 0 must be an integer >= 1"),
        (["sweep", "s.yaml", "--workers", "100000"], "argument --workers: 100000 must be an integer from 1 to 1024"),
        (["table", "s", "--seed", "4294967296"], "argument --seed: 4294967296 must be an integer from 0 to 4294967295"),
        (["table", "s", "--target-mde", "inf"], "argument --target-mde: inf must be a number >= 0"),
        (["table", "s", "--boot", "1000000000000"], "argument --boot: 1000000000000 must be an integer from 1 to 1000000"),
    ],
    ids=lambda v: v[2] if isinstance(v, list) else None,
)
def test_numeric_flags_out_of_range_are_usage_errors_naming_the_flag(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    assert e.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize(
    "error",
    [ConfigError("bad key"), ValueError("bad key"), FileNotFoundError("bad key"), CheckpointError("bad key")],
    ids=lambda e: type(e).__name__,
)
def test_user_errors_exit_2_with_the_command_named_on_stderr(error, monkeypatch, capsys):
    def fail(args):
        raise error

    monkeypatch.setattr(run_flags, "run_params", fail)
    assert cli.main(["params"]) == 2
    out, err = capsys.readouterr()
    assert err.startswith("ablate params: error: ") and "bad key" in err and out == ""


def test_other_exceptions_are_not_swallowed(monkeypatch):
    def fail(args):
        raise RuntimeError("a bug")

    monkeypatch.setattr(run_flags, "run_params", fail)
    with pytest.raises(RuntimeError, match="a bug"):
        cli.main(["params"])


def test_real_user_errors_of_each_kind_exit_2(tmp_path, capsys):
    assert cli.main(["params", "model.nope=1"]) == 2
    assert "ablate params: error:" in capsys.readouterr().err
    assert cli.main(["params", str(tmp_path / "missing.yaml")]) == 2
    assert "missing.yaml" in capsys.readouterr().err
    assert cli.main(["params", "model.d_model=30", "model.heads=4"]) == 2  # validation: not divisible
    assert "model.d_model" in capsys.readouterr().err
    assert cli.main(["average", "-o", str(tmp_path / "avg.ckpt")]) == 2
    assert capsys.readouterr().err.startswith("ablate average: error: nothing to average")
    assert cli.main(["evaluate", str(tmp_path / "m.ckpt"), "--src", "s.en"]) == 2  # --src without --ref
    assert capsys.readouterr().err.startswith("ablate evaluate: error: --src and --ref go together")
    assert cli.main(["translate", str(tmp_path / "m.ckpt")]) == 2
    assert f"checkpoint not found: {tmp_path / 'm.ckpt'}" in capsys.readouterr().err


def test_params_prints_the_parameter_table_of_a_config(tmp_path, capsys):
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY))
    assert cli.main(["params", str(path), "model.d_ff=48"]) == 0
    out = capsys.readouterr().out
    cfg = load_config([path], ["model.d_ff=48"])
    counts = count_parameters(build_transformer(cfg.model, 64))
    assert "parameters (shared vocabulary 64)" in " ".join(out.split())  # the title may wrap
    cells = [[c.strip() for c in line.strip("│ ").split("│")] for line in out.splitlines() if line.startswith("│")]
    rows = {c[0]: c[1:] for c in cells}
    assert set(rows) == {"embeddings", "encoder", "decoder", "total"}
    for part, (count, millions) in rows.items():
        assert count == f"{counts[part]:,}" and millions == f"{counts[part] / 1e6:.2f}"
    assert counts["decoder"] > counts["encoder"] > 0  # two decoder layers with cross-attention, one encoder layer


def test_a_mistyped_flag_is_refused_by_its_command_with_the_flag_or_override_it_meant(capsys):
    """`ablate sweep FILE --dry_run` got ablate's top-level usage and no hint; `--out_dir x` no word that config keys
    are overrides."""
    with pytest.raises(SystemExit) as e:
        cli.main(["sweep", "s.yaml", "--dry_run"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "usage: ablate sweep" in err and "--dry_run (did you mean '--dry-run'?)" in err
    with pytest.raises(SystemExit):
        cli.main(["train", "a.yaml", "--out_dir", "runs/x"])
    err = capsys.readouterr().err
    assert "usage: ablate train" in err
    assert "unrecognized arguments: --out_dir (config keys are overrides, written KEY=VALUE: out_dir=...)\n" in err


def test_a_mistyped_command_is_refused_with_the_command_it_meant(capsys):
    """argparse listed the choices but guessed none, as ablate does for a flag or a config key."""
    with pytest.raises(SystemExit) as e:
        cli.main(["trian", "a.yaml", "model.heads=2"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "usage: ablate" in err
    assert "ablate: error: unknown command 'trian' (did you mean 'train'?); the commands: params, train, sweep," in err


def test_each_unknown_flag_is_named_once_with_its_hint_beside_it(capsys):
    """`--resme` was "unrecognized arguments: --resme; --resme (did you mean '--resume'?)"."""
    with pytest.raises(SystemExit):
        cli.main(["train", "a.yaml", "--resme"])
    assert "ablate train: error: unrecognized arguments: --resme (did you mean '--resume'?)\n" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["train", "a.yaml", "--resme", "--zzz", "--forse=1"])
    err = capsys.readouterr().err
    assert "unrecognized arguments: --resme (did you mean '--resume'?) --zzz --forse=1 (did you mean '--force'?)\n" in err


def test_overrides_after_a_flag_are_the_configs_in_their_order():
    """`ablate train FILE --members 2 train.max_steps=30` was "unrecognized arguments: train.max_steps=30": argparse's
    positional list ends at the first flag. Hydra and Lightning's CLI take overrides anywhere; so does ablate."""
    args = cli._parse(["train", "a.yaml", "out_dir=runs/lr", "--members", "2", "train.max_steps=30", "--resume", "seed=3"])
    assert args.config == ["a.yaml", "out_dir=runs/lr", "train.max_steps=30", "seed=3"] and args.members == 2 and args.resume
    assert cli._parse(["train", "a.yaml", "--resume", "--", "out_dir=x"]).config == ["a.yaml", "out_dir=x"]


def test_train_without_a_config_is_refused_not_trained_on_the_schemas_defaults(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["train"])
    assert e.value.code == 2 and "the following arguments are required: config" in capsys.readouterr().err


def test_version_and_each_commands_help_with_its_summary_and_an_example(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--version"])
    assert capsys.readouterr().out.strip() == f"ablate {ablate.__version__}"
    for command in sorted(subcommands()):
        with pytest.raises(SystemExit):
            cli.main([command, "--help"])
        out = capsys.readouterr().out
        assert f"example: {cli.EXAMPLES[command]}" in out and out.split("\n\n")[1].strip(), command
        assert cli.build_parser().parse_args(shlex.split(cli.EXAMPLES[command].split("| ")[-1])[1:]).command == command


def test_evaluate_refuses_a_record_it_could_not_write_before_decoding(tmp_path, capsys):
    """--save-eval into a run whose eval/ is a file failed only after the whole split was decoded."""
    (tmp_path / "run" / "checkpoints").mkdir(parents=True)
    (tmp_path / "run" / "eval").write_text("not a folder")
    ckpt = tmp_path / "run" / "checkpoints" / "best.ckpt"  # never read: the refusal comes first
    assert cli.main(["evaluate", str(ckpt), "--split", "test", "--save-eval"]) == 2
    assert f"--save-eval: {tmp_path / 'run' / 'eval'} is a file, not a folder; nothing was written" in capsys.readouterr().err


def test_translate_from_stdin_never_writes_over_the_file_stdin_reads(tmp_path, capsys, monkeypatch):
    mine = tmp_path / "mine.en"
    mine.write_text("a line\n")
    with open(mine) as f:
        monkeypatch.setattr("sys.stdin", f)
        fd = os.dup(0)
        os.dup2(f.fileno(), 0)  # `-i - < mine.en`
        try:
            assert cli.main(["translate", str(tmp_path / "x.ckpt"), "-i", "-", "-o", str(mine), "--force"]) == 2
        finally:
            os.dup2(fd, 0)
            os.close(fd)
    assert f"--output {mine} is the input --input /dev/stdin" in capsys.readouterr().err and mine.read_text() == "a line\n"


def test_evaluate_save_eval_of_a_checkpoint_outside_a_run_is_refused_before_decoding(tmp_path, capsys):
    ckpt = tmp_path / "copy.ckpt"  # never read: the refusal comes first (it came after the whole split was decoded)
    assert cli.main(["evaluate", str(ckpt), "--split", "test", "--save-eval"]) == 2
    assert f"--save-eval: {ckpt} is not in a run directory's checkpoints/ folder" in capsys.readouterr().err


def test_evaluate_save_eval_writes_over_the_runs_record_only_with_force(tmp_path, capsys):
    """--save-eval replaced RUN/eval/SPLIT.json without asking: a step checkpoint's record over the run's own (made
    from its reported weights), which `ablate table --split` then scored the run by."""
    (tmp_path / "run" / "checkpoints").mkdir(parents=True)
    record = tmp_path / "run" / "eval" / "valid.json"
    record.parent.mkdir()
    record.write_text('{"checkpoint": "final weights", "split": "valid"}\n')
    ckpt = tmp_path / "run" / "checkpoints" / "step=10.ckpt"  # never read: the refusal comes first
    assert cli.main(["evaluate", str(ckpt), "--split", "valid", "--save-eval"]) == 2
    err = capsys.readouterr().err
    assert (
        f"--save-eval {record} already exists; pass --force to write over it, or leave out --save-eval to keep it (made from final weights)"
        in err
    )
    assert record.read_text() == '{"checkpoint": "final weights", "split": "valid"}\n'
    assert cli.main(["evaluate", str(ckpt), "--split", "valid", "--save-eval", "--force"]) == 2
    assert "already exists" not in capsys.readouterr().err  # past the refusal: here, no checkpoint to load


@pytest.mark.parametrize(
    "argv",
    [
        ["status", "studies/table3-small"],
        pytest.param(["params"], marks=pytest.mark.slow),  # imports torch: seconds; the default set stays under a minute
        pytest.param(["sweep", "sweeps/quickstart.yaml", "--dry-run"], marks=pytest.mark.slow),
    ],
    ids=["status", "params", "sweep"],
)
def test_a_reader_that_stops_early_ends_every_command_quietly_with_141(argv, tmp_path):
    """`ablate status STUDY | head -1` printed "error: [Errno 32] Broken pipe" and exited 2; rich's tables (`params`,
    `sweep --dry-run`) exited 1. A real pipe whose reader has gone, as `| head` leaves it."""
    read, write = os.pipe()
    os.close(read)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "ABLATE_CACHE": str(tmp_path / "cache")}
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "ablate.cli", *argv], cwd=ROOT, stdout=write, stderr=subprocess.PIPE, env=env, timeout=120
        )
    finally:
        os.close(write)
    assert proc.returncode == 141 and proc.stderr == b"", proc.stderr.decode()[-2000:]


def test_a_broken_pipe_that_is_not_stdouts_is_an_error(monkeypatch, capsys):
    def fail(args):
        raise BrokenPipeError(32, "Broken pipe")  # a worker's pipe, say: stdout is fine

    monkeypatch.setattr(run_flags, "run_params", fail)
    assert cli.main(["params"]) == 2
    assert "ablate params: error: [Errno 32] Broken pipe" in capsys.readouterr().err


def test_an_error_printed_or_left_uncaught_by_main_has_its_secrets_masked(monkeypatch, capsys):
    """`error: {e}` printed the message as it is, and an exception main does not word went to Python's traceback as it
    is: a storage URL in either kept its password."""
    url = "postgresql://alice:Sup3rSecretPw@db.example/x"

    def fail(args):
        raise ValueError(f"cannot use {url}")

    monkeypatch.setattr(run_flags, "run_params", fail)
    assert cli.main(["params"]) == 2
    assert capsys.readouterr().err == "ablate params: error: cannot use postgresql://alice:***@db.example/x\n"

    def crash(args):
        raise RuntimeError(f"driver failed on {url}")

    monkeypatch.setattr(run_flags, "run_params", crash)
    with pytest.raises(RuntimeError) as e:
        cli.main(["params"])
    sys.excepthook(e.type, e.value, e.tb)  # what Python calls with it, once main raised it to the top
    err = capsys.readouterr().err
    assert "Traceback" in err and err.endswith("RuntimeError: driver failed on postgresql://alice:***@db.example/x\n")
    assert "Sup3r" not in err


def test_a_plugin_failing_at_the_first_step_names_its_line_and_leaves_no_run_folder(tmp_path, capsys, monkeypatch):
    """A kernel's wrong unpacking was `ablate train: error: too many values to unpack (expected 3)`, exit 2 as for a
    bad config, naming no file; and the folder it left (config.yaml, no checkpoint) refused the corrected command."""
    from helpers import run_cli, write_experiment

    from ablate import plugins
    from ablate.registry import restoring

    monkeypatch.setattr(plugins, "_imported", {})
    monkeypatch.setattr(plugins, "_hashes", {})
    plugin = tmp_path / "bad.py"
    plugin.write_text(
        "from ablate.model.attention import ATTENTION, AttentionKernel\nfrom ablate.registry import register\n\n\n"
        '@register(ATTENTION, "cli_unpack")\nclass Unpack(AttentionKernel):\n'
        "    def __init__(self, *, heads, d_k, dropout=0.0):\n        super().__init__()\n\n"
        "    def forward(self, q, k, v, mask, scale):\n        b, h, t = q.shape\n        return v\n"
    )
    path = write_experiment(tmp_path, plugins=[plugin])
    with restoring(*plugins._registries()):
        rc, out = run_cli(capsys, "train", str(path), "model.attention=cli_unpack")
    assert rc == 1, out
    assert (
        f"ablate train: error: a plugin raised ValueError: too many values to unpack (expected 3)\n  at {plugin}, line 11, in forward: b, h, t = q.shape"
        in out
    )
    assert not (tmp_path / "run").exists()
