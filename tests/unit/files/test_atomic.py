"""A file is replaced whole or not at all."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from ablate.files import atomic
from ablate.files.atomic import Appeared, private_dir, replacing, write_file


def test_the_target_is_replaced_when_the_block_ends(tmp_path):
    target = tmp_path / "f.json"
    target.write_text("old")
    with replacing(target) as tmp:
        tmp.write_text("new")
        assert target.read_text() == "old" and tmp.parent == tmp_path  # a sibling: the rename stays on one file system
    assert target.read_text() == "new" and [p.name for p in tmp_path.iterdir()] == ["f.json"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "f.json"
    target.write_text("old")
    with pytest.raises(KeyboardInterrupt), replacing(target) as tmp:
        tmp.write_text("half")
        raise KeyboardInterrupt
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["f.json"]


def test_the_replaced_file_keeps_its_permissions_and_a_new_one_gets_the_umasks(tmp_path):
    old, new = tmp_path / "shared.md", tmp_path / "new.json"
    old.write_text("old")
    old.chmod(0o664)
    with replacing(old) as tmp:
        tmp.write_text("new")
    with replacing(new) as tmp:
        tmp.write_text("new")
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(old.stat().st_mode) == 0o664 and stat.S_IMODE(new.stat().st_mode) == 0o666 & ~umask


def test_the_file_is_synced_before_the_rename_and_the_folder_after(tmp_path, monkeypatch):
    from ablate.files.atomic import write_file

    events, real_fsync, real_replace = [], os.fsync, os.replace

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src, dst):
        events.append(("rename", str(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    target = tmp_path / "results.json"
    write_file(target, "[]")
    (_, synced), rename, folder = events
    assert Path(synced).parent == tmp_path and Path(synced).name.startswith(".results.json.")
    assert rename == ("rename", str(target)) and folder == ("fsync", str(tmp_path))
    assert target.read_text() == "[]"


def test_write_file_refuses_a_symlink_naming_it_and_writes_through_a_pipe(tmp_path):
    """Issue 38 item 3: a link's target is somebody's file elsewhere; neither it nor the link changes."""
    from ablate.files.atomic import replacing, write_file

    real = tmp_path / "real.txt"
    real.write_text("old")
    (tmp_path / "link.txt").symlink_to(real)
    for write in (lambda p: write_file(p, "new"), lambda p: replacing(p).__enter__()):
        with pytest.raises(ValueError, match=f"{tmp_path / 'link.txt'} is a symbolic link \\(to {real}\\); ablate never writes through"):
            write(tmp_path / "link.txt")
    assert (tmp_path / "link.txt").is_symlink() and real.read_text() == "old" and sorted(os.listdir(tmp_path)) == ["link.txt", "real.txt"]
    linked = tmp_path / "scratch"  # a linked parent folder (cluster scratch) is fine
    linked.symlink_to(tmp_path / "dir", target_is_directory=True)
    (tmp_path / "dir").mkdir()
    write_file(linked / "out.txt", "ok")
    assert (tmp_path / "dir" / "out.txt").read_text() == "ok"
    write_file("/dev/null", "to nowhere")  # a device: written, not replaced (nothing is made in /dev)


def test_a_file_under_dev_shm_is_replaced_whole_never_written_in_place(shm_dir):
    """/dev/shm (a tmpfs) was taken for a stream by its /dev/ prefix and opened "wb" in place: a Ctrl-C mid-write
    left half a file, and a link was followed."""
    target = shm_dir / "out.de"
    target.write_text("old\n")
    (shm_dir / "kept").hardlink_to(target)  # the old file itself: a replace leaves it whole, a write in place does not

    def parts():
        yield "half"
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_file(target, parts())
    assert target.read_text() == "old\n"
    write_file(target, "new\n")
    assert target.read_text() == "new\n" and (shm_dir / "kept").read_text() == "old\n"
    assert sorted(p.name for p in shm_dir.iterdir()) == ["kept", "out.de"]
    (shm_dir / "link").symlink_to(target)
    with pytest.raises(ValueError, match="is a symbolic link"):
        write_file(shm_dir / "link", "through")
    assert target.read_text() == "new\n"


WRITES_STDOUT = (
    "import sys; from ablate.files.atomic import write_file\n"
    "print('printed before', flush=True); write_file(sys.argv[1], 'written\\n'); print('printed after')\n"
)


@pytest.mark.parametrize("mode", ["ab", "wb"])
def test_a_stream_is_written_into_where_stdout_writes_never_truncated(tmp_path, mode):
    """`translate -o /dev/stdout >> log.txt` erased log.txt's earlier lines (/dev/stdout opened "wb": O_TRUNC, its
    own offset), and with `> f` what the command printed after its output landed on top of it."""
    log = tmp_path / "log.txt"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    for name in ("/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"):
        log.write_text("earlier line\n")
        with open(log, mode) as out:  # `>> log.txt` or `> log.txt`
            subprocess.run([sys.executable, "-c", WRITES_STDOUT, name], stdout=out, env=env, check=True)
        before = "earlier line\n" if mode == "ab" else ""
        assert log.read_text() == before + "printed before\nwritten\nprinted after\n", name
    other = tmp_path / "other.txt"  # a stream that is not this process's stdout: appended to, not truncated
    other.write_text("kept\n")
    with open(other, "ab") as held:
        fd = held.fileno()
        subprocess.run(
            [sys.executable, "-c", WRITES_STDOUT, f"/dev/fd/{fd}"], env=env, check=True, pass_fds=[fd], stdout=subprocess.DEVNULL
        )
    assert other.read_text() == "kept\nwritten\n"


def test_a_private_folder_removes_a_killed_writers_and_keeps_a_live_ones(tmp_path):
    """A tokenizer trained into a temporary folder and killed (-9) left `.KEY.<rand>/` in the cache for good; now the
    next writer of the same target removes a dead writer's folder, never a live one's (this process's, here)."""
    target = tmp_path / "abc123"
    mine = private_dir(target)
    (mine / "spm.model").write_text("half")
    dead = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1  # no process has it
    stale = mine.with_name(mine.name.replace(f"-{os.getpid()}.", f"-{dead}."))
    stale.mkdir()
    (stale / "spm.model").write_text("left by a kill")
    again = private_dir(target)
    assert not stale.exists() and mine.is_dir() and again.is_dir() and again != mine
    assert again.name.startswith(".abc123.") and again.name.endswith(".tmp")


def test_a_folder_written_whole_gets_the_mode_mkdir_would_give_it(tmp_path):
    """mkdtemp's private 0700 went into place with the folder: a shared cache's tokenizers were unreadable to the
    other users of it (ABLATE_CACHE on a group's disk)."""
    old = os.umask(0o022)
    try:
        made = private_dir(tmp_path / "shared")
    finally:
        os.umask(old)
    assert stat.S_IMODE(made.stat().st_mode) == 0o777 & ~atomic._UMASK


def test_new_only_never_writes_over_a_file_another_process_made_meanwhile(tmp_path):
    target = tmp_path / "new" / "avg.ckpt"  # its folder is made
    with (
        pytest.raises(Appeared, match=f"{target} appeared while this command ran .* pass --force"),
        replacing(target, new_only=True) as tmp,
    ):
        tmp.write_text("mine")
        target.write_text("theirs")  # the other writer, between this one's check and its rename
    assert target.read_text() == "theirs" and os.listdir(target.parent) == ["avg.ckpt"]
    write_file(tmp_path / "out.txt", "first\n", new_only=True)
    assert (tmp_path / "out.txt").read_text() == "first\n" and stat.S_IMODE((tmp_path / "out.txt").stat().st_mode) == 0o666 & ~_umask()
    assert (tmp_path / "out.txt").stat().st_nlink == 1  # the temporary's name is gone
    write_file(tmp_path / "out.txt", "second\n")  # forced: replaced
    assert (tmp_path / "out.txt").read_text() == "second\n"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_write_that_fails_removes_the_folders_it_made(tmp_path):
    with pytest.raises(RuntimeError), replacing(tmp_path / "new" / "sub" / "out.txt", new_only=True) as tmp:
        tmp.write_text("half")
        raise RuntimeError("the work failed")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("errno_name", ["ENOSYS", "EPERM"])
def test_without_hard_links_new_only_renames_and_still_refuses_a_file_that_appeared(tmp_path, monkeypatch, errno_name):
    import errno

    def no_links(src, dst):
        raise OSError(getattr(errno, errno_name), "no hard links here")

    monkeypatch.setattr(os, "link", no_links)
    write_file(tmp_path / "a.txt", "mine\n", new_only=True)
    assert (tmp_path / "a.txt").read_text() == "mine\n"
    with pytest.raises(Appeared), replacing(tmp_path / "b.txt", new_only=True) as tmp:
        tmp.write_text("mine")
        (tmp_path / "b.txt").write_text("theirs")
    assert (tmp_path / "b.txt").read_text() == "theirs" and sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.txt"]


def test_a_link_nfs_retried_after_making_it_is_this_writers_own_file(tmp_path, monkeypatch):
    real = os.link

    def retried(src, dst):  # the reply lost, the request sent again: the file is there, and EEXIST comes back
        real(src, dst)
        raise FileExistsError(17, "File exists")

    monkeypatch.setattr(os, "link", retried)
    write_file(tmp_path / "out.txt", "mine\n", new_only=True)
    assert (tmp_path / "out.txt").read_text() == "mine\n" and os.listdir(tmp_path) == ["out.txt"]
