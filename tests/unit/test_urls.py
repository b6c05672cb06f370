from __future__ import annotations

import pytest

from sume.net.urls import MAX_REDACTED_CHARS, redact_url


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (
            "https://cdn.example.com/out/a.mp4?X-Amz-Signature=abc&X-Amz-Credential=k",
            "https://cdn.example.com/out/a.mp4",
        ),
        ("https://user:pass@example.com:8443/p#frag", "https://example.com:8443/p"),
        ("HTTP://[::1]:8080/x?token=t", "http://[::1]:8080/x"),
        ("https://example.com", "https://example.com"),
    ],
)
def test_keeps_scheme_host_and_path_only(url: str, expected: str) -> None:
    assert redact_url(url) == expected


@pytest.mark.parametrize("url", ["not a url", "https://[bad/x?secret=1", "", None, "/relative?q=1"])
def test_unusable_urls_reveal_nothing(url: object) -> None:
    assert redact_url(url) == "<unparseable url>"


def test_bounded() -> None:
    assert len(redact_url("https://example.com/" + "a" * 10_000)) == MAX_REDACTED_CHARS
