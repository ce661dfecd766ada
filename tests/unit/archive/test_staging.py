"""An archive written whole or not at all (`ablate.archive.staging.staging`): a new DEST is one rename, an existing
one gets the files moved in under ARCHIVE_INCOMPLETE with the database last, a failure leaves DEST as it was, a dead
writer's temporary folder (on this host) is removed by the next archive, and one archive writes into DEST at a time."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ablate.archive.staging import exclusive, staging
from ablate.archive.study_db import DATABASE
from ablate.files.atomic import HOST_TAG
from ablate.files.destination import ARCHIVE_INCOMPLETE


def tree(root):
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_new_archive_appears_whole_and_leaves_no_temporary_folder(tmp_path):
    dest = tmp_path / "studies" / "q"
    with exclusive(dest), staging(dest) as stage:
        assert stage.parent == dest.parent and not dest.exists()
        (stage / DATABASE).write_text("db")
        (stage / "trials").mkdir()
        (stage / "trials" / "summary.json").write_text("{}")
    assert tree(dest) == {DATABASE: "db", "trials/summary.json": "{}"}
    assert os.listdir(dest.parent) == ["q"]


def test_an_update_moves_files_in_database_last_and_removes_the_marker(tmp_path, monkeypatch):
    dest = tmp_path / "q"
    dest.mkdir()
    (dest / "old.json").write_text("kept")
    (dest / DATABASE).write_text("old db")
    moved = []
    real_replace = os.replace

    def replace(src, dst):
        moved.append((os.path.basename(dst), (dest / ARCHIVE_INCOMPLETE).exists()))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with staging(dest) as stage:
        (stage / DATABASE).write_text("new db")
        (stage / "a.json").write_text("a")
    assert moved == [("a.json", True), (DATABASE, True)]  # under the marker, the database last
    assert tree(dest) == {DATABASE: "new db", "a.json": "a", "old.json": "kept"}


@pytest.mark.parametrize("existing", [False, True], ids=["empty-mount-point", "an-earlier-archive"])
def test_a_dest_on_another_file_system_is_moved_into_whole(tmp_path, monkeypatch, existing):
    """DEST a mount point (a bind mount, a volume), the stage beside it on its parent's file system: the rename failed
    with a bare errno 18 and left the archive marked incomplete, every rerun failing alike (an empty mount: errno 16)."""
    import errno

    dest = tmp_path / "mnt"
    dest.mkdir()
    if existing:
        (dest / DATABASE).write_text("old db")
    real_replace = os.replace

    def replace(src, dst):  # a rename from the stage, on the parent's file system, into the mount fails as it does
        if ".archive-" in str(src) and not str(dst).startswith(str(dest) + "/."):
            raise OSError(errno.EBUSY if Path(dst) == dest else errno.EXDEV, "Invalid cross-device link")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with staging(dest) as stage:
        (stage / DATABASE).write_text("new db")
        (stage / "trials").mkdir()
        (stage / "trials" / "a.json").write_text("a")
    assert tree(dest) == {DATABASE: "new db", "trials/a.json": "a"}  # no marker, no temporary file
    assert os.listdir(tmp_path) == ["mnt"]


def test_a_failure_leaves_dest_as_it_was_and_no_folders_it_made(tmp_path):
    dest = tmp_path / "new" / "deeper" / "q"
    with pytest.raises(RuntimeError, match="refused"), exclusive(dest), staging(dest) as stage:
        (stage / DATABASE).write_text("half")
        raise RuntimeError("refused")
    assert not (tmp_path / "new").exists()


def test_a_dead_writers_temporary_folder_goes_a_living_ones_and_another_hosts_stay(tmp_path):
    """A host's pids are its own: another host's stage, whose pid is not running here, was removed while its archive
    wrote into it (it then failed, naming a temporary file)."""
    dest = tmp_path / "q"
    dead_pid = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1  # no process can have it
    dead, alive = tmp_path / f".q.archive-{HOST_TAG}-{dead_pid}.tmp", tmp_path / f".q.archive-{HOST_TAG}-{os.getppid()}.tmp"
    elsewhere = tmp_path / f".q.archive-0ther0-{dead_pid}.tmp"
    for folder in (dead, alive, elsewhere):
        folder.mkdir()
    with staging(dest) as stage:  # without DEST's lock (a file system without locks): only this host's dead ones
        (stage / DATABASE).write_text("db")
    assert not dead.exists() and alive.exists() and elsewhere.exists()
    older = tmp_path / f".q.archive-{dead_pid}.tmp"  # named before stages carried their host
    older.mkdir()
    with exclusive(dest) as sole, staging(dest, sole) as stage:  # holding the lock, no other archive writes one
        assert sole
        (stage / DATABASE).write_text("db")
    assert sorted(os.listdir(tmp_path)) == ["q"]


def test_one_archive_writes_into_dest_at_a_time_and_leaves_no_lock_behind(tmp_path):
    """Two archives into one DEST each checked it held nothing newer, then the one that ended last moved its older
    database in over the other's."""
    dest = tmp_path / "studies" / "q"
    with exclusive(dest):
        with pytest.raises(ValueError, match=f"another `ablate archive` is writing {dest} .*; nothing was written"), exclusive(dest):
            pass
        assert (dest.parent / ".q.archive.lock").exists()
    assert os.listdir(dest.parent) == []
    with exclusive(dest):  # free again
        pass
    (dest.parent / ".q.archive.lock").write_text("")  # left by a kill -9: taken, and removed at the end
    with exclusive(dest):
        pass
    assert os.listdir(dest.parent) == []


def test_a_second_archive_command_into_the_same_dest_is_refused_before_it_writes(tmp_path, capsys):
    from ablate.cli import main

    study, dest = tmp_path / "study", tmp_path / "arch"
    (study / "trials").mkdir(parents=True)  # a study: results beside its trials (a lone results.csv is a user's own)
    (study / "results.csv").write_text("row\n")
    with exclusive(dest):
        assert main(["archive", str(study), str(dest)]) == 2
    assert f"another `ablate archive` is writing {dest}" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["study"]


def test_another_users_lock_file_is_locked_read_only_never_removed(tmp_path, monkeypatch):
    """A lock file another user's archive holds (0o644 under the usual umask) cannot be opened for writing: it was
    unlinked and a new one locked, so both archives went on."""
    dest = tmp_path / "q"
    lock = tmp_path / ".q.archive.lock"
    real_open = os.open

    def others(path, flags, *mode):  # the file is another user's: no write access
        if Path(path) == lock and flags & os.O_RDWR:
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *mode)

    with exclusive(dest):  # the other user's live archive
        monkeypatch.setattr(os, "open", others)
        with pytest.raises(ValueError, match="another `ablate archive` is writing"), exclusive(dest):
            pass
        assert lock.exists()
        monkeypatch.undo()
    lock.write_text("")  # left behind by that user's killed archive: taken read-only
    monkeypatch.setattr(os, "open", others)
    with exclusive(dest) as sole:
        assert sole
