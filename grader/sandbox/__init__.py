"""Sandbox backends behind one interface; the judge and its checks never depend on which runs."""
from .base import Limits, Sandbox, SandboxRun
from .process import ProcessSandbox

__all__ = ["Limits", "Sandbox", "SandboxRun", "ProcessSandbox", "make_sandbox"]


def make_sandbox(backend: str = "process") -> Sandbox:
    """The sandbox named by configuration."""
    if backend == "process":
        return ProcessSandbox()
    raise ValueError(f"unknown sandbox backend {backend!r} (known: process)")
