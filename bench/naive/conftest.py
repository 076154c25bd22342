"""The naive baseline's fixtures: the job laid out by bench/naive_baseline.py (NAIVE_JOB, default: this folder's parent)."""
import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

JOB = Path(os.environ.get("NAIVE_JOB", Path(__file__).resolve().parent))
sys.path.insert(0, str(JOB))  # probes.py, the same calls the grader's harness makes

# Outside a job laid out by the benchmark (someone ran pytest on bench/), there is nothing to test.
STAGES = json.loads((JOB / "stages.json").read_text()) if (JOB / "stages.json").exists() else []
collect_ignore = [] if STAGES else ["test_naive.py"]


@pytest.fixture
def submission():
    """The student's file imported anew for every test, as hand-written suites do."""
    spec = importlib.util.spec_from_file_location("submission", JOB / "submission.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def outputs():
    """Outputs of earlier stages (checkpoint_reload.load reads what .save returned)."""
    return {}
