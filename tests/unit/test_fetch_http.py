"""sume.net.fetch.SafeHttp against a loopback server: status classes, redirects, caps, TLS,
deadlines, compressed answers and what errors may say about a URL."""

import gzip
import itertools
import json
import threading
import time
import tracemalloc

import pytest

from sume.net.errors import FetchError, PermanentFetchError, RefusedUrl, TransientFetchError
from sume.net.fetch import SafeHttp
from sume.net.policy import UrlPolicy
from tests.httpserver import LoopbackServer, MiB, endless, repeat_chunks, tls_context

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
    assert client.get_text(url, {"authorization": "Bearer tok"}) == (200, "{}")
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


def test_get_text_sends_the_headers_given_and_answers_any_status(server):
    url = server.route("/s", body=b'{"status": "running"}', headers={"content-type": "text/json"})
    sent = {"authorization": "Bearer t", "accept": "application/json"}
    assert http().get_text(url, sent) == (200, '{"status": "running"}')
    assert server.requests[-1].headers["authorization"] == "Bearer t"
    assert server.requests[-1].headers["accept"] == "application/json"
    assert http().get_text(server.route("/n", status=404, body=b"nope")) == (404, "nope")
    # Not JSON is the caller's to judge (the poller reads it as "not yet").
    assert http().get_text(server.route("/h", body=b"<html>")) == (200, "<html>")


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


# -- deadlines ---------------------------------------------------------------------
# Every fetch below would run forever on per-read timeouts alone (an endless
# trickle, a lookup that never returns): that it ends at all, with the deadline's
# error, is the deadline's doing, however slow the machine.


def within(seconds):
    return time.monotonic() + seconds


def ends_at_the_deadline(fetch):
    with pytest.raises(TransientFetchError) as info:
        fetch()
    assert info.value.code == "deadline"
    return info.value


def drain(client, url, **kw):
    with client.open(url, **kw) as response:
        return response.read()


def test_a_trickling_body_ends_at_the_deadline_not_as_a_short_body(server):
    # No content-length: were the cut taken for the end, a truncated
    # artifact would be stored as complete.
    url = server.route("/trickle", body=lambda: endless(b"x"), interval=0.05)
    ends_at_the_deadline(lambda: drain(http(read_timeout=2.0), url, deadline=within(0.4)))


def test_a_trickling_https_body_ends_at_the_deadline(tls_server):
    server, ca = tls_server
    url = server.route("/t", body=lambda: endless(b"x"), interval=0.05)
    url = url.replace("127.0.0.1", "artifacts.test")
    client = SafeHttp(
        LOCAL, 1.0, 2.0, resolver=names({"artifacts.test": ["127.0.0.1"]}), ca_certs=ca
    )
    ends_at_the_deadline(lambda: drain(client, url, deadline=within(0.6)))


def test_a_trickling_header_ends_at_the_deadline(server):
    head = [b"HTTP/1.0 200 OK\r\n", b"x-slow: "]
    url = server.route(
        "/h", body=lambda: itertools.chain(head, endless(b"x")), interval=0.05, raw=True
    )
    ends_at_the_deadline(lambda: http(read_timeout=2.0).get_text(url, deadline=within(0.4)))


def test_without_a_deadline_the_total_timeout_applies(server):
    url = server.route("/trickle", body=lambda: endless(b"x"), interval=0.05)
    ends_at_the_deadline(lambda: http(read_timeout=2.0, total_timeout=0.4).get_text(url))


def test_a_slow_name_lookup_ends_at_the_deadline(server):
    url = server.route("/a", body=b"a").replace("127.0.0.1", "slow-dns.test")
    released = threading.Event()

    def resolver(host, port):
        released.wait()  # until the test ends
        return ["127.0.0.1"]

    try:
        ends_at_the_deadline(lambda: drain(http(resolver=resolver), url, deadline=within(0.2)))
    finally:
        released.set()
    assert server.hits["/a"] == 0


def test_a_deadline_already_past_sends_nothing(server):
    url = server.route("/a", body=b"a")
    ends_at_the_deadline(lambda: drain(http(), url, deadline=time.monotonic()))
    assert server.hits["/a"] == 0


def test_a_redirect_body_is_never_read(server):
    sent = []

    def huge():
        for chunk in repeat_chunks(256 * MiB):
            sent.append(len(chunk))
            yield chunk

    server.route("/final", body=b"done")
    server.route("/hop", status=302, headers={"location": "/final"}, body=huge, length=256 * MiB)
    assert drain(http(), server.url("/hop")) == b"done"
    assert server.wait_answered("/hop")
    # What the server got into socket buffers before the connection closed.
    assert sum(sent) < 32 * MiB


# -- compressed answers --------------------------------------------------------------


def gzipped(data):
    return gzip.compress(data, compresslevel=9)


def test_a_gzip_status_answer_is_decoded_here(server):
    body = json.dumps({"status": "running", "pad": "p" * 5000}).encode()
    url = server.route("/s", body=gzipped(body), headers={"content-encoding": "gzip"})
    assert http().get_text(url) == (200, body.decode())
    assert server.requests[-1].headers["accept-encoding"] == "gzip"


