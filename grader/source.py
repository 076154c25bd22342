"""Static reading of a submission: validation and source scans, without ever executing it."""
import ast
import hashlib
import importlib.util
import marshal
import threading
from dataclasses import dataclass

MAX_BYTES = 256 * 1024
TRACKS = ("reverse", "lm")
# CPython 3.11.2's ast.parse is not thread-safe ("AST constructor recursion depth mismatch" under
# concurrent uploads), so every parse here takes this lock.
PARSE_LOCK = threading.Lock()


class Rejected(ValueError):
    """The file cannot be graded at all; the message names the problem."""


@dataclass
class Source:
    """A submission that decodes and parses, with what can be read from it statically."""
    text: str
    sha256: str
    tree: ast.Module
    track: str | None
    track_problem: str | None


def read_source(data: bytes) -> Source:
    """Validate raw bytes (size, NUL, UTF-8, syntax) and read TRACK; raise Rejected with a clear message."""
    if not data:
        raise Rejected("the file is empty")
    if len(data) > MAX_BYTES:
        raise Rejected(f"the file is {len(data)} bytes; the limit is {MAX_BYTES} bytes (256 KiB)")
    if b"\x00" in data:
        raise Rejected(f"the file contains a NUL byte at offset {data.index(0)}: it is binary, not Python source")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Rejected(f"the file is not UTF-8 text (invalid byte at offset {exc.start})") from None
    try:
        with PARSE_LOCK:
            tree = ast.parse(text, filename="submission.py")
    except SyntaxError as exc:
        raise Rejected(f"the file is not valid Python: {exc.msg} at line {exc.lineno}"
                       + (f": {(exc.text or '').strip()[:200]}" if exc.text else "")) from None
    except (MemoryError, RecursionError) as exc:
        # CPython's parser gives up on deep nesting (100000 unary minus: MemoryError; a long chain of +: RecursionError).
        raise Rejected(f"the file is nested too deeply for Python's parser ({type(exc).__name__}"
                       + (f": {exc}" if str(exc) else "") + "); split the deepest expression into steps") from None
    except ValueError as exc:  # e.g. a source the compiler refuses outright
        raise Rejected(f"the file cannot be parsed as Python: {exc}") from None
    track, problem = find_track(tree)
    return Source(text, hashlib.sha256(data).hexdigest(), tree, track, problem)


def bytecode(text: str) -> bytes | None:
    """The submission compiled as the sandbox's harness loads it (importlib's magic number, then marshal): the
    compile leaves each check's child's path. None when it does not compile: the harness then compiles it itself
    and reports the error where the import fails, as it always did. Compiling runs none of it."""
    try:
        with PARSE_LOCK:
            # the bytes the sandbox reads (a coding line is honoured as there); the harness sets the real path
            code = compile(text.encode("utf-8"), "submission.py", "exec", dont_inherit=True, optimize=0)
    except (SyntaxError, ValueError, MemoryError, RecursionError, OverflowError):
        return None
    return importlib.util.MAGIC_NUMBER + marshal.dumps(code)


def find_track(tree: ast.Module) -> tuple[str | None, str | None]:
    """TRACK as a module-level string literal, or why it cannot be read."""
    found = None
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == "TRACK" for t in targets):
            found = node
    if found is None:
        return None, 'TRACK is missing: add a module-level line TRACK = "reverse" or TRACK = "lm"'
    value = found.value
    if not (isinstance(value, ast.Constant) and isinstance(value.value, str)):
        return None, f'TRACK (line {found.lineno}) must be a plain string literal, "reverse" or "lm"'
    if value.value not in TRACKS:
        return None, f'TRACK is {value.value!r} (line {found.lineno}); it must be "reverse" or "lm"'
    return value.value, None


def shortcut_uses(tree: ast.Module) -> list[str]:
    """Every forbidden or hiding construct in the source, as 'line N: what' (the rule lives in grader.shortcuts)."""
    from .shortcuts import shortcut_uses as scan
    return scan(tree)
