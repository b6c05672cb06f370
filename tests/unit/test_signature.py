import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sume.signature import SignatureError, sign, verify

VECTORS = json.loads(
    (Path(__file__).parent.parent / "data/sume-signature-vectors.json").read_text()
)
NOW = 1_764_460_800
SECRET = b"whsec_unit"
BODY = b'{"event":"job.completed","job_id":"job_1","status":"OK"}'


def header(*secrets: bytes, ts: int = NOW, body: bytes = BODY) -> str:
    return ",".join(sign(s, str(ts), body) for s in secrets)


@pytest.mark.parametrize("vector", VECTORS["vectors"], ids=lambda v: v["timestamp"])
def test_known_answer_vectors(vector):
    body = vector["body"].encode("utf-8")
    assert sign(vector["secret"].encode(), vector["timestamp"], body) == vector["signature_header"]
    position = verify(
        body,
        vector["timestamp"],
        vector["signature_header"],
        [vector["secret"].encode()],
        now=int(vector["timestamp"]),
    )
    assert position == 0


def test_rotation_vector_matches_any_entry():
    rotation = VECTORS["rotation"]
    body = rotation["body"].encode()
    expected = ",".join(
        sign(s.encode(), rotation["timestamp"], body) for s in rotation["secrets_at_sender"]
    )
    assert expected == rotation["signature_header"]
    assert (
        verify(
            body,
            rotation["timestamp"],
            rotation["signature_header"],
            [rotation["secret"].encode()],
            now=int(rotation["timestamp"]),
        )
        == 0
    )


def test_reports_position_of_matching_secret_on_our_side():
    assert verify(BODY, str(NOW), header(b"new"), [b"old", b"new"], now=NOW) == 1
    assert verify(BODY, str(NOW), header(b"old"), [b"old", b"new"], now=NOW) == 0


def test_entries_may_carry_spaces():
    spaced = " , ".join(["sume-v1=" + "0" * 64, " " + header(SECRET) + "  "])
    assert verify(BODY, str(NOW), spaced, [SECRET], now=NOW) == 0


def test_eleventh_bogus_entry_is_the_real_one():
    bogus = [f"sume-v1={i:064x}" for i in range(10)]
    assert verify(BODY, str(NOW), ",".join([*bogus, header(SECRET)]), [SECRET], now=NOW) == 0


@pytest.mark.parametrize("skew", [-300, 300, 0, 299, -299])
def test_timestamp_inside_tolerance(skew):
    ts = NOW + skew
    assert verify(BODY, str(ts), header(SECRET, ts=ts), [SECRET], now=NOW) == 0


@pytest.mark.parametrize("skew", [-301, 301, 10_000, -10_000])
def test_timestamp_outside_tolerance(skew):
    ts = NOW + skew
    with pytest.raises(SignatureError) as err:
        verify(BODY, str(ts), header(SECRET, ts=ts), [SECRET], now=NOW)
    assert err.value.reason == "timestamp_out_of_tolerance"


def test_tolerance_is_configurable():
    ts = NOW - 301
    assert (
        verify(BODY, str(ts), header(SECRET, ts=ts), [SECRET], now=NOW, tolerance_seconds=600) == 0
    )


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
        verify(BODY, timestamp, header(SECRET), [SECRET], now=NOW)
    assert err.value.reason == reason


@pytest.mark.parametrize(
    ("signature", "reason"),
    [
        (None, "missing_signature"),
        ("", "missing_signature"),
        ("   ", "missing_signature"),
        ("v1=abc", "malformed_signature"),
        ("sha256=" + "0" * 64, "malformed_signature"),
        (",".join(["sume-v1=00"] * 40), "malformed_signature"),
        ("sume-v1=" + "a" * 5000, "malformed_signature"),
        ("sume-v1=" + "0" * 64, "signature_mismatch"),
        ("sume-v1=", "signature_mismatch"),
        ("sume-v1=zz\u00e9\udcff", "signature_mismatch"),
    ],
)
def test_bad_signature_headers(signature, reason):
    with pytest.raises(SignatureError) as err:
        verify(BODY, str(NOW), signature, [SECRET], now=NOW)
    assert err.value.reason == reason


def test_uppercase_hex_is_not_sumes_format():
    upper = "sume-v1=" + header(SECRET).removeprefix("sume-v1=").upper()
    with pytest.raises(SignatureError):
        verify(BODY, str(NOW), upper, [SECRET], now=NOW)


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
        verify(tampered, str(NOW), header(SECRET), [SECRET], now=NOW)
    assert err.value.reason == "signature_mismatch"


def test_signature_for_other_timestamp_fails():
    with pytest.raises(SignatureError):
        verify(BODY, str(NOW), header(SECRET, ts=NOW - 1), [SECRET], now=NOW)


@pytest.mark.parametrize("secrets", [[], [b""], [b"ok", b""]])
def test_refuses_empty_secrets(secrets):
    with pytest.raises(ValueError, match="empty"):
        verify(BODY, str(NOW), header(b"ok"), secrets, now=NOW)


@given(body=st.binary(max_size=2048), secret=st.binary(min_size=1, max_size=64))
def test_roundtrip_any_body(body, secret):
    assert verify(body, str(NOW), sign(secret, str(NOW), body), [secret], now=NOW) == 0


@given(signature=st.text(max_size=300), timestamp=st.one_of(st.none(), st.text(max_size=20)))
def test_garbage_headers_only_raise_signature_errors(signature, timestamp):
    with pytest.raises(SignatureError):
        verify(BODY, timestamp, signature, [SECRET], now=NOW)
