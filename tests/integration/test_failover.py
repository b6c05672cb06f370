"""devstack.regions.Failover: Route 53's failover record as the two-region tests play it."""

from __future__ import annotations

import socket
import time

from devstack.regions import Failover

SECONDARY = "http://127.0.0.1:9/webhooks/sume"


def listener(port: int = 0) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen()
    return sock


def wait_for(failover: Failover, url: str, bound: float = 10.0) -> bool:
    deadline = time.monotonic() + bound
    while failover.resolve() != url and time.monotonic() < deadline:
        time.sleep(0.02)
    return failover.resolve() == url


def test_fails_over_when_the_primary_stops_answering_and_back_when_it_returns() -> None:
    primary_socket = listener()
    port = primary_socket.getsockname()[1]
    primary = f"http://127.0.0.1:{port}/webhooks/sume"
    with Failover(primary, SECONDARY, interval_seconds=0.02, threshold=3) as dns:
        time.sleep(0.2)  # many checks, all passing
        assert dns.resolve() == primary
        assert dns.failed_over_at is None

        primary_socket.close()
        assert wait_for(dns, SECONDARY)
        assert dns.failed_over_at is not None

        primary_socket = listener(port)
        try:
            assert wait_for(dns, primary)
        finally:
            primary_socket.close()
