"""The one job_id rule, and the S3 keys built from the ids it accepts."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sume.core.ids import MAX_JOB_ID_BYTES, InvalidJobId, check_job_id, is_job_id, key_segment
from sume.store.payloads import PayloadStore
from sume.working.artifacts import object_key

S3_MAX_KEY_BYTES = 1024


def sqs_allows(text: str) -> bool:
    """SQS's allowed message characters: #x9 #xA #xD #x20-#xD7FF #xE000-#xFFFD #x10000-#x10FFFF."""
    return all(
        c in "\t\n\r"
        or 0x20 <= ord(c) <= 0xD7FF
        or 0xE000 <= ord(c) <= 0xFFFD
        or 0x10000 <= ord(c) <= 0x10FFFF
        for c in text
    )


def within_id_bytes(text: str) -> str:
    return text.encode("utf-8")[:MAX_JOB_ID_BYTES].decode("utf-8", "ignore")


noncharacters = st.one_of(
    st.integers(0xFDD0, 0xFDEF).map(chr),
    st.integers(0, 16).flatmap(
        lambda plane: st.sampled_from([0xFFFE, 0xFFFF]).map(lambda end: chr(plane << 16 | end))
    ),
)
# Everything, with the refused kinds of character drawn often.
any_character = st.one_of(
    st.characters(),
    st.characters(categories=["Cc", "Cs", "Cf", "Zl", "Zp", "Zs"]),
    noncharacters,
)
# Accepted ids, the longest percent-encodings ("%", multi-byte) and dot-only ones included.
accepted_ids = st.one_of(
    st.sampled_from([".", "..", "...", "job_8f2c1a", "%" * 256, "é" * 128, "\U0001f600" * 64]),
    st.text(st.sampled_from("é.%/😀a "), min_size=1, max_size=260).map(within_id_bytes),
    st.text(st.characters(exclude_categories=["Cc", "Cs", "Cf", "Zl", "Zp"]), min_size=1).map(
        within_id_bytes
    ),
).filter(is_job_id)


@pytest.mark.parametrize(
    "job_id",
    [
        "job_8f2c1a",
        "a b",  # whitespace inside is visible and carried unchanged
        "job\u00a0x",
        "é" * 128,  # 256 bytes
        "x" * MAX_JOB_ID_BYTES,
        "\U0001f600" * 64,
        "\ue000",  # private use
        "\ufffd",
        "..",
        "a/b",
    ],
)
def test_accepted_ids_come_back_unchanged(job_id):
    assert check_job_id(job_id) is job_id


@pytest.mark.parametrize(
    "value",
    [
        None,
        42,
        b"job",
        ["job"],
        "",
        " job",
        "job ",
        " job ",
        "\u00a0job",
        "job\u3000",
        "job\n",
        "j\tb",
        "j\x00b",
        "j\x7fb",
        "j\x85b",  # C1 control
        "job_\ud800",  # lone surrogates
        "\udc00",
        "j\ufffe",
        "j\uffff",
        "j\ufdd0",
        "j\U0001fffe",
        "j\U0010ffff",
        "j\u2028b",
        "j\u2029b",
        "j\u200bb",  # zero-width space
        "\ufeffjob",  # byte order mark
        "job\u202e",  # right-to-left override
        "x" * (MAX_JOB_ID_BYTES + 1),
        "é" * 129,
        "\U0001f600" * 65,
    ],
)
def test_refused_ids(value):
    with pytest.raises(InvalidJobId) as err:
        check_job_id(value)
    assert err.value.reason == "invalid_job_id"
    assert isinstance(err.value, ValueError)
    assert str(err.value).startswith("job_id must ")


@settings(max_examples=400)
@given(st.text(any_character, min_size=1, max_size=80))
def test_every_accepted_id_is_carried_unchanged_everywhere(value):
    if not is_job_id(value):
        return
    encoded = value.encode("utf-8")  # DynamoDB, S3, EventBridge and logs take UTF-8
    assert len(encoded) <= MAX_JOB_ID_BYTES
    assert sqs_allows(value)
    assert value == value.strip()
    assert json.loads(json.dumps(value)) == value
    assert json.loads(json.dumps(value, ensure_ascii=False)) == value


def test_dot_only_ids_are_encoded_and_other_keys_stay_as_they_were():
    assert key_segment(".") == "%2E"
    assert key_segment("..") == "%2E%2E"
    assert object_key("..", 0, "https://cdn/x.mp4") == "jobs/%2E%2E/000-x.mp4"
    assert object_key("a/../b", 3, "https://cdn/") == "jobs/a%2F..%2Fb/003-artifact"
    assert object_key("..a", 0, "https://cdn/x.mp4") == "jobs/..a/000-x.mp4"
    assert object_key("job é", 1, "https://cdn/x.mp4") == "jobs/job%20%C3%A9/001-x.mp4"


def test_a_url_urllib_cannot_split_still_names_a_key():
    assert object_key("j", 0, "http://[::1/clip.mp4") == "jobs/j/000-artifact"


class RecordingS3:
    def put_object(self, **kwargs):
        self.key = kwargs["Key"]


def fits_s3(key: str) -> None:
    assert len(key.encode("utf-8")) <= S3_MAX_KEY_BYTES
    assert not {".", ".."} & set(key.split("/"))


@settings(max_examples=300)
@given(job_id=accepted_ids, position=st.integers(0, 2**63), url=st.text())
def test_every_key_from_an_accepted_id_fits_s3(job_id, position, url):
    key = object_key(job_id, position, url)
    fits_s3(key)
    assert key == object_key(job_id, position, url)
    s3 = RecordingS3()
    ref = PayloadStore(lambda: s3, "bucket").put(job_id, url)
    fits_s3(s3.key)
    assert ref == f"s3://bucket/{s3.key}"
