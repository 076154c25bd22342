"""The channel framing and the tensor decoder refuse malformed data instead of trusting it."""
import json
import struct

import pytest
import torch
from safetensors.torch import save

from grader.harness.wire import FrameError, FrameReader, encode_frame
from grader.tensors import BadTensors, decode_tensors


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
