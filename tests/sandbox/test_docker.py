"""The docker backend: every limit in the container's configuration, the job's tarball, and removal whatever happens."""
import io
import tarfile

import pytest

from grader.judge import Options, grade_file
from grader.sandbox import Limits
from grader.sandbox.docker import DockerSandbox, SandboxUnavailable, job_tar
from tests.sandbox.support import require_backend

LIMITS = Limits(memory_mb=1536, pids=48, cpus=0.5, scratch_mb=32, files=128)


@pytest.fixture(scope="module")
def config():
    pytest.importorskip("docker")
    return DockerSandbox().container_config(LIMITS, "run-id")


@pytest.mark.parametrize("key,value", [
    ("network_mode", "none"),
    ("read_only", True),
    ("cap_drop", ["ALL"]),
    ("security_opt", ["no-new-privileges"]),
    ("mem_limit", "1536m"),
    ("memswap_limit", "1536m"),  # memory = memory + swap: no swap
    ("pids_limit", 48),
    ("nano_cpus", 500_000_000),
    ("user", "10001:10001"),
    ("ipc_mode", "private"),
])
def test_container_config_sets(config, key, value):
    assert config[key] == value, f"{key} = {config.get(key)!r}"


def test_container_config_shares_no_host_path(config):
    assert "volumes" not in config and all(m["Type"] != "bind" for m in config["mounts"]), config["mounts"]


def test_container_config_caps_scratch_and_tmp(config):
    assert "size=32m" in config["tmpfs"]["/job/scratch"] and "size=" in config["tmpfs"]["/tmp"], config["tmpfs"]


def test_container_config_carries_a_deadline_for_the_stale_sweep():
    pytest.importorskip("docker")
    config = DockerSandbox().container_config(LIMITS, "run-id", deadline=1234.5)
    assert config["labels"]["grader.sandbox.deadline"] == "1234"


def test_container_config_caps_files_and_core(config):
    limits = {u["Name"]: (u["Soft"], u["Hard"]) for u in config["ulimits"]}
    assert limits["core"] == (0, 0) and limits["nofile"] == (128, 128) and limits["fsize"] == (32 << 20, 32 << 20)


def test_job_tar_is_root_owned_read_only_and_leaves_scratch_out(tmp_path):
    (tmp_path / "harness").mkdir()
    (tmp_path / "harness" / "main.py").write_text("print()")
    (tmp_path / "scratch").mkdir()
    (tmp_path / "scratch" / "junk").write_text("x")
    (tmp_path / "job.json").write_text("{}")
    with tarfile.open(fileobj=io.BytesIO(job_tar(tmp_path))) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert set(members) == {"harness", "harness/main.py", "job.json", "init.py"}, set(members)
    assert all(m.uid == 0 and m.gid == 0 and not m.mode & 0o022 for m in members.values())


class Capturing(DockerSandbox):
    """Remembers the run id of each container it configures."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.run_ids = []

    def container_config(self, limits, run_id, deadline=0.0):
        self.run_ids.append(run_id)
        return super().container_config(limits, run_id, deadline)


def containers_of(run_id: str) -> list:
    import docker
    client = docker.from_env()
    try:
        return client.containers.list(all=True, filters={"label": f"grader.sandbox.run={run_id}"})
    finally:
        client.close()


@pytest.mark.docker
def test_container_is_removed_when_the_job_cannot_be_copied_in(monkeypatch, tmp_path):
    require_backend("docker")
    sandbox = Capturing()
    monkeypatch.setattr("grader.sandbox.docker.job_tar", lambda job_dir: b"not a tarball")
    (tmp_path / "scratch").mkdir()
    with pytest.raises(Exception):
        sandbox.run(tmp_path, Limits(), 30)
    assert sandbox.run_ids and containers_of(sandbox.run_ids[0]) == []


@pytest.mark.docker
def test_missing_image_is_an_installation_error_not_a_student_failure(tmp_path):
    require_backend("docker")
    (tmp_path / "scratch").mkdir()
    with pytest.raises(SandboxUnavailable, match="build-runner-image.sh"):
        DockerSandbox(image="grader-runner:does-not-exist").run(tmp_path, Limits(), 30)


@pytest.mark.docker
def test_reference_runs_as_the_unprivileged_user_with_no_network():
    require_backend("docker")
    sandbox = Capturing()
    report = grade_file("submissions/reference_lm.py", Options(only=("split_heads",)), sandbox=sandbox)
    assert report["checks"][0]["status"] == "pass", report["checks"]
    assert report["sandbox"]["backend"] == "docker"
    assert containers_of(sandbox.run_ids[0]) == []
