import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sume.contract.signature import (
    SCHEME,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    SignatureError,
    SignedHeaders,
    headers,
    sign,
)
from tests.builders import verify

VECTORS = json.loads(
    (Path(__file__).parent.parent / "data/sume-signature-vectors.json").read_text()
)
NOW = 1_764_460_800
SECRET = b"whsec_unit"
BODY = b'{"event":"job.completed","job_id":"job_1","status":"OK"}'


def header(*secrets: bytes, ts: int = NOW, body: bytes = BODY) -> str:
    return ",".join(sign(s, str(ts), body) for s in secrets)


def sent(signature: str | None, timestamp: str | None = str(NOW)) -> dict[str, str]:
    """A request's headers with these two values; None leaves the header out."""
    values = {TIMESTAMP_HEADER: timestamp, SIGNATURE_HEADER: signature}
    return {name: value for name, value in values.items() if value is not None}


@pytest.mark.parametrize("vector", VECTORS["vectors"], ids=lambda v: v["timestamp"])
def test_known_answer_vectors(vector):
    body = vector["body"].encode("utf-8")
    assert sign(vector["secret"].encode(), vector["timestamp"], body) == vector["signature_header"]
    position = verify(
        body,
        sent(vector["signature_header"], vector["timestamp"]),
        [vector["secret"].encode()],
        now=int(vector["timestamp"]),
    )
    assert position == 0


def test_rotation_vector_matches_any_entry():
    rotation = VECTORS["rotation"]
    body = rotation["body"].encode()
    expected = headers(body, rotation["secrets_at_sender"], int(rotation["timestamp"]))
    assert expected[SIGNATURE_HEADER] == rotation["signature_header"]
    assert (
        verify(
            body,
            sent(rotation["signature_header"], rotation["timestamp"]),
            [rotation["secret"].encode()],
            now=int(rotation["timestamp"]),
        )
        == 0
    )


def test_sender_headers_are_sumes_wire_format():
    vector = VECTORS["vectors"][0]
    sent_headers = headers(vector["body"].encode(), [vector["secret"]], int(vector["timestamp"]))
    assert sent_headers == {
        "x-sume-webhook-timestamp": vector["timestamp"],
        "x-sume-webhook-signature": vector["signature_header"],
    }


def test_sender_signs_text_and_bytes_secrets_alike_one_entry_each():
    text = headers(BODY, ["old", "new"], NOW)
    assert text == headers(BODY, [b"old", b"new"], NOW)
    assert text[SIGNATURE_HEADER] == header(b"old", b"new")
    spaced = headers(BODY, ["old", "new"], NOW, separator=", ")
    assert spaced[SIGNATURE_HEADER] == ", ".join(header(s) for s in (b"old", b"new"))
    assert verify(BODY, spaced, [b"new"], now=NOW) == 0


def test_reports_position_of_matching_secret_on_our_side():
    assert verify(BODY, sent(header(b"new")), [b"old", b"new"], now=NOW) == 1
    assert verify(BODY, sent(header(b"old")), [b"old", b"new"], now=NOW) == 0


def test_entries_may_carry_spaces():
    spaced = " , ".join([SCHEME + "0" * 64, " " + header(SECRET) + "  "])
    assert verify(BODY, sent(spaced), [SECRET], now=NOW) == 0


def test_eleventh_bogus_entry_is_the_real_one():
    bogus = [f"{SCHEME}{i:064x}" for i in range(10)]
    assert verify(BODY, sent(",".join([*bogus, header(SECRET)])), [SECRET], now=NOW) == 0


@pytest.mark.parametrize("skew", [-300, 300, 0, 299, -299])
def test_timestamp_inside_tolerance(skew):
    ts = NOW + skew
    assert verify(BODY, headers(BODY, [SECRET], ts), [SECRET], now=NOW) == 0


@pytest.mark.parametrize("skew", [-301, 301, 10_000, -10_000])
def test_timestamp_outside_tolerance(skew):
    ts = NOW + skew
    with pytest.raises(SignatureError) as err:
        verify(BODY, headers(BODY, [SECRET], ts), [SECRET], now=NOW)
    assert err.value.reason == "timestamp_out_of_tolerance"


