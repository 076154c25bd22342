"""Connections to local ports: attention tries the test's listeners (TCP, UDP, unix, abstract) and the host's services."""
EXPECT = {"attention_sdpa": "error"}
EXPECT_MESSAGE = {"attention_sdpa": "reached []"}
import socket as _socket


def _try(family, kind, address):
    try:
        s = _socket.socket(family, kind)
    except OSError as exc:
        return f"socket refused ({exc.errno})"
    try:
        s.settimeout(1.0)
        if kind == _socket.SOCK_DGRAM:
            s.sendto(b"ATTACK", address)
            return "sent"
        s.connect(address)
        s.sendall(b"ATTACK")
        return "connected"
    except OSError as exc:
        return f"failed ({exc.errno})"
    finally:
        s.close()


def attention(q, k, v, mask=None):
    targets = [
        (_socket.AF_INET, _socket.SOCK_STREAM, ("127.0.0.1", __TCP_PORT__)),
        (_socket.AF_INET6, _socket.SOCK_STREAM, ("::1", __TCP_PORT__)),
        (_socket.AF_INET, _socket.SOCK_DGRAM, ("127.0.0.1", __UDP_PORT__)),
        (_socket.AF_UNIX, _socket.SOCK_STREAM, "__UNIX_PATH__"),
        (_socket.AF_UNIX, _socket.SOCK_STREAM, "\0__ABSTRACT_NAME__"),
        (_socket.AF_INET, _socket.SOCK_STREAM, ("127.0.0.1", 5432)),  # PostgreSQL
        (_socket.AF_INET, _socket.SOCK_STREAM, ("127.0.0.1", 6379)),  # Redis
        (_socket.AF_UNIX, _socket.SOCK_STREAM, "/var/run/postgresql/.s.PGSQL.5432"),
        (_socket.AF_UNIX, _socket.SOCK_STREAM, "/var/run/docker.sock"),
    ]
    results = {str(address): _try(family, kind, address) for family, kind, address in targets}
    # A datagram "sent" proves nothing (it may land on the sandbox's own loopback): the test's listener tells.
    reached = sorted(a for a, r in results.items() if r == "connected")
    # Loopback targets are out of reach in any network namespace; the interfaces tell a sandbox with no network
    # from one on a bridge (where the host's other addresses would be a route away).
    try:
        with open("/proc/net/dev") as fh:
            interfaces = sorted(line.split(":")[0].strip() for line in fh.readlines()[2:])
    except OSError as exc:
        interfaces = [f"unreadable ({exc.errno})"]
    raise RuntimeError(f"reached {reached}; interfaces {interfaces}; of {results}"[:900])
