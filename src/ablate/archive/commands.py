"""`ablate archive`'s body (its flags: ablate.archive.flags): a study's evidence, without checkpoints or corpus text,
into a folder to commit, share or continue elsewhere (ablate.archive.study), optionally scoring runs first."""

from __future__ import annotations

from pathlib import Path

from ablate.archive.study import archive


def archive_command(args) -> int:
    study = Path(args.study)
    if study.is_file():  # a sweep file: archive its out_dir
        from ablate.sweep.load import load_sweep

        study = load_sweep(study, to_run=False).out_dir
    if args.plugins:
        from ablate.plugins import load_plugins

        load_plugins(args.plugins)
    evaluate = scorable = None
    if args.split:
        from ablate.table.checkpoint_scoring import evaluate_run, refuse_unscorable, selected_checkpoint

        def evaluate(run: Path) -> None:
            print(f"evaluating {selected_checkpoint(run)} on the {args.split} split ...")
            evaluate_run(run, args.split, args.device)

        def scorable(runs: list[Path]) -> None:
            refuse_unscorable(runs, args.split, device=args.device)

    report = archive(study, Path(args.dest), evaluate, args.split or "test", scorable)
    print(
        f"archived {len(report.trials)} finished runs of {study} into {args.dest}"
        + (f" (scored {len(report.evaluated)} on {args.split} first)" if report.evaluated else "")
        + (", with the study database" if report.database else ", no study database (not SQLite in the study's folder)")
    )
    if report.unfinished:
        print(
            f"left out {len(report.unfinished)} unfinished trials (a rerun of the sweep trains them again): {', '.join(report.unfinished)}"
        )
    if report.not_finished_in_db:
        print(
            f"left out {len(report.not_finished_in_db)} runs with a summary that the study database does not mark finished "
            f"(the sweep trains those rows again): {', '.join(report.not_finished_in_db)}"
        )
    if report.no_trial:
        print(
            f"left out {len(report.no_trial)} runs under trials/ that no trial of the study database names (renamed, or copied in "
            f"from another study; the sweep does not train them): {', '.join(report.no_trial)}; give each the name its trial "
            "records (`ablate status` lists them), or archive it apart"
        )
    if report.lost:
        print(
            f"warning: {len(report.lost)} trials the study database marks finished (or pruned) have no summary.json: "
            f"{', '.join(report.lost)}; not archived, and a sweep does not train them again: restore each one's summary.json "
            "and archive again, or train those rows under new names"
        )
    if report.gone:
        print(
            f"warning: {len(report.gone)} trials the study database marks finished have no run folder (deleted or renamed): "
            f"{', '.join(report.gone)}; the archive's database marks them finished too, so a sweep continued from it does not "
            "train them again: restore the folders and archive again, or train those rows under new names"
        )
    if report.no_config:
        print(
            f"warning: {len(report.no_config)} finished runs have no config.yaml, archived as they are: {', '.join(report.no_config)}; "
            "`ablate table` refuses the study until they have one, and the study database marks them finished (a rerun will not train them "
            "again): restore each one's config.yaml and archive again"
        )
    return 0
