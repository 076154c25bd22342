"""The instance folder keeps its secrets: 0700 folders, 0600 files, and a random SECRET_KEY of its own.

Sandbox uids run on the same host as the service (the process backend): anything in the instance that
group or others may read (the database with every submission and token hash, the archive, logs) is theirs.
"""
import logging
import os
import secrets
import stat

log = logging.getLogger(__name__)

UMASK = 0o077  # every file a service process creates is its owner's alone, from the first write
KEY_FILE = "secret_key"
MIN_KEY_CHARS = 16
# Keys that are published (our old default, compose's old fallback): a cookie signed with one opens everything.
PLACEHOLDERS = {"dev", "change-me", "changeme"}


class InsecureInstance(RuntimeError):
    """The service would start with a key or a folder that others can read or forge; the message says which."""


def close_process() -> None:
    """Files and folders this process creates from now on are 0600 / 0700."""
    os.umask(UMASK)


def make_private_dir(path: str) -> None:
    """Create `path` (and parents) if missing, and make it 0700 whatever the umask was."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    os.chmod(path, 0o700)


def lock_down(root: str) -> int:
    """Take group and other bits off every folder and file under root (symlinks untouched); how many changed."""
    changed = 0
    stack = [os.path.realpath(root)]  # an instance that is itself a symlink is still closed
    while stack:  # iterative: a deep tree cannot exhaust the recursion limit
        path = stack.pop()
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(st.st_mode):
            continue
        if stat.S_ISDIR(st.st_mode):
            try:
                stack.extend(os.path.join(path, name) for name in os.listdir(path))
            except OSError:
                pass
        if st.st_mode & 0o077:
            try:
                os.chmod(path, stat.S_IMODE(st.st_mode) & 0o700)
                changed += 1
            except OSError as exc:  # another user's file: say so, but a start must not fail on it
                log.warning("cannot close %s (mode %o): %s", path, stat.S_IMODE(st.st_mode), exc)
    return changed


def secret_key(configured, folder: str, generate: bool) -> str:
    """The key to sign sessions with: the configured one (never a placeholder), else instance/secret_key.

    With `generate` (the service's processes) a missing key file is created once with a random key; without
    it (a test config that names no key) the key is random for this process.
    """
    if configured is not None:
        key = str(configured)
        if key.strip().lower() in PLACEHOLDERS or not key.strip():
            raise InsecureInstance(f"SECRET_KEY is the published placeholder {key!r}: anyone can sign a session "
                                   "cookie with it. Unset GRADER_SECRET_KEY (and SECRET_KEY in instance/config.py) "
                                   f"to use a random key kept in {os.path.join(folder, KEY_FILE)}, or set a random "
                                   "one: python3 -c 'import secrets; print(secrets.token_hex(32))'")
        if generate and len(key) < MIN_KEY_CHARS:
            raise InsecureInstance(f"SECRET_KEY has {len(key)} characters; at least {MIN_KEY_CHARS} random ones are "
                                   "needed so that session cookies cannot be forged "
                                   "(python3 -c 'import secrets; print(secrets.token_hex(32))')")
        return key
    if not generate:
        return secrets.token_hex(32)
    return key_file(os.path.join(folder, KEY_FILE))


def key_file(path: str) -> str:
    """The key in `path`, created 0600 with 256 random bits if absent (atomic: concurrent starts agree)."""
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}.{secrets.token_hex(4)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, (secrets.token_hex(32) + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)  # fails if another process made it first: then theirs is the key
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
    st = os.stat(path)
    if st.st_mode & 0o077:
        os.chmod(path, 0o600)
    with open(path) as fh:
        key = fh.read().strip()
    if len(key) < MIN_KEY_CHARS:
        raise InsecureInstance(f"{path} holds {len(key)} characters; delete it to have a random key made, or put "
                               f"at least {MIN_KEY_CHARS} random characters in it")
    return key
