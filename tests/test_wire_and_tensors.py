"""The channel framing and the tensor decoder refuse malformed data instead of trusting it; the tensor encoder
writes what safetensors reads."""
import json
import os
import struct

import pytest
import torch
from safetensors.torch import save

from grader.harness import wire
from grader.harness.tensorbytes import encode_tensors
from grader.harness.wire import FrameError, FrameReader, encode_frame
from grader.tensors import BadTensors, all_finite, decode_tensors


def test_frames_round_trip_across_chunk_boundaries():
    data = encode_frame({"type": "a"}, b"xyz") + encode_frame({"type": "b"})
    reader = FrameReader(max_blob=100)
    frames = [f for i in range(len(data)) for f in reader.feed(data[i:i + 1])]
    assert frames == [({"type": "a"}, b"xyz"), ({"type": "b"}, b"")]


@pytest.mark.parametrize("data, needle", [
    (b"EVIL" + b"\x00" * 12, "magic"),
    (encode_frame({"t": 1}, b"x" * 11), "too large"),
    (b"GRD1" + struct.pack(">IQ", 3, 0) + b"[1]", "not an object"),
])
def test_bad_frames(data, needle):
    with pytest.raises(FrameError, match=needle):
        FrameReader(max_blob=10).feed(data)


def test_decode_accepts_safetensors():
    blob = save({"a": torch.arange(6.0).view(2, 3)})
    assert torch.equal(decode_tensors(blob)["a"], torch.arange(6.0).view(2, 3))


def _forge(header: dict, payload: bytes) -> bytes:
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + payload


@pytest.mark.parametrize("blob, needle", [
    (b"abc", "truncated"),
    (struct.pack("<Q", 10 ** 9) + b"{}", "out of range"),
    (_forge({"a": {"dtype": "OBJ", "shape": [1], "data_offsets": [0, 8]}}, b"\x00" * 8), "unsupported dtype"),
    (_forge({"a": {"dtype": "F64", "shape": [-1], "data_offsets": [0, 8]}}, b"\x00" * 8), "malformed shape"),
    (_forge({"a": {"dtype": "F64", "shape": [4], "data_offsets": [0, 8]}}, b"\x00" * 8), "inconsistent offsets"),
    (_forge({"a": {"dtype": "F64", "shape": [1], "data_offsets": [0, 80]}}, b"\x00" * 8), "inconsistent offsets"),
])
def test_decode_refuses(blob, needle):
    with pytest.raises(BadTensors, match=needle):
        decode_tensors(blob)


# ---- the training step's fast paths (issue 19) -------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
@pytest.mark.parametrize("poison,finite", [(None, True), ("inf", False), ("-inf", False), ("nan", False),
                                           ("inf,-inf", False)])
def test_all_finite_agrees_with_isfinite(dtype, poison, finite):
    t = torch.randn(70_000, dtype=torch.float64).to(dtype)
    for i, value in enumerate((poison or "").split(",") if poison else []):
        t[i * 1000] = float(value)
    assert all_finite(t) is finite is bool(torch.isfinite(t).all())


def test_all_finite_is_not_fooled_by_a_finite_sum_that_overflows():
    huge = torch.full((10,), torch.finfo(torch.float64).max, dtype=torch.float64)  # finite values whose float64 sum is inf
    assert all_finite(huge) is True
    assert all_finite(torch.full((10,), 3e38, dtype=torch.float32)) is True


def test_a_widened_pipe_holds_a_training_step_in_one_write():
    read_fd, write_fd = os.pipe()
    try:
        wire.widen(write_fd)
        os.set_blocking(write_fd, False)
        step = b"x" * 500_000  # the lm track's answer is about 470 kB
        assert os.write(write_fd, step) == len(step), "the writer would wait on the reader"
    finally:
        os.close(read_fd)
        os.close(write_fd)


def test_widen_leaves_what_is_not_a_pipe_alone(tmp_path):
    with open(tmp_path / "f", "wb") as f:
        wire.widen(f.fileno())  # no exception: best effort


def test_encoded_tensors_read_back_as_they_were_whatever_their_dtype_layout_or_sharing():
    base = torch.randn(4, 6, dtype=torch.float64)
    tensors = {"batch": base, "rows": base[1:3, ::2], "transposed": base.t(), "flag": torch.tensor(True),
               "empty": torch.empty(0, 3), "ids": torch.arange(5), "half": torch.randn(3, dtype=torch.bfloat16),
               "bytes": torch.arange(4, dtype=torch.uint8), "weight": torch.nn.Parameter(torch.ones(2, 2)),
               "negated": torch._neg_view(torch.arange(3.0)), "scalar": torch.tensor(2.5, dtype=torch.float32)}
    back = decode_tensors(encode_tensors(tensors))
    assert back.keys() == tensors.keys()
    for name, tensor in tensors.items():
        expected = tensor.detach().resolve_neg()
        assert back[name].dtype == expected.dtype and back[name].shape == expected.shape, name
        assert torch.equal(back[name], expected), name
    assert back["negated"].tolist() == [-0.0, -1.0, -2.0]


def test_what_the_encoder_does_not_know_is_written_by_safetensors_and_refused_as_before():
    odd = {"complex": torch.ones(2, dtype=torch.complex64)}
    assert encode_tensors(odd) == save({k: v.contiguous() for k, v in odd.items()})
    with pytest.raises(BadTensors, match="unsupported dtype"):
        decode_tensors(encode_tensors(odd))
