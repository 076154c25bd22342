"""Cleanup that cannot be made to fail by what a student leaves: iterative, per entry, never raising; the uid's
files in every world-writable place and its SysV objects swept; a uid that cannot be cleaned is quarantined."""
import ctypes
import os
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

from grader.judge import Options, grade_bytes
from grader.sandbox import ProcessSandbox, process, uids
from grader.sandbox.base import settle
from grader.sandbox.cleanup import remove_tree, sysv_objects
from grader.sandbox.process import sweep_uid
from grader.sandbox.uids import lease_uid, quarantined
from tests.sandbox.support import layer_missing

from .support import REFERENCE

libc = ctypes.CDLL(None, use_errno=True)


@pytest.fixture
def as_root():
    if os.geteuid() != 0:
        layer_missing("sandbox uids and their sweep need root")


def as_uid(uid: int, fn) -> None:
    """Run fn in a child with that uid (and gid), as the sandbox would; fail if it raises."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            fn()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the child making the leftovers failed"


def hostile_tree(base: str) -> None:
    """Everything a careless remover trips on, under base (which must exist)."""
    fd = os.open(base, os.O_RDONLY)
    os.mkdir("deep", dir_fd=fd)
    d = os.open("deep", os.O_RDONLY, dir_fd=fd)
    for _ in range(3000):  # deeper than PATH_MAX can name and than rmtree's recursion allows
        os.mkdir("d", dir_fd=d)
        n = os.open("d", os.O_RDONLY, dir_fd=d)
        os.close(d)
        d = n
    os.mkfifo("fifo", dir_fd=d)
    os.fchmod(d, 0o500)
    os.close(d)
    os.close(fd)
    os.makedirs(f"{base}/many")
    for i in range(100_000):
        os.close(os.open(f"{base}/many/{i}", os.O_CREAT | os.O_WRONLY, 0o600))
    os.makedirs(f"{base}/closed/inner")
    Path(f"{base}/closed/inner/x").write_text("x")
    os.chmod(f"{base}/closed/inner", 0)
    os.chmod(f"{base}/closed", 0)
    s = socket.socket(socket.AF_UNIX)
    s.bind(f"{base}/sock")
    s.close()
    os.symlink("/etc", f"{base}/etc-link")
    os.chmod(base, 0o500)


@pytest.mark.slow
def test_remove_tree_takes_a_hostile_tree_whole(tmp_path):
    base = tmp_path / "t"
    base.mkdir()
    hostile_tree(str(base))
    assert remove_tree(base) == [] and not base.exists()
    assert Path("/etc/passwd").exists(), "a symlink is removed, never followed"


@pytest.mark.slow
def test_remove_tree_as_the_owner_not_root(as_root):
    """Without root's override a mode-000 or read-only directory needs a chmod first; the owner may."""
    with lease_uid() as uid:
        base = tempfile.mkdtemp(prefix="grader-test-owner-")
        os.chown(base, uid, uid)
        as_uid(uid, lambda: hostile_tree(base))
        as_uid(uid, lambda: os._exit(0 if remove_tree(base) == [] and not os.path.exists(base) else 1))


def test_remove_tree_reports_instead_of_raising(as_root, tmp_path):
    assert remove_tree(tmp_path / "not-there") == []
    stuck = tmp_path / "stuck"
    stuck.mkdir()
    (stuck / "f").write_text("x")
    if subprocess.run(["chattr", "+i", str(stuck / "f")], capture_output=True).returncode != 0:
        layer_missing("chattr +i does not work on this filesystem")
    try:
        failed = remove_tree(stuck)
        assert failed and "stuck/f" in failed[0], failed
    finally:
        subprocess.run(["chattr", "-i", str(stuck / "f")])
    assert remove_tree(stuck) == []


def leave_everything(uid: int, shared: str):
    """As the sandbox uid: SysV objects, files in /run/lock and /var/tmp, a deep tree in /tmp, a file in a
    world-writable directory someone else owns."""
    def make():
        assert libc.shmget(0, 4096, 0o1666) >= 0 and libc.msgget(0, 0o1666) >= 0 and libc.semget(0, 1, 0o1666) >= 0
        for place in ("/run/lock", "/var/tmp"):
            if os.path.isdir(place):
                Path(place, f"grader-test-{uid}").write_text("left")
        os.mkdir(f"/tmp/grader-test-deep-{uid}")
        d = os.open(f"/tmp/grader-test-deep-{uid}", os.O_RDONLY)
        for _ in range(3000):
            os.mkdir("d", dir_fd=d)
            n = os.open("d", os.O_RDONLY, dir_fd=d)
            os.close(d)
            d = n
        os.close(d)
        Path(shared, "mine").write_text("left")
    as_uid(uid, make)