def test_a_gzip_bomb_is_refused_without_being_held(server):
    # 128 gzip members of 1 MiB of zeros each: 128 MiB for about 130 KB sent.
    bomb = gzipped(bytes(MiB)) * 128
    url = server.route("/bomb", body=bomb, headers={"content-encoding": "gzip"})
    tracemalloc.start()
    try:
        with pytest.raises(PermanentFetchError) as info:
            http().get_text(url, max_bytes=1 * MiB)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert info.value.code == "too_large"
    assert peak < 16 * MiB


def test_an_encoding_not_asked_for_is_refused(server):
    url = server.route("/br", body=b"\x1b\x00", headers={"content-encoding": "br"})
    with pytest.raises(PermanentFetchError) as info:
        http().get_text(url)
    assert info.value.code == "unsupported_encoding"


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "br", "gzip, identity"])
def test_an_artifact_is_asked_for_unencoded_and_an_encoded_answer_refused(server, encoding):
    url = server.route("/a.mp4", body=gzipped(b"video"), headers={"content-encoding": encoding})
    with pytest.raises(PermanentFetchError) as info, http().open(url):
        pass
    assert info.value.code == "unsupported_encoding"
    assert server.requests[-1].headers["accept-encoding"] == "identity"


def test_an_artifact_labelled_identity_is_read_as_it_came(server):
    url = server.route("/a.mp4", body=b"video", headers={"content-encoding": "Identity"})
    assert drain(http(), url) == b"video"


def test_a_range_answered_in_a_content_coding_is_refused(server):
    url = server.route("/a.bin", body=b"0123456789")
    with http().open(url) as first:
        source = first.endpoint
    part = gzipped(b"2345")
    server.route("/a.bin", 206, {"content-range": "bytes 2-5/10", "content-encoding": "gzip"}, part)
    deadline = time.monotonic() + 5
    with (
        pytest.raises(PermanentFetchError) as info,
        http().open_range(source, 2, 6, '"v1"', deadline=deadline),
    ):
        pass
    assert info.value.code == "unsupported_encoding"
    assert server.requests[-1].headers["accept-encoding"] == "identity"


# -- the whole object, or no object -----------------------------------------------------


@pytest.mark.parametrize(
    ("status", "headers"),
    [
        (206, {"content-range": "bytes 0-3/10"}),
        (206, {}),
        (200, {"content-range": "bytes 0-3/10"}),
    ],
)
def test_a_part_answered_to_a_request_for_the_whole_object_is_refused(server, status, headers):
    url = server.route("/a.mp4", status, headers, b"0123")
    with pytest.raises(PermanentFetchError) as info, http().open(url):
        pass
    assert (info.value.code, info.value.status) == ("partial_content", status)
    assert "range" not in server.requests[-1].headers


@pytest.mark.parametrize("length", ["\u00b2", "\u00b9\u00b3", "+4", "1_0", "0x4", "-4", "", "4.0"])
def test_a_length_that_is_not_ascii_digits_is_refused(server, length):
    url = server.route("/a.mp4", headers={"content-length": length}, body=lambda: [b"data"])
    with pytest.raises(PermanentFetchError) as info, http().open(url):
        pass
    assert info.value.code == "invalid_content_length"


def test_two_lengths_are_refused(server):
    answer = b"HTTP/1.0 200 OK\r\ncontent-length: 4\r\ncontent-length: 4\r\n\r\ndata"
    url = server.route("/twice", body=lambda: [answer], raw=True)
    with pytest.raises(PermanentFetchError) as info, http().open(url):
        pass
    assert info.value.code == "invalid_content_length"


def test_a_length_with_spaces_around_its_digits_is_read(server):
    url = server.route("/a.mp4", headers={"content-length": " 4 "}, body=lambda: [b"data"])
    with http().open(url) as response:
        assert response.content_length == 4
        assert response.read() == b"data"


# -- no secrets from URLs ---------------------------------------------------------------

SIGNED = "?X-Amz-Signature=s3cr3t&X-Amz-Credential=AKIDEXAMPLE"


def assert_no_secret(error, url):
    redacted = url.split("?")[0]
    assert error.url == redacted
    for text in (str(error), repr(error), error.message, json.dumps(error.as_dict())):
        assert "s3cr3t" not in text
        assert "AKIDEXAMPLE" not in text


@pytest.mark.parametrize("status", [404, 503])
def test_fetch_errors_carry_the_redacted_url_only(server, status):
    url = server.route("/gone.mp4" + SIGNED, status=status)
    with pytest.raises(FetchError) as info:
        drain(http(), url)
    assert info.value.status == status
    assert_no_secret(info.value, url)
    assert info.value.message == f"HTTP {status} from {server.url('/gone.mp4')}"


def test_refused_urls_and_redirect_targets_are_redacted_too(server):
    refused = "ftp://cdn.example/a.mp4" + SIGNED
    with pytest.raises(RefusedUrl) as info:
        drain(http(), refused)
    assert_no_secret(info.value, refused)
    target = server.url("/secret", host="internal.test") + SIGNED
    hop = server.redirect("/hop", target)
    policy = UrlPolicy(allow_http=True, allow_private_hosts=True, allowed_hosts=("127.0.0.1",))
    with pytest.raises(RefusedUrl) as info:
        drain(http(policy), hop)
    assert_no_secret(info.value, target)
