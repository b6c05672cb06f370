"""sume.fetch.SafeHttp against a loopback server: status classes, redirects, caps, TLS."""

import pytest

from sume.fetch import PermanentFetchError, RefusedUrl, SafeHttp, TransientFetchError
from sume.settings import UrlPolicy
from tests.httpserver import LoopbackServer, repeat_chunks, tls_context

LOCAL = UrlPolicy(allow_http=True, allow_private_hosts=True, allowed_hosts=())
STRICT = UrlPolicy(allow_http=False, allow_private_hosts=False, allowed_hosts=())


class names:
    """A resolver for test hostnames that remembers what it was asked."""

    def __init__(self, mapping):
        self.mapping = mapping
        self.calls = []

    def __call__(self, host, port):
        self.calls.append(host)
        return self.mapping[host]


@pytest.fixture
def server():
    with LoopbackServer() as s:
        yield s


def http(policy=LOCAL, read_timeout=2.0, **kw):
    return SafeHttp(policy, 1.0, read_timeout, **kw)


def test_streams_a_body_with_its_content_type(server):
    url = server.route("/a.bin", body=b"x" * 200_000, headers={"content-type": "video/mp4"})
    with http().open(url) as response:
        assert response.status == 200
        assert response.content_type == "video/mp4"
        assert response.content_length == 200_000
        chunks = list(response.iter_bytes(65536))
    assert b"".join(chunks) == b"x" * 200_000
    assert len(chunks) > 1


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410])
def test_client_errors_are_permanent(server, status):
    url = server.route("/e", status=status)
    with pytest.raises(PermanentFetchError) as info, http().open(url):
        pass
    assert (info.value.code, info.value.status) == (f"http_{status}", status)


@pytest.mark.parametrize("status", [500, 502, 503, 429, 408])
def test_server_errors_and_throttling_are_transient(server, status):
    url = server.route("/e", status=status)
    with pytest.raises(TransientFetchError) as info, http().open(url):
        pass
    assert info.value.code == f"http_{status}"


def test_a_slow_answer_times_out_as_transient(server):
    url = server.route("/slow", body=b"late", delay=3.0)
    with pytest.raises(TransientFetchError) as info, http(read_timeout=0.2).open(url):
        pass
    assert info.value.code == "timeout"


def test_connection_refused_is_transient(server):
    url = server.url("/x")
    server.__exit__(None, None, None)
    with pytest.raises(TransientFetchError) as info, http().open(url):
        pass
    assert info.value.code == "connection_error"


def test_loopback_and_http_are_refused_by_the_default_policy(server):
    url = server.route("/a", body=b"a")
    with pytest.raises(RefusedUrl) as scheme, http(STRICT).open(url):
        pass
    assert scheme.value.code == "refused_scheme"
    https_policy = UrlPolicy(allow_http=True, allow_private_hosts=False, allowed_hosts=())
    with pytest.raises(RefusedUrl) as address, http(https_policy).open(url):
        pass
    assert address.value.code == "refused_address"
    assert server.hits["/a"] == 0


def test_relative_redirects_are_followed(server):
    server.route("/final", body=b"done")
    url = server.redirect("/start", "/middle", status=301)
    server.redirect("/middle", server.url("/final"), status=307)
    with http().open(url) as response:
        assert response.read() == b"done"
        assert response.url == server.url("/final")


def test_redirect_to_a_host_off_the_allow_list_is_refused(server):
    policy = UrlPolicy(allow_http=True, allow_private_hosts=True, allowed_hosts=("127.0.0.1",))
    server.route("/secret", body=b"secret")
    url = server.redirect("/hop", server.url("/secret", host="internal.test"))
    client = http(policy, resolver=names({"internal.test": ["127.0.0.1"]}))
    with pytest.raises(RefusedUrl) as info, client.open(url):
        pass
    assert info.value.code == "refused_host"
    assert server.hits["/secret"] == 0


def test_redirect_to_the_metadata_service_is_refused_even_in_local_mode(server):
    url = server.redirect("/hop", "http://169.254.169.254/latest/meta-data/iam/")
    with pytest.raises(RefusedUrl, match="metadata"), http().open(url):
        pass


def test_redirect_loops_end(server):
    url = server.redirect("/loop", "/loop")
    with pytest.raises(PermanentFetchError) as info, http(max_redirects=3).open(url):
        pass
    assert info.value.code == "too_many_redirects"
    assert server.hits["/loop"] == 4


def test_credentials_do_not_follow_a_redirect_to_another_origin(server):
    server.route("/elsewhere", body=b"{}")
    url = server.redirect("/status", server.url("/elsewhere", host="other.test"))
    client = http(resolver=names({"other.test": ["127.0.0.1"]}))
    assert client.get_json(url, {"authorization": "Bearer tok"}) == {}
    first, second = server.requests
    assert first.headers["authorization"] == "Bearer tok"
    assert "authorization" not in second.headers


def test_connects_to_the_checked_address_and_keeps_the_host_name(server):
    url = server.route("/a", body=b"a").replace("127.0.0.1", "artifacts.test")
    resolver = names({"artifacts.test": ["127.0.0.1"]})
    with http(resolver=resolver).open(url) as response:
        assert response.read() == b"a"
    # One lookup per hop: no second resolution a rebinding DNS could answer differently.
    assert resolver.calls == ["artifacts.test"]
    assert server.requests[0].headers["host"] == f"artifacts.test:{server.port}"


def test_declared_size_over_the_cap_is_refused_before_reading(server):
    url = server.route("/big", body=lambda: repeat_chunks(10_000_000), length=10_000_000)
    with pytest.raises(PermanentFetchError) as info, http().open(url, max_bytes=1000):
        pass
    assert info.value.code == "too_large"


def test_undeclared_size_over_the_cap_is_refused_while_reading(server):
    url = server.route("/big", body=lambda: repeat_chunks(3_000_000))
    with pytest.raises(PermanentFetchError) as info, http().open(url, max_bytes=1_000_000) as r:
        r.read()
    assert info.value.code == "too_large"


def test_get_json_and_get_text(server):
    url = server.route("/s", body=b'{"status": "running"}', headers={"content-type": "text/json"})
    assert http().get_json(url, {"authorization": "Bearer t"}) == {"status": "running"}
    assert server.requests[-1].headers["authorization"] == "Bearer t"
    assert server.requests[-1].headers["accept"] == "application/json"
    assert http().get_text(server.route("/n", status=404, body=b"nope")) == (404, "nope")
    with pytest.raises(PermanentFetchError) as info:
        http().get_json(server.route("/h", body=b"<html>"))
    assert info.value.code == "invalid_json"


@pytest.fixture
def tls_server(tmp_path):
    context, ca = tls_context(tmp_path, ["artifacts.test"])
    with LoopbackServer(tls=context) as s:
        yield s, ca


def test_https_verifies_the_certificate_for_the_host_name(tls_server):
    server, ca = tls_server
    url = server.route("/a", body=b"tls").replace("127.0.0.1", "artifacts.test")
    policy = UrlPolicy(allow_http=False, allow_private_hosts=True, allowed_hosts=())
    resolver = names({"artifacts.test": ["127.0.0.1"], "impostor.test": ["127.0.0.1"]})
    client = SafeHttp(policy, 1.0, 2.0, resolver=resolver, ca_certs=ca)
    with client.open(url) as response:
        assert response.read() == b"tls"
    with (
        pytest.raises(PermanentFetchError) as info,
        client.open(url.replace("artifacts", "impostor")),
    ):
        pass
    assert info.value.code == "tls_certificate"
