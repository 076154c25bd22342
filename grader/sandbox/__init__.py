"""Sandbox backends behind one interface; the judge and its checks never depend on which runs."""
import os
import time

from .base import Limits, Sandbox, SandboxRun
from .process import ProcessSandbox

__all__ = ["Limits", "Sandbox", "SandboxRun", "ProcessSandbox", "make_sandbox", "choose_backend", "BACKENDS"]

BACKENDS = ("auto", "docker", "process")
_AUTO_CACHE: dict = {}
AUTO_TTL_S = 60.0


def choose_backend(backend: str = "auto") -> tuple[str, str]:
    """(backend name, why): `auto` takes docker when an engine answers and the runner image is there."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown sandbox backend {backend!r} (known: {', '.join(BACKENDS)})")
    if backend != "auto":
        return backend, "configured"
    image = os.environ.get("GRADER_RUNNER_IMAGE")
    cached = _AUTO_CACHE.get(image)
    if cached and time.monotonic() - cached[0] < AUTO_TTL_S:
        return cached[1]
    from . import docker as docker_backend
    why = docker_backend.engine_answers() or docker_backend.image_present(image or docker_backend.DEFAULT_IMAGE)
    choice = ("process", why) if why else ("docker", "a docker engine answers and the runner image is present")
    _AUTO_CACHE[image] = (time.monotonic(), choice)
    return choice


def make_sandbox(backend: str | None = None, **config) -> Sandbox:
    """The sandbox named by configuration: `process`, `docker`, or `auto` (also GRADER_SANDBOX, default auto).

    config goes to the backend: image= for docker; python=, bwrap=, seccomp=, cgroup=, allow_weak=, fork= for process.
    """
    backend = backend or os.environ.get("GRADER_SANDBOX", "auto")
    name, _ = choose_backend(backend)
    if name == "docker":
        from .docker import DockerSandbox
        return DockerSandbox(**{k: v for k, v in config.items() if k in ("image", "python", "uid")})
    return ProcessSandbox(**{k: v for k, v in config.items()
                             if k in ("python", "bwrap", "seccomp", "cgroup", "allow_weak", "fork")})
