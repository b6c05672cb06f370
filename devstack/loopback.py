"""The one loopback HTTP server: the local stack's API Gateway, the Sume simulator, the bench's
stand-ins (artifact origin, status URLs) and the tests' servers all run on it.

Each keeps its own request handler; this owns the server's life: bind (port 0 is
ephemeral), serve from a daemon thread, one daemon thread per connection, stop.
A handler reaches the object it serves for as ``self.server.owner``, and a
handler that waits (a paced or delayed answer) waits on ``self.server.stopping``,
so it ends with the server instead of holding up the exit.
"""

from __future__ import annotations

import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

HOST = "127.0.0.1"
# How soon serve_forever notices a stop; a wake-up this often costs nothing.
POLL_SECONDS = 0.05


class LoopbackHTTPServer(ThreadingHTTPServer):
    """Serves ``handler`` from a daemon thread between ``start`` and ``stop`` (or in a ``with``).

    ``tls`` wraps the listening socket, so connections speak HTTPS.
    """

    daemon_threads = True
    # Bursts of concurrent deliveries, polls or ranged parts must not wait on a
    # full accept queue.
    request_queue_size = 128

    def __init__(
        self,
        handler: type[BaseHTTPRequestHandler],
        owner: Any = None,
        *,
        host: str = HOST,
        port: int = 0,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        super().__init__((host, port), handler)
        if tls is not None:
            self.socket = tls.wrap_socket(self.socket, server_side=True)
        self.scheme = "https" if tls else "http"
        self.owner = owner
        self.stopping = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def host(self) -> str:
        return str(self.server_address[0])

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def url(self, path: str = "", host: str | None = None) -> str:
        return f"{self.scheme}://{host or self.host}:{self.port}{path}"

    def start(self) -> Self:
        self._thread = threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": POLL_SECONDS}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket; safe whether or not it was started."""
        self.stopping.set()
        if self._thread is not None:
            # shutdown waits for serve_forever: never call it on a server not serving.
            self.shutdown()
            self._thread.join()
            self._thread = None
        self.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (a timeout, a size cap, a closed keep-alive
        # connection) is routine here: no traceback for it. Anything else is a bug.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class Served:
    """An object its ``http`` server serves for: a ``with`` block on it is the server's life."""

    http: LoopbackHTTPServer

    def __enter__(self) -> Self:
        self.http.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.stop()


def moto_server(port: int) -> Any:
    """moto's threaded server on loopback, started (port 0: ephemeral).

    Its stop does not wait for the requests under way: socketserver joins every
    request thread at close, and an event source's long poll is served to its end
    (``devstack.eventsources``), which would hold each stop for seconds.
    """
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address=HOST, port=port, verbose=False)
    server.start()
    # A ThreadedWSGIServer, typed as the base class, which has no threads to join.
    threaded: Any = server._server
    threaded.block_on_close = False
    return server
