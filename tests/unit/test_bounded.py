"""Outside data made safe to write down: Sume's error, names, messages with URLs."""

import json

import pytest

from sume.core.bounded import (
    MAX_ANNOUNCED_ERROR_DEPTH,
    MAX_STORED_ERROR_CHARS,
    announced_error,
    bounded_text,
    stored_error,
)
from sume.net.urls import scrub_urls


def nested(levels, leaf=None):
    value = leaf if leaf is not None else {"code": "DEEP"}
    for _ in range(levels - 1):
        value = {"cause": value}
    return value


def strict_json(text):
    def refuse(constant):
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize(
    "error",
    [
        {"code": "TIMEOUT", "elapsed_s": 12.5, "retries": 3, "fatal": True, "hint": None},
        nested(40),
        {"code": "BAD\ud800", "message": "half a pair: \udc00"},
        ["a list", {"of": ["things"]}],
        "just a string",
    ],
    ids=["decimal", "nested_40", "lone_surrogates", "list", "string"],
)
def test_the_item_keeps_any_error_as_ascii_json_text(error):
    text, cut = stored_error(error)

    assert not cut
    assert text.isascii()
    assert strict_json(text) == error


def test_an_error_deeper_than_python_recurses_is_still_written():
    with pytest.raises(RecursionError):
        json.dumps(nested(1500))

    text, cut = stored_error(nested(1500))

    assert not cut
    assert text == '{"cause":' * 1499 + '{"code":"DEEP"}' + "}" * 1499
    assert announced_error(nested(5000)) == ({}, True)


def test_non_finite_numbers_become_strings_so_the_text_stays_json():
    text, _ = stored_error({"a": float("nan"), "b": float("inf"), "c": float("-inf")})

    assert strict_json(text) == {"a": "NaN", "b": "Infinity", "c": "-Infinity"}


def test_a_long_error_is_cut_at_the_bound():
    error = {"code": "HUGE", "message": "é" * 200_000}

    text, cut = stored_error(error)

    assert cut
    assert len(text) == MAX_STORED_ERROR_CHARS
    assert text.startswith('{"code":"HUGE","message":"\\u00e9\\u00e9')


def test_the_announcement_carries_sumes_error_when_exact_small_and_shallow():
    for error in ({"code": "X", "elapsed_s": 12.5}, nested(MAX_ANNOUNCED_ERROR_DEPTH), "text"):
        assert announced_error(error) == (error, False)
    assert announced_error(None) == (None, False)


@pytest.mark.parametrize(
    ("error", "summary"),
    [
        (nested(MAX_ANNOUNCED_ERROR_DEPTH + 1, {"code": "C", "message": "M"}), {}),
        ({"code": "C", "message": "M", "deep": nested(40)}, {"code": "C", "message": "M"}),
        ({"code": "C" * 300, "message": "m" * 200_000}, {"code": "C" * 256, "message": "m" * 1024}),
        ({"code": "BAD\ud800", "detail": 1}, {"code": "BAD\ufffd"}),
        ({"code": 42, "message": "n", "x": float("nan")}, {"message": "n"}),
        ("s" * 10_000, {"message": "s" * 1024}),
        (["x" * 10_000], {}),
    ],
    ids=["too_deep", "deep_inside", "too_long", "lone_surrogate", "nan", "long_string", "list"],
)
def test_otherwise_it_carries_a_marked_summary(error, summary):
    assert announced_error(error) == (summary, True)


def test_bounded_text_cuts_on_a_character_boundary():
    assert bounded_text("é" * 10, 5) == "éé"
    assert bounded_text("ok", 5) == "ok"
    assert bounded_text("a\ud800b", 10) == "a\ufffdb"


def test_urls_in_messages_lose_their_query_and_user_info():
    url = "https://user:pw@cdn.example/out/a.mp4?X-Amz-Signature=5ecre7#frag"
    message = (
        f"HTTP 503 from {url}; HTTPSConnectionPool(host='cdn.example', port=443): "
        "Max retries exceeded with url: /out/a.mp4?X-Amz-Signature=5ecre7 (Caused by x); "
        "redirected to http://other.example:8080/b?token=t"
    )

    scrubbed = scrub_urls(message, [url])

    assert scrubbed == (
        "HTTP 503 from https://cdn.example/out/a.mp4; HTTPSConnectionPool(host='cdn.example', "
        "port=443): Max retries exceeded with url: /out/a.mp4 (Caused by x); "
        "redirected to http://other.example:8080/b"
    )
    assert scrub_urls("no url here: just text") == "no url here: just text"


def test_a_malformed_url_in_a_message_is_scrubbed_too():
    url = "https://[::1/a.mp4?sig=5ecre7"

    scrubbed = scrub_urls(f"cannot parse URL {url}; url: /a.mp4?sig=5ecre7", [url])

    assert scrubbed == "cannot parse URL <unparseable url>; url: /a.mp4"
