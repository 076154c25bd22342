"""Segmentation fault through ctypes: a write to address 16; the check crashes and the report names the signal."""
EXPECT = {"attention_sdpa": "crash"}
EXPECT_MESSAGE = {"attention_sdpa": "SIGSEGV"}
import ctypes as _ctypes


def attention(q, k, v, mask=None):
    _ctypes.memmove(16, b"boom", 4)
