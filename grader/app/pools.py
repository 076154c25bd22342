"""The gunicorn worker of `grader serve`: gunicorn's gthread worker with a second thread pool for requests that
carry a body, chosen before any thread takes the connection.

With one pool, a burst of uploads took every thread and the status polls waited behind them; with one pool large
enough for the burst, every back-to-back poll ran at once and they slowed one another (bench/NOTES.md). So reads
(GET, HEAD, OPTIONS) go to a pool of `threads`, as before, and writes to a pool of their own, where each reads its
body and then waits for its turn (grader/app/admission.py) without holding a reader's thread. The method is read
with MSG_PEEK from the socket, in the worker's main loop; a connection with nothing to read yet waits in the
poller, as gthread's own idle connections do, not in a thread.
"""
import selectors
import socket
import time
from concurrent import futures
from functools import partial

from gunicorn.workers.gthread import DEFAULT_WORKER_DATA_TIMEOUT, ThreadWorker

from .admission import BODILESS

PEEK = 16  # bytes enough for the longest method name and its space


class TwoPoolWorker(ThreadWorker):
    """gthread with a pool of `threads` for reads and one of `writers` for writes."""

    # Threads per process for requests with a body: each reads its body in one, then waits for its turn
    # (grader/app/admission.py); enough for a deadline burst's uploads (25 a process in bench/web_load.py)
    writers: int = 28

    def init_process(self):
        self.write_pool = futures.ThreadPoolExecutor(max_workers=self.writers, thread_name_prefix="writes")
        super().init_process()

    def enqueue_req(self, conn):
        """The connection to the pool its request's method says; to the poller while it has sent nothing."""
        head = self.peek(conn)
        if head is None:
            self.wait_in_poller(conn)
            return
        pool = self.tpool if head == b"" or head.split(b" ", 1)[0].decode("latin-1") in BODILESS else self.write_pool
        fs = pool.submit(self.handle, conn)
        fs.add_done_callback(lambda fut: self.method_queue.defer(self.finish_request, conn, fut))

    @staticmethod
    def peek(conn) -> bytes | None:
        """The start of the connection's next request without consuming it; b"" at its end or when it cannot be
        told (gthread then reads it as usual); None when nothing has arrived yet."""
        if conn.cfg.is_ssl:
            return b""
        if conn.parser is not None:  # a kept-alive connection may hold the next request's start already
            buffered = conn.parser.unreader.buf.getvalue()
            if buffered:
                return buffered[:PEEK]
        try:
            return conn.sock.recv(PEEK, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            return None
        except OSError:
            return b""

    def wait_in_poller(self, conn):
        """As gthread does with a connection that sent nothing in time: in the poller until it is readable, and
        closed if it sends nothing for as long as gthread would wait (in a thread, then in the poller)."""
        conn.sock.setblocking(False)
        conn.timeout = time.monotonic() + DEFAULT_WORKER_DATA_TIMEOUT + self.cfg.keepalive
        self.pending_conns.append(conn)
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self.on_pending_socket_readable, conn))

    def handle_quit(self, sig, frame):
        self.write_pool.shutdown(wait=False)
        super().handle_quit(sig, frame)

    def run(self):
        try:
            super().run()
        finally:
            self.write_pool.shutdown(wait=False)
