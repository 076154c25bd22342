"""A spare forked ahead warms up while it waits (grader/harness/probes.py: warm_up_checks): a check's first calls and
its first writes to the harness's pages come before its stage. What the stage then finds must be what a fresh fork
finds: the warm-up trips no wire of the no_shortcuts check and leaves nothing that Baseline.restore does not put back.
"""
import json
import subprocess
import sys
from pathlib import Path

HARNESS = Path(__file__).resolve().parents[1] / "grader" / "harness"

# Run as the harness runs (its directory on sys.path, the tripwires installed): the state before and after.
SCRIPT = """
import json, random, sys
import torch
import probes
from main import Baseline
torch.set_num_threads(1)
probes.install_tripwires()
baseline = Baseline(torch)
def state():
    return {"rng": torch.get_rng_state().tolist(), "py_random": repr(random.getstate()), "dtype": str(torch.get_default_dtype()),
            "grad": torch.is_grad_enabled(), "submission": "submission" in sys.modules}
before = state()
probes.warm_up_checks()
tripped = list(probes.TRIPWIRE_CALLS)
baseline.restore(probes)
print(json.dumps({"before": before, "after": state(), "tripped": tripped}))
"""


def test_the_warm_up_trips_nothing_and_leaves_the_state_a_fresh_fork_has():
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=HARNESS, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["tripped"] == [], "the warm-up called what the no_shortcuts check records"
    assert seen["after"] == seen["before"]
