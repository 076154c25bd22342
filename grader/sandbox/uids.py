"""A pool of unprivileged uids, one per concurrent sandbox, so killing 'every process of the uid' is safe.

A slot whose uid could not be cleaned after a run (a process that survived, a file or SysV object that
would not go) is quarantined: a file `<slot>.quarantined` holding the reason. It is not leased again
until a later sweep of that uid (tried at most every RETRY_S, while another slot is being leased)
finds it clean; the worker's health lists the quarantined slots (quarantined()).
"""
import fcntl
import json
import logging
import os
import time
from contextlib import contextmanager

FIRST_UID = 61000
POOL_SIZE = 64
LOCK_DIR = "/tmp/grader-sandbox-uids"
RETRY_S = 300.0


def _quarantine_path(slot: int) -> str:
    return os.path.join(LOCK_DIR, f"{slot}.quarantined")


def quarantine(uid: int, reason: str) -> None:
    """Take the uid's slot out of the pool until a sweep finds it clean (the caller still holds its lease)."""
    logging.getLogger(__name__).warning("sandbox uid %s quarantined until a sweep cleans it: %s", uid, reason[:500])
    path = _quarantine_path(uid - FIRST_UID)
    with open(path + ".new", "w") as fh:
        json.dump({"uid": uid, "reason": reason[:2000], "since": time.time()}, fh)
    os.replace(path + ".new", path)


def quarantined() -> dict:
    """uid -> {reason, since} for every quarantined slot on this host (for the worker's health)."""
    out = {}
    try:
        names = os.listdir(LOCK_DIR)
    except OSError:
        return out
    for name in names:
        if name.endswith(".quarantined"):
            try:
                with open(os.path.join(LOCK_DIR, name)) as fh:
                    info = json.load(fh)
                out[int(info["uid"])] = {"reason": info.get("reason", ""), "since": info.get("since")}
            except (OSError, ValueError, KeyError, TypeError):
                continue
    return out


def _usable(slot: int, reclaim) -> bool:
    """A slot whose uid a sweep (reclaim(uid) -> failures) finds clean; a quarantined one is tried every RETRY_S."""
    path = _quarantine_path(slot)
    try:
        tried = os.stat(path).st_mtime
    except FileNotFoundError:
        tried = None
    if tried is not None and (reclaim is None or time.time() - tried < RETRY_S):
        return False
    if reclaim is None:
        return True
    failures = reclaim(FIRST_UID + slot)  # what a worker that died mid-run left, or what would not go last time
    if failures:
        quarantine(FIRST_UID + slot, "; ".join(failures[:20]))  # refreshes the time of the last try
        return False
    if tried is not None:
        os.unlink(path)
    return True


@contextmanager
def lease_uid(reclaim=None):
    """Hold a uid no other sandbox on this host uses until the block exits (an flock per uid).

    reclaim(uid) -> list of failures: sweeps the uid first; it is leased only when that comes back empty.
    """
    os.makedirs(LOCK_DIR, mode=0o700, exist_ok=True)
    for slot in range(POOL_SIZE):
        fd = os.open(os.path.join(LOCK_DIR, str(slot)), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        try:
            if not _usable(slot, reclaim):
                continue
            yield FIRST_UID + slot
        finally:
            os.close(fd)  # closing releases the lock
        return
    raise RuntimeError(f"all {POOL_SIZE} sandbox uids are in use or quarantined on this host "
                       f"(quarantined: {sorted(quarantined())})")