def test_tolerance_is_configurable():
    signed = headers(BODY, [SECRET], NOW - 301)
    assert verify(BODY, signed, [SECRET], now=NOW, tolerance_seconds=600) == 0


@pytest.mark.parametrize(
    ("timestamp", "reason"),
    [
        (None, "missing_timestamp"),
        ("", "missing_timestamp"),
        (" 1764460800", "invalid_timestamp"),
        ("+1764460800", "invalid_timestamp"),
        ("1764460800.0", "invalid_timestamp"),
        ("1_764_460_800", "invalid_timestamp"),
        ("١٧٦٤٤٦٠٨٠٠", "invalid_timestamp"),  # Arabic-Indic digits: int() would take them
        ("-1", "invalid_timestamp"),
        ("9" * 40, "invalid_timestamp"),
    ],
)
def test_bad_timestamps(timestamp, reason):
    with pytest.raises(SignatureError) as err:
        verify(BODY, sent(header(SECRET), timestamp), [SECRET], now=NOW)
    assert err.value.reason == reason


@pytest.mark.parametrize(
    ("signature", "reason"),
    [
        (None, "missing_signature"),
        ("", "missing_signature"),
        ("   ", "missing_signature"),
        ("v1=abc", "malformed_signature"),
        ("sha256=" + "0" * 64, "malformed_signature"),
        (",".join([SCHEME + "00"] * 40), "malformed_signature"),
        (SCHEME + "a" * 5000, "malformed_signature"),
        (SCHEME + "0" * 64, "signature_mismatch"),
        (SCHEME, "signature_mismatch"),
        (SCHEME + "zz\u00e9\udcff", "signature_mismatch"),
    ],
)
def test_bad_signature_headers(signature, reason):
    with pytest.raises(SignatureError) as err:
        verify(BODY, sent(signature), [SECRET], now=NOW)
    assert err.value.reason == reason


@pytest.mark.parametrize(
    ("request_headers", "reason"),
    [
        ({}, "missing_timestamp"),
        (sent(header(SECRET), "soon"), "invalid_timestamp"),
        (sent(header(SECRET), str(NOW - 3600)), "timestamp_out_of_tolerance"),
        (sent(None), "missing_signature"),
        (sent("v2=abc"), "malformed_signature"),
    ],
)
def test_headers_are_refused_without_any_secret(request_headers, reason):
    with pytest.raises(SignatureError) as err:
        SignedHeaders.read(request_headers, now=NOW)
    assert err.value.reason == reason


def test_uppercase_hex_is_not_sumes_format():
    upper = SCHEME + header(SECRET).removeprefix(SCHEME).upper()
    with pytest.raises(SignatureError):
        verify(BODY, sent(upper), [SECRET], now=NOW)


@pytest.mark.parametrize(
    "tampered",
    [
        BODY + b"\n",
        BODY.replace(b"job_1", b"job_2"),
        b" " + BODY,
        json.dumps(json.loads(BODY)).encode(),  # re-serialised: different bytes
    ],
)
def test_any_change_to_the_raw_body_fails(tampered):
    assert tampered != BODY
    with pytest.raises(SignatureError) as err:
        verify(tampered, sent(header(SECRET)), [SECRET], now=NOW)
    assert err.value.reason == "signature_mismatch"


def test_signature_for_other_timestamp_fails():
    with pytest.raises(SignatureError):
        verify(BODY, sent(header(SECRET, ts=NOW - 1)), [SECRET], now=NOW)


@pytest.mark.parametrize("secrets", [[], [b""], [b"ok", b""]])
def test_refuses_empty_secrets(secrets):
    with pytest.raises(ValueError, match="empty"):
        verify(BODY, sent(header(b"ok")), secrets, now=NOW)


@given(body=st.binary(max_size=2048), secret=st.binary(min_size=1, max_size=64))
def test_roundtrip_any_body(body, secret):
    assert verify(body, headers(body, [secret], NOW), [secret], now=NOW) == 0


@given(signature=st.text(max_size=300), timestamp=st.one_of(st.none(), st.text(max_size=20)))
def test_garbage_headers_only_raise_signature_errors(signature, timestamp):
    with pytest.raises(SignatureError):
        verify(BODY, sent(signature, timestamp), [SECRET], now=NOW)
