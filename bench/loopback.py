"""A threading HTTP server on 127.0.0.1 for the bench's stand-ins (artifact origin, status URLs)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # Many polls or ranged parts may connect at once.
    request_queue_size = 128
    owner: Any = None


class LoopbackHttp:
    """Serves ``handler`` on an ephemeral loopback port from a daemon thread.

    The handler reaches the object that owns the server as ``self.server.owner``.
    ``stopping`` is set when the ``with`` block ends, so handlers that wait
    (paced or delayed answers) can stop at once.
    """

    def __init__(self, handler: type[BaseHTTPRequestHandler], owner: Any) -> None:
        self.stopping = threading.Event()
        self._httpd = _Server(("127.0.0.1", 0), handler)
        self._httpd.owner = owner
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
