"""A member group resumes with the members it started with (ablate.run.member_resume), refused before any file changes
otherwise: on group and member folders built by hand."""

from __future__ import annotations

import pytest
from helpers import tiny_experiment

from ablate.config import to_yaml
from ablate.config.members import member_configs
from ablate.run.member_resume import check_same_members


def started(tmp_path, size: int = 2):
    """A group of `size` members as `ablate train --members` leaves it: the group's config and each member's."""
    cfg = tiny_experiment(tmp_path, out_dir=str(tmp_path / "group"))
    cfg.members.size = size
    members = member_configs(cfg)
    for c in [cfg, *members]:
        (tmp_path / c.out_dir).mkdir(parents=True, exist_ok=True)
        (tmp_path / c.out_dir / "config.yaml").write_text(to_yaml(c))
    return cfg, members


def test_the_members_it_started_with_resume(tmp_path):
    cfg, members = started(tmp_path)
    check_same_members(cfg, members, tmp_path / "group")


def test_another_number_of_members_is_refused_naming_both(tmp_path):
    cfg, _ = started(tmp_path)
    cfg.members.size = 3
    with pytest.raises(ValueError, match=r"trains 2 members and this command asks for 3 .*even with --force; nothing was changed"):
        check_same_members(cfg, member_configs(cfg), tmp_path / "group")


def test_other_seeds_are_refused_naming_the_folder_no_member_had(tmp_path):
    cfg, _ = started(tmp_path)
    cfg.seed = 5
    with pytest.raises(ValueError, match=rf"{tmp_path / 'group' / 'seed=5'} holds no config.yaml, so it is not a member"):
        check_same_members(cfg, member_configs(cfg), tmp_path / "group")
    assert not (tmp_path / "group" / "seed=5").exists()


def test_the_same_seeds_in_another_order_are_refused_as_they_would_swap_the_members_weights(tmp_path):
    cfg, members = started(tmp_path)
    swapped = member_configs(cfg, {"seed": [members[1].seed, members[0].seed]})
    assert {c.out_dir for c in swapped} == {c.out_dir for c in members}  # the same folders, each in the other's slot
    with pytest.raises(ValueError, match=r"seed=\d+ trained as member 1 of the group .* makes it member 0 .*even with --force"):
        check_same_members(cfg, swapped, tmp_path / "group")


def test_a_group_checkpoint_damaged_in_place_is_refused_before_any_file_changes(tmp_path):
    """Lightning loads the group's last.ckpt itself, without a checksum: a damaged one trained as garbage weights."""
    import torch

    from ablate.run.member_resume import prepare_group_resume

    cfg, members = started(tmp_path)
    group = tmp_path / "group"
    (group / "checkpoints").mkdir()
    last = group / "checkpoints" / "last.ckpt"
    torch.save({"state_dict": {"w": torch.randn(50_000)}, "hyper_parameters": {}}, last)
    data = bytearray(last.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 4096] = b"\xff" * 4096
    last.write_bytes(bytes(data))
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    with pytest.raises(ValueError, match=rf"--resume: {last}: damaged: its part .* fails its checksum"):
        prepare_group_resume(cfg, members, group, force=False, accept_data_change=False)
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before
