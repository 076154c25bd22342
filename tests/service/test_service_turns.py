"""A real `grader serve` with one worker process and one thread for reads (grader/app/pools.py): clients that
announce a body and stall (a form post, an upload) hold a thread for writes and no turn, and clients that connect
and send nothing wait in the poller, so a read is answered meanwhile; pipelined reads and writes on one connection
are each answered. With WEB_TURNS=false (gunicorn's gthread) the same stalls hold the only thread and the read
waits: what the pools and turns are for.

Real sockets against the real server; the stalled clients send 7 bytes of a 100 kB body."""
import contextlib
import os
import re
import signal
import socket

import pytest

from .svc_cluster import wait_for
from .test_service_instance import start_serve

STALLS = (b"POST /signin HTTP/1.1\r\nHost: t\r\nContent-Type: application/x-www-form-urlencoded\r\n"
          b"Content-Length: 100000\r\n\r\nuser=ab",
          b"POST /api/v1/assignments/cap/submissions?filename=m.py HTTP/1.1\r\nHost: t\r\n"
          b"Content-Type: text/x-python\r\nContent-Length: 100000\r\n\r\nimport")


def page(port: int, timeout: float) -> bytes:
    """The first bytes of GET /signin's answer, or b"" when none came within `timeout` seconds."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as client:
        client.sendall(b"GET /signin HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        client.settimeout(timeout)
        try:
            return client.recv(12)
        except TimeoutError:
            return b""


@pytest.fixture
def one_turn(tmp_path, request):
    """`grader serve --workers 1 --threads 1` with WEB_TURNS as the test's parameter, answering; its port."""
    proc, port, _ = start_serve(tmp_path, ("--workers", "1", "--threads", "1"), WEB_TURNS=request.param)

    def up():
        assert proc.poll() is None, (tmp_path / "serve.log").read_text()
        try:
            return page(port, 5).startswith(b"HTTP/1.1 200")
        except OSError:
            return False
    try:
        wait_for(up, 60, what="grader serve to answer")
        yield port
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


@contextlib.contextmanager
def held_open(port: int, heads):
    """Connections to the server, each having sent its head (b"": nothing), closed on leaving."""
    clients = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in heads]
    try:
        for client, head in zip(clients, heads):
            if head:
                client.sendall(head)
        yield
    finally:
        for client in clients:
            client.close()


@pytest.mark.parametrize("one_turn", ["true"], indirect=True)
def test_stalled_senders_hold_no_turn(one_turn):
    with held_open(one_turn, STALLS):
        # Generous: a liveness bound on a loaded machine, not a latency figure (bench/web_load.py measures those).
        assert page(one_turn, 20).startswith(b"HTTP/1.1 200"), "a stalled sender held the only turn"


@pytest.mark.parametrize("one_turn", ["false"], indirect=True)
def test_without_turns_a_stalled_sender_holds_the_only_thread(one_turn):
    with held_open(one_turn, STALLS[:1]):
        assert page(one_turn, 3) == b"", "answered while the only thread waited for a stalled body"
    assert page(one_turn, 20).startswith(b"HTTP/1.1 200")  # the stalled body ended: the thread is free again


@pytest.mark.parametrize("one_turn", ["true"], indirect=True)
def test_connections_that_send_nothing_hold_no_thread(one_turn):
    with held_open(one_turn, [b""] * 3):
        # gthread waits up to 5 s for each one's first bytes in a thread: 15 s with the only thread
        assert page(one_turn, 10).startswith(b"HTTP/1.1 200"), "idle connections held the only thread"


@pytest.mark.parametrize("one_turn", ["false"], indirect=True)
def test_without_the_pools_a_connection_that_sends_nothing_holds_the_only_thread(one_turn):
    with held_open(one_turn, [b""]):
        assert page(one_turn, 2) == b"", "answered while gthread's only thread waited for an idle connection"


@pytest.mark.parametrize("one_turn", ["true"], indirect=True)
def test_pipelined_reads_and_writes_on_one_connection_are_each_answered(one_turn):
    form = b"username=nobody&password=wrong"
    requests = [b"GET /signin HTTP/1.1\r\nHost: t\r\n\r\n",
                b"POST /signin HTTP/1.1\r\nHost: t\r\nContent-Type: application/x-www-form-urlencoded\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(form), form),
                b"GET /signin HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"]
    with socket.create_connection(("127.0.0.1", one_turn), timeout=20) as client:
        client.sendall(b"".join(requests))  # one send: the next request is already read when the first ends
        answer = b""
        while chunk := client.recv(65536):
            answer += chunk
    statuses = re.findall(rb"HTTP/1\.1 (\d{3}) ", answer)
    assert len(statuses) == 3, answer[:2000]
    assert statuses[0] == statuses[2] == b"200", statuses
