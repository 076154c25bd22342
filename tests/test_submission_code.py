"""The submission's bytecode: the judge compiles it once (grader/source.py bytecode), the harness's children load
it (grader/harness/main.py submission_code) under the job's own path, and compile it themselves when they cannot."""
import importlib.util
import traceback

from grader.harness import main as harness
from grader.harness import probes
from grader.source import bytecode

TEXT = '''TRACK = "lm"

def outer():
    def inner():
        raise ValueError("from inner")
    return inner()
'''


def job_with(tmp_path, text: str, code: bytes | None):
    """A job directory holding the submission and, when given, the judge's bytecode; the submission's path."""
    path = tmp_path / "submission.py"
    path.write_text(text, encoding="utf-8")
    if code is not None:
        (tmp_path / harness.CODE_FILE).write_bytes(code)
    return str(path)


def raised_at(path: str, code) -> traceback.FrameSummary:
    """The innermost frame of outer()'s exception, run from a fresh module of code."""
    module = harness.fresh_submission(path, code, probes)
    try:
        module.outer()
    except ValueError as exc:
        return traceback.extract_tb(exc.__traceback__)[-1]
    raise AssertionError("outer() did not raise")


def test_the_judges_bytecode_runs_under_the_jobs_path_down_to_nested_functions(tmp_path):
    path = job_with(tmp_path, TEXT, bytecode(TEXT))
    code = harness.submission_code(path)
    frame = raised_at(path, code)
    assert frame.filename == path and frame.name == "inner" and frame.lineno == 5, frame
    assert frame.line == 'raise ValueError("from inner")', "linecache reads the student's line from the job's file"


def test_the_harness_compiles_itself_without_the_judges_bytecode_or_with_another_pythons(tmp_path):
    another_python = b"\x00\x00\r\n" + bytecode(TEXT)[len(importlib.util.MAGIC_NUMBER):]
    for name, code in (("none", None), ("another", another_python)):
        (tmp_path / name).mkdir()
        path = job_with(tmp_path / name, TEXT, code)
        frame = raised_at(path, harness.submission_code(path))
        assert frame.filename == path and frame.lineno == 5, frame


def test_a_file_that_parses_but_does_not_compile_gets_no_bytecode_and_fails_at_import_as_before(tmp_path):
    text = 'TRACK = "lm"\nreturn 1\n'  # the parser takes it; the compiler refuses a return outside a function
    assert bytecode(text) is None
    path = job_with(tmp_path, text, None)
    try:
        harness.submission_code(path)
    except SyntaxError as exc:
        assert "'return' outside function" in str(exc) and exc.lineno == 2
    else:
        raise AssertionError("the harness's own compile raised nothing")
