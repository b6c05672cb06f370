"""devstack.loopback.LoopbackHTTPServer: the server every stand-in and test server runs on."""

import contextlib
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler

from devstack.loopback import LoopbackHTTPServer


class _Waiting(BaseHTTPRequestHandler):
    """Answers with the owner's word, or waits for the server to stop (path /wait)."""

    server: LoopbackHTTPServer

    def do_GET(self) -> None:
        if self.path == "/wait":
            self.server.owner["waiting"].set()
            woken = self.server.stopping.wait(30)
            self.server.owner["woken"] = woken
            self.server.owner["done"].set()
            return
        body = self.server.owner["word"].encode()
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_a_handler_reaches_its_owner_on_an_ephemeral_port():
    owner = {"word": "hello"}
    with LoopbackHTTPServer(_Waiting, owner) as server:
        assert server.port > 0
        assert server.url("/x") == f"http://127.0.0.1:{server.port}/x"
        assert server.url("/x", host="localhost") == f"http://localhost:{server.port}/x"
        with urllib.request.urlopen(server.url("/"), timeout=5) as answer:
            assert answer.read() == b"hello"


def _ask_unanswered(url: str) -> None:
    # The waiting handler ends without an answer: the connection just closes.
    with contextlib.suppress(ConnectionError):
        urllib.request.urlopen(url, timeout=10)


def test_stopping_wakes_a_waiting_handler_at_once():
    owner = {"waiting": threading.Event(), "done": threading.Event()}
    server = LoopbackHTTPServer(_Waiting, owner).start()
    client = threading.Thread(target=_ask_unanswered, args=(server.url("/wait"),), daemon=True)
    client.start()
    assert owner["waiting"].wait(5)
    server.stop()
    assert owner["done"].wait(5)
    assert owner["woken"] is True


def test_a_server_never_started_stops_at_once():
    server = LoopbackHTTPServer(_Waiting)
    stopper = threading.Thread(target=server.stop, daemon=True)
    stopper.start()
    stopper.join(5)
    assert not stopper.is_alive()
    assert server.socket.fileno() == -1
