"""Framing for the harness channel: each message is a JSON header plus an optional binary blob.

Stdlib only: this module runs inside the sandbox and in the judge.
"""
import errno
import fcntl
import json
import os
import struct
import time

MAGIC = b"GRD1"
# magic, header length, blob length
HEAD = struct.Struct(">4sIQ")
MAX_HEADER = 1 << 20
# A pipe holds 64 KiB by default: a training step's weights or answer (300-500 KB) then crosses in many halves of a
# context switch each, the writer waiting on the reader (1 ms a step on this machine's two cores, 5% of an lm run).
PIPE_BYTES = 1 << 20  # /proc/sys/fs/pipe-max-size by default: the most an unprivileged process may ask
ENOMEM_RETRIES = 100  # 20 ms apart: two seconds for a killed process's memory to come back


class FrameError(ValueError):
    """The byte stream is not a well-formed sequence of frames."""


def encode_frame(header: dict, blob: bytes = b"") -> bytes:
    """Serialise one message."""
    text = json.dumps(header, sort_keys=True).encode()
    return HEAD.pack(MAGIC, len(text), len(blob)) + text + blob


def widen(fd: int) -> None:
    """Let the pipe behind fd hold a whole step's frame; best effort (a pipe keeps its size if refused)."""
    try:
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    except (OSError, AttributeError):  # not a pipe, the user's pipe quota spent, or no F_SETPIPE_SZ here
        pass


def write_frame(fd: int, header: dict, blob: bytes = b"") -> None:
    """Write one message to a file descriptor, retrying short writes and, for a while, a full sandbox's ENOMEM."""
    data = memoryview(encode_frame(header, blob))
    waited = 0
    while data:
        try:
            n = os.write(fd, data)
        except OSError as exc:
            # A pipe's buffer is charged to the sandbox's memory: while a killed memory hog is still exiting, the
            # kernel may refuse it rather than kill another process. The memory comes back within moments.
            if exc.errno != errno.ENOMEM or waited >= ENOMEM_RETRIES:
                raise
            waited += 1
            time.sleep(0.02)
            continue
        data = data[n:]


class FrameReader:
    """Incremental parser: feed bytes, take complete frames; refuses oversized blobs."""

    def __init__(self, max_blob: int):
        self.max_blob = max_blob
        self.buffer = bytearray()

    def feed(self, data: bytes) -> list[tuple[dict, bytes]]:
        """Add bytes and return every frame now complete."""
        self.buffer += data
        frames = []
        while len(self.buffer) >= HEAD.size:
            magic, hlen, blen = HEAD.unpack_from(self.buffer)
            if magic != MAGIC:
                raise FrameError("bad frame magic")
            if hlen > MAX_HEADER or blen > self.max_blob:
                raise FrameError(f"frame too large (header {hlen} B, blob {blen} B)")
            end = HEAD.size + hlen + blen
            if len(self.buffer) < end:
                break
            try:
                header = json.loads(bytes(self.buffer[HEAD.size:HEAD.size + hlen]))
            except ValueError as exc:
                raise FrameError(f"frame header is not JSON: {exc}") from None
            except RecursionError:  # json nests by recursion: a header nested ~1000 deep must not take the reader down
                raise FrameError("frame header is nested too deeply") from None
            if not isinstance(header, dict):
                raise FrameError("frame header is not an object")
            frames.append((header, bytes(self.buffer[HEAD.size + hlen:end])))
            del self.buffer[:end]
        return frames
