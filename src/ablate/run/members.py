"""`ablate train` with `members.size` K > 1: K runs of one config trained as one model (docs/members.md).

The group's directory (the config's out_dir) holds its own checkpoint (checkpoints/last.ckpt: every member's weights,
Adam state and stop rules, the data position and RNG states, which `--resume` continues exactly), metrics.csv of the
group's means and speed, and progress.json. Each member is an ordinary run in a folder of its own inside it
(ablate.config.members names them): config.yaml, metrics.csv, checkpoints, eval/valid.json, summary.json, W&B run;
what `evaluate`, `translate`, `average`, `table` and `archive` read of any run. A member that diverged writes
FAILED.txt with the reason instead of a summary, as an ordinary run that diverged raises and writes none.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import lightning as L
import torch

from ablate.config import ExperimentConfig, to_yaml
from ablate.data.member_data import MemberDataModule
from ablate.data.module import available_splits
from ablate.evaluation.records import FINAL
from ablate.files import signals
from ablate.files.atomic import write_file
from ablate.model.build import member_problem
from ablate.run.callbacks import Preemption, disk_full_advice, run_end
from ablate.run.evaluation import select_weights
from ablate.run.exits import FAILED_FILE, stopped_by_signal
from ablate.run.fingerprint import record_fingerprint
from ablate.run.loggers import make_csv_logger
from ablate.run.member_progress import MemberProgress
from ablate.run.member_resume import check_same_members, prepare_group_resume
from ablate.run.member_runs import GroupCheckpoint, MemberRuns
from ablate.run.member_stops import DIVERGED
from ablate.run.memory import check_fits
from ablate.run.provenance import run_provenance
from ablate.run.results import complete_summary, publish
from ablate.run.resume_checks import set_aside_results
from ablate.run.run_lock import RUN_LOCK, lock_run_dir, unlock_run_dir
from ablate.run.rundir import check_disk_space, claim_out_dir, empty_or_absent, remove_if_untouched
from ablate.run.stopping import StopRules, convergence_report
from ablate.run.train import epochs_trained
from ablate.run.trainer import fit_or_exit, judge_trainer, make_group_trainer, prepare_process
from ablate.training.flops import train_flops
from ablate.training.member_module import MemberModule
from ablate.training.metrics import SpeedCallback
from ablate.training.module import TranslationModule

log = logging.getLogger(__name__)
SHARED = ("tokens_per_s", "model_tflops", "mfu")  # speed keys a member reports its 1/K share of
GROUP_ONLY = ("peak_mem_mb",)  # no member has a peak of its own: the group's is under members.speed only


def train_members(
    cfg: ExperimentConfig,
    configs: list[ExperimentConfig],
    resume: bool = False,
    aside: bool = False,
    member_callbacks: Sequence[Callable[[MemberRuns], L.Callback]] = (),
    force: bool = False,
    accept_data_change: bool = False,
) -> list[dict | None]:
    """Train the group `cfg` (its out_dir is the group's) as the member runs `configs`; each member's summary, None
    for a member that diverged. `resume` continues the group from its last checkpoint, checked as `ablate train
    --resume` checks a run (`force`, `accept_data_change`: ablate.run.resume_checks), for the group and each member.
    `member_callbacks`: makers of callbacks that need the group's MemberRuns (a sweep's per-member pruning), run after
    it."""
    check_fits(cfg, len(configs))  # K members' models: a size no memory here holds is refused before anything is written
    if problem := member_problem(cfg.model, cfg.data.vocab_size):  # a plugin's variant without a member axis: before the data
        raise ValueError(problem)
    locks = []
    # members first: inside the group; a folder found empty is kept itself, its contents this command's
    fresh = {Path(c.out_dir): Path(c.out_dir).exists() for c in (*configs, cfg) if empty_or_absent(Path(c.out_dir))}
    held = set()  # the folders whose lock this command holds
    try:
        group, lock = claim_out_dir(cfg, resume, aside)
        locks.append(lock)
        held.add(Path(cfg.out_dir))
        if resume:
            check_same_members(cfg, configs, group)
        for member in configs:
            out = Path(member.out_dir)
            out.mkdir(parents=True, exist_ok=True)
            # Resuming, a member may hold no checkpoint yet (the group stopped before its first validation): the group's
            # checkpoint is what resumes it. Starting, an earlier run in a member's folder is refused or moved aside.
            locks.append(lock_run_dir(out) if resume else claim_out_dir(member, False, aside)[1])
            held.add(out)
        return _train(cfg, configs, group, resume, member_callbacks, force, accept_data_change)
    except BaseException as e:
        # Refused before its first write, or stopped before the group's first checkpoint (a member's comes only with a
        # validation; the group's resumes every member): no folder left behind. A folder another process has locked
        # meanwhile (the same command started twice at once) is that process's: left alone, its lock too.
        stopped = stopped_by_signal(e) and not any((Path(cfg.out_dir) / "checkpoints").glob("*.ckpt"))
        with signals.held():  # a second signal acts once the cleanup is done, not halfway (as a run's, run/train.py)
            for out, existed in fresh.items():
                if out in held or not (out / RUN_LOCK).exists():
                    remove_if_untouched(out, stopped=stopped, keep_folder=existed)
        if advised := disk_full_advice(e, Path(cfg.out_dir)):  # the group's checkpoint resumes every member
            raise advised from e
        raise
    finally:
        for fd in locks:
            unlock_run_dir(fd)


def _train(
    cfg: ExperimentConfig,
    configs: list[ExperimentConfig],
    group: Path,
    resume: bool,
    member_callbacks: Sequence[Callable[[MemberRuns], L.Callback]],
    force: bool,
    accept_data_change: bool,
) -> list[dict | None]:
    outs = [Path(c.out_dir) for c in configs]
    ckpt_path, attempt, tokenizer, fingerprint = None, 0, None, "start"
    if resume:
        ckpt_path, attempt, tokenizer, fingerprint = prepare_group_resume(cfg, configs, group, force, accept_data_change)
    precision = prepare_process(cfg)
    dm = MemberDataModule(cfg, [c.seed for c in configs], shared=cfg.members.data == "shared")
    dm.tokenizer = tokenizer
    dm.prepare_data()
    dm.setup("fit")
    vocab = dm.tokenizer.vocab_size
    module = MemberModule.from_configs(configs, vocab)
    module.tokenizer_proto = proto = Path(dm.tokenizer.path).read_bytes()
    # Each member keeps its checkpoints, and the group's holds all members: K runs' worth, and the group's two.
    check_disk_space(group, module.params["total"] * len(configs), cfg.train.keep_last + 2)
    if not resume:
        write_file(group / "config.yaml", to_yaml(cfg))
        for member, out in zip(configs, outs):
            write_file(out / "config.yaml", to_yaml(member))
    if fingerprint:
        for out in outs:
            record_fingerprint(out, cfg.data, proto, fingerprint)
    extra = {"params/total": module.params["total"], **run_provenance(), "vocab_size": vocab}
    runs = MemberRuns(configs, outs, group, vocab, proto, attempt, extra)
    speed = SpeedCallback(cfg.train.log_every_steps, lambda batch: train_flops(cfg.model, vocab, batch), cfg.train.peak_tflops, precision)
    # The budgets every member shares stop the group; each member's own rules are MemberRuns'.
    # max_flops is each member's budget: its share of the group's FLOPs, what its summary reports.
    stop = StopRules(dataclasses.replace(cfg.train, converge_window=0, early_stop_metric=None), lambda b: speed.flops(b) / len(configs))
    runs.stops.meter = lambda: {"flops": stop.flops, "wall_seconds": round(stop.seconds, 1)}  # what a stopping member had spent
    preemption = Preemption(group)
    # Each member's progress.json too, read by a sweep's live view and `ablate status` for its trial.
    progress = [MemberProgress(out, k, runs) for k, out in enumerate(outs)]
    group_callbacks = [runs, *(make(runs) for make in member_callbacks), speed, stop, preemption, *progress, GroupCheckpoint(group)]
    trainer = make_group_trainer(cfg, group, [make_csv_logger(group, attempt)], group_callbacks)
    try:
        if resume:
            for out, own in ((group, cfg), *zip(outs, configs)):  # the group's config too: forced, it is written now
                set_aside_results(out, attempt, own)
        fit_or_exit(trainer, module, dm, ckpt_path, preemption)
        ends = [
            out / (FAILED_FILE if (out / FAILED_FILE).is_file() else "summary.json") for out in outs
        ]  # a diverged member's: its FAILED.txt
        with run_end(group, ends):  # a signal from here on exits 75 (130), to resume the members' ends
            validated = "valid" in available_splits(cfg.data)
            if validated and stop.validated_step != trainer.global_step and not runs.stops.all_stopped:
                trainer.save_checkpoint(group / "checkpoints" / "last.ckpt", weights_only=False)  # a signal next loses no step
                trainer.validate(module, datamodule=dm, verbose=False)  # the final weights of the members still training
                runs.record(trainer, module, judge=False)
                trainer.save_checkpoint(group / "checkpoints" / "last.ckpt", weights_only=False)
            group_reason = stop.summary(trainer, cfg.train)
            summaries, failed = [], None
            for k in range(len(configs)):  # one member's failure at its end (a decode, a write) costs no other member its own
                try:
                    summaries.append(_finish(k, configs[k], outs[k], trainer, module, dm, runs, speed, group_reason, validated))
                except Exception as e:
                    log.error("member %s: its end failed (%s: %s); the other members' go on", outs[k], type(e).__name__, e)
                    summaries.append(None)
                    failed = failed or e
            if failed is not None:
                raise failed
            return summaries
    finally:
        runs.finish()


def _finish(k, cfg, out, trainer, module, dm, runs, speed, group_reason, validated) -> dict | None:
    """Member k's end, as `ablate train` ends a run: the weights it reports, its evaluation record, summary.json."""
    if runs.stops.reason[k] == DIVERGED:
        why = f"training diverged (FloatingPointError: {runs.stops.why[k]})"
        write_file(out / FAILED_FILE, why + "\n")
        log.error("member %s: %s", out, why)
        return None
    own = TranslationModule.from_config(cfg, module.vocab_size)
    own.model.load_state_dict(module.member_weights(k))
    own.tokenizer_proto = module.tokenizer_proto
    judge = judge_trainer(cfg)
    selected = select_weights(cfg, judge, own, dm, out) if validated else {"selected": FINAL}
    last = dict(runs.last[k])
    steps = int(module.optimizer.steps()[k])
    if selected["selected"] != FINAL:
        last = {key: float(v) for key, v in judge.callback_metrics.items() if key.startswith("val/")}
        runs.write(k, {"epoch": trainer.current_epoch, **last}, steps)  # the averaged weights' row, as a run's metrics.csv has
    reason = runs.stops.reason[k] or group_reason["stop_reason"]
    summary = {
        "out_dir": cfg.out_dir,
        "steps": steps,
        "epochs": epochs_trained(trainer, 1, steps),
        **group_reason,
        "stop_reason": reason,
        # A member's share of the group's model FLOPs (what its max_flops limits) and the wall time, until it stopped.
        **(runs.stops.spent[k] or {}),
        "convergence": convergence_report(runs.stops.ppl[k], cfg.train.converge_window, cfg.train.converge_tol),
        "matmul_precision": torch.get_float32_matmul_precision(),
        "params": module.params,
        **runs.extra,  # params/total, git_sha, git_dirty, versions, vocab_size: as a run's
        "last": last,
        # as a run's (ModelCheckpoint's best_model_path): the file, or "" before any validation made one
        "best": {
            "metric": runs.monitor,
            "value": runs.best[k],
            "checkpoint": str(out / "checkpoints" / "best.ckpt") if runs.best[k] is not None else "",
        },
        "bleu_signature": module.bleu_signature,
        # The group's step time and training seconds (each of its steps was a step of every member) and a member's share
        # of its throughput and FLOP rate. The group's own figures, its peak memory among them, are under members.speed.
        **{
            key: float(f"{(v / module.members if key.endswith(SHARED) else v):.4g}")
            for key, v in speed.summary.items()
            if not key.endswith(GROUP_ONLY)
        },  # fmt: skip
        "members": {
            "group": str(cfg.members.group),
            "index": k,
            "size": module.members,
            "data": cfg.members.data,
            "padded": round(runs.padded, 4),
            "speed": {key: float(f"{v:.4g}") for key, v in speed.summary.items()},
        },
    }
    summary, record = complete_summary(cfg, summary, judge, own, dm, out, selected, validated)
    publish(out, summary, record, runs.wandb[k])
    return summary
