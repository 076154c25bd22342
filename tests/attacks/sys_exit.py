"""sys.exit(0) inside attention: SystemExit is not an Exception, it must still be caught and named."""
EXPECT = {"attention_sdpa": "error"}
EXPECT_MESSAGE = {"attention_sdpa": "SystemExit"}
import sys as _sys


def attention(q, k, v, mask=None):
    _sys.exit(0)
