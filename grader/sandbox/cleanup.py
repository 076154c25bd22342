"""Removing what a sandbox left, whatever shape it has: never recursive, never raising, one entry at a time.

A student controls the tree: 3000 levels deep (shutil.rmtree recurses and raises RecursionError, and
the path outgrows PATH_MAX), 100k files, mode-000 or read-only directories, FIFOs, sockets. The walk
holds one directory fd at a time (descending by name with O_NOFOLLOW, climbing by ".."), keeps only
the pending names per level, and makes a directory it may not read or write usable with chmod. Each
failure is collected, never raised: the caller decides (a slot that cannot be cleaned is quarantined).
Only run once every process of the sandbox is dead: nothing may rename directories during the walk.
"""
import ctypes
import errno
import os
import stat

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
IPC_RMID = 0
SYSV = {"shm": "shmctl", "msg": "msgctl", "sem": "semctl"}


def remove_tree(path) -> list[str]:
    """Remove path (a file or a whole tree) without recursion; return what could not be removed (never raises)."""
    path = os.fspath(path)
    parent, name = os.path.split(os.path.abspath(path))
    try:
        pfd = os.open(parent, DIR_FLAGS & ~os.O_NOFOLLOW)
    except OSError as exc:
        return [] if exc.errno == errno.ENOENT else [f"{parent}: {exc.strerror}"]
    try:
        return _remove_entry(pfd, name, path)
    finally:
        os.close(pfd)


def _remove_entry(pfd: int, name: str, shown: str) -> list[str]:
    """Remove the entry name of the directory pfd (a tree if it is a directory)."""
    try:
        st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
    except OSError as exc:
        return [] if exc.errno == errno.ENOENT else [f"{shown}: {exc.strerror}"]
    if not stat.S_ISDIR(st.st_mode):
        return _unlink(pfd, name, shown)
    failed: list[str] = []
    fd = _open_dir(pfd, name, shown, failed)
    if fd is None:
        return failed
    # stack of (this directory's name in its parent, subdirectory names still to visit); fd is the top's
    stack = [(name, _clear_files(fd, shown, failed))]
    try:
        while True:
            here, pending = stack[-1]
            if pending:
                child = pending.pop()
                cfd = _open_dir(fd, child, f"{shown}/.../{child}", failed)
                if cfd is not None:
                    os.close(fd)
                    fd = cfd
                    stack.append((child, _clear_files(fd, f"{shown}/.../{child}", failed)))
                continue
            stack.pop()
            if not stack:
                break
            up = os.open("..", DIR_FLAGS & ~os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = up
            _rmdir(fd, here, f"{shown}/.../{here}", failed)
    except OSError as exc:  # climbing failed: the tree moved under us; what is left stays, reported
        failed.append(f"{shown}: walk stopped: {exc.strerror}")
        return failed
    finally:
        os.close(fd)
    _rmdir(pfd, name, shown, failed)
    return failed


def _open_dir(pfd: int, name: str, shown: str, failed: list) -> int | None:
    """An fd on the subdirectory name; a directory we may not read (mode 000) is chmodded first."""
    for attempt in range(2):
        try:
            return os.open(name, DIR_FLAGS, dir_fd=pfd)
        except PermissionError as exc:
            if attempt:
                failed.append(f"{shown}: {exc.strerror}")
                return None
            try:
                os.chmod(name, 0o700, dir_fd=pfd)  # ours (not root) or root: either may
            except OSError as chmod_exc:
                failed.append(f"{shown}: {chmod_exc.strerror}")
                return None
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                failed.append(f"{shown}: {exc.strerror}")
            return None
    return None


def _clear_files(fd: int, shown: str, failed: list) -> list[str]:
    """Unlink every non-directory in the directory fd; return its subdirectories' names."""
    subdirs = []
    try:
        with os.scandir(fd) as it:
            entries = [(e.name, _is_dir(e)) for e in it]
    except OSError as exc:
        failed.append(f"{shown}: cannot list: {exc.strerror}")
        return subdirs
    writable = False
    for name, is_dir in entries:
        if is_dir:
            subdirs.append(name)
            continue
        try:
            os.unlink(name, dir_fd=fd)
        except FileNotFoundError:
            pass
        except PermissionError as exc:
            if not writable:  # a read-only directory of ours (not root): make it writable, then retry
                writable = True
                try:
                    os.chmod(fd, 0o700)
                    os.unlink(name, dir_fd=fd)
                    continue
                except OSError:
                    pass
            failed.append(f"{shown}/{name}: {exc.strerror}")
        except OSError as exc:
            failed.append(f"{shown}/{name}: {exc.strerror}")
    if subdirs:
        try:
            os.chmod(fd, stat.S_IMODE(os.fstat(fd).st_mode) | 0o700)  # rmdir of the children needs w+x here
        except OSError:
            pass
    return subdirs


def _is_dir(entry) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def _unlink(pfd: int, name: str, shown: str) -> list[str]:
    try:
        os.unlink(name, dir_fd=pfd)
    except FileNotFoundError:
        pass
    except OSError as exc:
        return [f"{shown}: {exc.strerror}"]
    return []


def _rmdir(pfd: int, name: str, shown: str, failed: list) -> None:
    try:
        os.rmdir(name, dir_fd=pfd)
    except FileNotFoundError:
        pass
    except OSError as exc:
        if exc.errno == errno.ENOTEMPTY and failed:
            return  # already reported: what is left inside it
        failed.append(f"{shown}: {exc.strerror}")


def sysv_objects(uid: int) -> list[tuple[str, int]]:
    """(kind, id) of every SysV shared memory segment, message queue and semaphore set uid owns or created."""
    found = []
    for kind in SYSV:
        try:
            with open(f"/proc/sysvipc/{kind}") as fh:
                header, *rows = fh.read().splitlines()
        except (OSError, ValueError):
            continue
        cols = header.split()
        ident = "shmid" if kind == "shm" else "msqid" if kind == "msg" else "semid"
        for row in rows:
            values = dict(zip(cols, row.split()))
            if str(uid) in (values.get("uid"), values.get("cuid")) and values.get(ident, "").isdigit():
                found.append((kind, int(values[ident])))
    return found


def sweep_sysv(uid: int) -> tuple[list[str], list[str]]:
    """Remove the uid's SysV IPC objects (this IPC namespace's): (removed, failed), each as 'kind id'."""
    libc = ctypes.CDLL(None, use_errno=True)
    removed, failed = [], []
    for kind, ident in sysv_objects(uid):
        ctl = getattr(libc, SYSV[kind])
        rc = ctl(ident, 0, IPC_RMID, None) if kind == "sem" else ctl(ident, IPC_RMID, None)
        err = ctypes.get_errno()
        if rc == 0 or err in (errno.EINVAL, errno.EIDRM):  # gone already counts as gone
            removed.append(f"sysv {kind} {ident}")
        else:
            failed.append(f"sysv {kind} {ident}: {os.strerror(err)}")
    return removed, failed