@pytest.mark.slow
def test_sweep_removes_the_uids_files_everywhere_and_its_sysv_objects(as_root):
    shared = tempfile.mkdtemp(prefix="grader-test-shared-")  # root's, world-writable, like /tmp/.X11-unix
    os.chmod(shared, 0o1777)
    try:
        with lease_uid() as uid:
            leave_everything(uid, shared)
            assert len(sysv_objects(uid)) == 3
            removed, failed = sweep_uid(uid)
            assert failed == [], failed
            assert sysv_objects(uid) == [], "SysV objects of the uid outlived the sweep"
            for path in (f"/run/lock/grader-test-{uid}", f"/var/tmp/grader-test-{uid}", f"/tmp/grader-test-deep-{uid}",
                         f"{shared}/mine"):
                assert not os.path.lexists(path), f"{path} outlived the sweep"
            assert any(r.startswith("sysv") for r in removed) and f"{shared}/mine" in removed, removed
    finally:
        remove_tree(shared)


def test_a_uid_that_cannot_be_cleaned_is_quarantined_until_a_sweep_succeeds(as_root, monkeypatch):
    monkeypatch.setattr(uids, "RETRY_S", 0.0)  # retry the sweep at every lease (normally every 5 minutes)
    with lease_uid() as uid:  # a run of this uid left a file that cannot be removed (a stand-in: chattr +i)
        stuck = Path(f"/tmp/grader-test-immutable-{uid}")
        stuck.write_text("x")
        os.chown(stuck, uid, uid)
        if subprocess.run(["chattr", "+i", str(stuck)], capture_output=True).returncode != 0:
            stuck.unlink()
            layer_missing("chattr +i does not work on /tmp here")
    try:
        with lease_uid(process.reclaim) as other:  # the lease's sweep finds it and passes the uid by
            assert other != uid, "a uid whose file would not go was leased"
        assert uid in quarantined() and str(stuck) in quarantined()[uid]["reason"], quarantined()
        from worker.sweeper import sandbox_health
        assert str(uid) in sandbox_health(), "the worker's health (the sweeper's result) lists the quarantined uid"
        with lease_uid(process.reclaim) as other:
            assert other != uid, "a quarantined uid was leased while its file is still there"
    finally:
        subprocess.run(["chattr", "-i", str(stuck)])
    # the next lease sweeps it again: now clean, back in the pool
    with lease_uid(process.reclaim):
        pass
    assert uid not in quarantined() and not stuck.exists()


@pytest.mark.slow
def test_a_grading_whose_uid_cannot_be_cleaned_stands_and_the_uid_is_not_reused(as_root, monkeypatch):
    real = process.sweep_uid
    failures = ["a file that would not go (test)"]

    def after_run(uid):  # the sweep after this one grading fails once; the leases' sweeps stay real
        removed, _ = real(uid)
        return removed, [failures.pop()] if failures else []
    monkeypatch.setattr(process, "reclaim", lambda uid: real(uid)[1])
    monkeypatch.setattr(process, "sweep_uid", after_run)
    try:
        report = grade_bytes(REFERENCE.read_bytes(), "reference_lm.py", Options(only=("split_heads",)),
                             sandbox=ProcessSandbox())
        assert [c["status"] for c in report["checks"]] == ["pass"], "the grading stands: the sweep is the host's problem"
        settle()  # the sweep runs once the run's done frame is in, in a thread of its own
        bad = [u for u, info in quarantined().items() if "would not go (test)" in info["reason"]]
        assert len(bad) == 1, quarantined()
        with lease_uid() as uid:  # no reclaim: as a lease within RETRY_S of the failure
            assert uid != bad[0]
    finally:
        for u, info in quarantined().items():  # the pool is the host's: give the slot back
            if "would not go (test)" in info["reason"]:
                os.unlink(os.path.join(uids.LOCK_DIR, f"{u - uids.FIRST_UID}.quarantined"))


def test_a_job_folder_a_killed_worker_left_is_removed_when_its_uid_is_leased_again(as_root):
    """A worker killed mid-grading leaves its job folder (root, group = the run's uid, 0750); without namespaces the
    next run under that uid could read the other student's submission in it. The lease's sweep removes it."""
    with lease_uid() as uid:
        pass
    stale = Path(tempfile.mkdtemp(prefix="grader-job-"))
    (stale / "submission.py").write_text("# another student's work\n")
    os.chown(stale, 0, uid)
    os.chmod(stale, 0o750)
    other = Path(tempfile.mkdtemp(prefix="grader-job-"))  # another uid's live job: left alone
    os.chown(other, 0, uid + 1)
    try:
        assert process.reclaim(uid) == []
        assert not stale.exists(), "the stale job folder of the uid being leased is gone"
        assert other.exists(), "a folder of another uid is not touched"
    finally:
        remove_tree(str(stale))
        remove_tree(str(other))
