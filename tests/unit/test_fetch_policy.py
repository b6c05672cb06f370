"""The URL rule of sume.net.policy: which URLs and addresses may be fetched (SSRF)."""

import ipaddress
import socket

import pytest

from sume.net.errors import PermanentFetchError, RefusedUrl, TransientFetchError
from sume.net.policy import UrlPolicy, address_refusal, check_url, host_allowed, resolve_checked

STRICT = UrlPolicy(allow_http=False, allow_private_hosts=False, allowed_hosts=())
LOCAL = UrlPolicy(allow_http=True, allow_private_hosts=True, allowed_hosts=())


def refusal(text: str, policy: UrlPolicy = STRICT) -> str | None:
    return address_refusal(ipaddress.ip_address(text), policy)


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "127.255.0.9",
        "10.0.0.1",
        "172.16.5.4",
        "172.31.255.255",
        "192.168.1.1",
        "100.64.0.1",  # shared address space (carrier-grade NAT)
        "169.254.1.1",
        "0.0.0.0",
        "224.0.0.1",
        "239.255.255.250",
        "240.0.0.1",
        "255.255.255.255",
        "192.0.2.10",  # documentation
        "198.18.0.1",  # benchmarking
        "::1",
        "::",
        "fe80::1",
        "fc00::1",
        "fd12:3456::1",
        "ff02::1",
        "2001:db8::1",
        "::ffff:127.0.0.1",  # IPv4-mapped loopback
        "::ffff:10.1.2.3",
        "2002:0a00:0001::1",  # 6to4 around 10.0.0.1
        "64:ff9b::7f00:1",  # NAT64 around 127.0.0.1
    ],
)
def test_non_public_addresses_are_refused(address):
    assert refusal(address) is not None


@pytest.mark.parametrize(
    "address", ["93.184.216.34", "8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "52.216.0.1"]
)
def test_public_addresses_are_allowed(address):
    assert refusal(address) is None


@pytest.mark.parametrize(
    "address",
    ["169.254.169.254", "fd00:ec2::254", "169.254.170.2", "::ffff:169.254.169.254"],
)
def test_metadata_endpoints_are_refused_even_when_private_hosts_are_allowed(address):
    assert refusal(address, LOCAL) == "metadata endpoint"
    assert refusal(address, STRICT) == "metadata endpoint"


def test_private_hosts_policy_allows_loopback_and_private():
    assert refusal("127.0.0.1", LOCAL) is None
    assert refusal("10.0.0.1", LOCAL) is None
    assert refusal("::1", LOCAL) is None


def test_https_only_unless_http_allowed():
    assert check_url("https://cdn.example.com/a.mp4", STRICT).port == 443
    with pytest.raises(RefusedUrl) as info:
        check_url("http://cdn.example.com/a.mp4", STRICT)
    assert info.value.code == "refused_scheme"
    assert check_url("http://cdn.example.com:8080/a.mp4?x=1", LOCAL).path == "/a.mp4?x=1"


@pytest.mark.parametrize(
    "url",
    [
        "ftp://cdn.example.com/a",
        "file:///etc/passwd",
        "gopher://127.0.0.1:6379/_FLUSHALL",
        "javascript:alert(1)",
        "//cdn.example.com/a",
    ],
)
def test_other_schemes_are_refused_even_in_local_mode(url):
    with pytest.raises(RefusedUrl) as info:
        check_url(url, LOCAL)
    assert info.value.code == "refused_scheme"


@pytest.mark.parametrize(
    "url",
    [
        "https://user:pw@cdn.example.com/a",
        "https://cdn.example.com@169.254.169.254/",
        "https:///nohost",
        "https://cdn.example.com/a b",
        "https://cdn.example.com/a\r\nHost: evil",
        "https://cdn.example.com\\@evil.com/",
        "https://[::1/",
        "https://cdn.example.com:99999/",
        "",
    ],
)
def test_malformed_or_confusing_urls_are_refused(url):
    with pytest.raises(RefusedUrl) as info:
        check_url(url, LOCAL)
    assert info.value.code == "invalid_url"


def test_host_allow_list_exact_and_wildcard():
    allowed = ("cdn.sume.example", "*.media.example")
    assert host_allowed("cdn.sume.example", allowed)
    assert host_allowed("eu.media.example", allowed)
    assert host_allowed("a.b.media.example", allowed)
    assert not host_allowed("media.example", allowed)
    assert not host_allowed("evilmedia.example", allowed)
    assert not host_allowed("cdn.sume.example.evil.com", allowed)
    assert not host_allowed("x.cdn.sume.example", allowed)
    assert host_allowed("anything.example", ())


def test_allow_list_is_applied_to_the_url_case_insensitively():
    policy = UrlPolicy(allow_http=False, allow_private_hosts=False, allowed_hosts=("cdn.example",))
    assert check_url("https://CDN.Example./x", policy).host == "cdn.example"
    with pytest.raises(RefusedUrl) as info:
        check_url("https://other.example/x", policy)
    assert info.value.code == "refused_host"


def test_idn_hosts_are_checked_in_their_ascii_form():
    policy = UrlPolicy(
        allow_http=False, allow_private_hosts=False, allowed_hosts=("xn--bcher-kva.example",)
    )
    assert check_url("https://bücher.example/x", policy).host == "xn--bcher-kva.example"


def test_host_header_keeps_name_and_non_default_port():
    assert check_url("https://cdn.example.com/x", STRICT).host_header == "cdn.example.com"
    assert check_url("https://cdn.example.com:8443/x", STRICT).host_header == "cdn.example.com:8443"
    assert check_url("http://[::1]:81/x", LOCAL).host_header == "[::1]:81"


def resolver(answers):
    return lambda host, port: answers[host]


def test_every_resolved_address_must_be_public():
    target = check_url("https://cdn.example.com/a", STRICT)
    assert resolve_checked(target, STRICT, resolver({"cdn.example.com": ["8.8.8.8"]})) == "8.8.8.8"
    mixed = resolver({"cdn.example.com": ["8.8.8.8", "10.0.0.5"]})
    with pytest.raises(RefusedUrl) as info:
        resolve_checked(target, STRICT, mixed)
    assert info.value.code == "refused_address"
    assert "10.0.0.5" in info.value.message


def test_a_name_resolving_to_the_metadata_service_is_refused():
    target = check_url("https://metadata.example/latest/meta-data/", STRICT)
    with pytest.raises(RefusedUrl, match="metadata"):
        resolve_checked(target, LOCAL, resolver({"metadata.example": ["169.254.169.254"]}))


def test_ip_literals_are_checked_without_dns():
    def no_dns(host, port):
        raise AssertionError("an IP literal needs no lookup")

    with pytest.raises(RefusedUrl):
        resolve_checked(check_url("https://127.0.0.1/x", STRICT), STRICT, no_dns)
    with pytest.raises(RefusedUrl):
        resolve_checked(check_url("https://[::ffff:a9fe:a9fe]/x", STRICT), STRICT, no_dns)
    assert resolve_checked(check_url("https://1.1.1.1/x", STRICT), STRICT, no_dns) == "1.1.1.1"


def test_dns_failures_are_classified():
    target = check_url("https://nowhere.example/x", STRICT)

    def nxdomain(host, port):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    def try_again(host, port):
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    with pytest.raises(PermanentFetchError) as permanent:
        resolve_checked(target, STRICT, nxdomain)
    assert permanent.value.code == "unresolvable_host"
    with pytest.raises(TransientFetchError) as transient:
        resolve_checked(target, STRICT, try_again)
    assert transient.value.code == "dns_error"
