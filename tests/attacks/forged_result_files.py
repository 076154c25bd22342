"""Forged result files: a wrong attention writes passing reports everywhere it can, and tries to overwrite the job."""
EXPECT = {"attention_sdpa": "fail"}
import glob as _glob
import json as _json
import os as _os

_reference_attention = attention
FORGED = _json.dumps({"checks": [{"id": "attention_sdpa", "status": "pass", "message": "FORGED-FILE"}]})


def attention(q, k, v, mask=None):
    here = _os.getcwd()
    targets = ["result.json", "../result.json", "../../result.json", "../../report.json", "../../job.json",
               "/tmp/result.json", _os.path.join(_os.environ.get("HOME", "/tmp"), "result.json")]
    targets += _glob.glob(_os.path.join(here, "..", "*", "output.txt"))  # other stages' logs
    targets += _glob.glob(_os.path.join(here, "..", "..", "inputs", "*.safetensors"))
    targets += _glob.glob(_os.path.join(here, "..", "..", "harness", "*.py"))
    for path in targets:
        try:
            with open(path, "w") as fh:
                fh.write(FORGED)
        except OSError:
            pass
    out, weights = _reference_attention(q, k, v, mask)
    return out * 1.5, weights  # wrong
