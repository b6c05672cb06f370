"""devstack.regions.Failover: Route 53's failover record as the two-region tests play it,
driven by the primary's ``GET /health`` as the deployed health check is."""

from __future__ import annotations

import json
import time
from http.server import BaseHTTPRequestHandler
from typing import Any

from devstack.loopback import LoopbackHTTPServer
from devstack.regions import Failover
from sume.core.names import HEALTH_PATH, WEBHOOK_PATH

SECONDARY = f"http://127.0.0.1:9{WEBHOOK_PATH}"


class _Api(BaseHTTPRequestHandler):
    """A region's API: ``/health`` answers what its owner says, anything else 404."""

    server: LoopbackHTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        status = self.server.owner["health"] if self.path == HEALTH_PATH else 404
        body = json.dumps({"status": "ok" if status == 200 else "unavailable"}).encode()
        self.send_response(status)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def api(state: dict[str, int], port: int = 0) -> LoopbackHTTPServer:
    server = LoopbackHTTPServer(_Api, state, port=port)
    server.allow_reuse_address = True
    return server


def wait_for(failover: Failover, url: str) -> bool:
    while failover.resolve() != url:
        time.sleep(0.02)  # pytest's timeout bounds a hang, however slow the machine
    return True


def test_fails_over_when_the_primary_stops_answering_and_back_when_it_returns() -> None:
    state = {"health": 200}
    server = api(state).start()
    port = server.port
    primary = server.url(WEBHOOK_PATH)
    with Failover(primary, SECONDARY, interval_seconds=0.02, threshold=3) as dns:
        time.sleep(0.2)  # many checks, all passing
        assert dns.resolve() == primary
        assert dns.failed_over_at is None

        server.stop()
        assert wait_for(dns, SECONDARY)
        assert dns.failed_over_at is not None

        server = api(state, port).start()
        try:
            assert wait_for(dns, primary)
        finally:
            server.stop()


def test_a_primary_whose_health_route_fails_is_failed_over_though_its_port_answers() -> None:
    # The API is up (a TCP check would pass); its receiver cannot read the table.
    state = {"health": 200}
    with api(state) as server:
        primary = server.url(WEBHOOK_PATH)
        with Failover(primary, SECONDARY, interval_seconds=0.02, threshold=3) as dns:
            time.sleep(0.2)
            assert dns.resolve() == primary

            state["health"] = 503
            assert wait_for(dns, SECONDARY)

            state["health"] = 200
            assert wait_for(dns, primary)
