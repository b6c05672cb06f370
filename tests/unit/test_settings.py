import pytest

from sume.core.errors import ConfigurationError
from sume.receiving.settings import ReceiverSettings

BASE = {"JOBS_TABLE_NAME": "t", "JOBS_QUEUE_URL": "q", "SUME_COM_WEBHOOK_SIGNING_SECRET": "s"}


def test_defaults():
    s = ReceiverSettings.from_env(BASE)
    assert s.signature_tolerance_seconds == 300
    assert s.max_body_bytes == 1024 * 1024
    assert s.table.due_shards == 16
    assert s.payloads_bucket_name is None


def test_overrides():
    s = ReceiverSettings.from_env(
        {**BASE, "MAX_BODY_BYTES": "10", "SIGNATURE_TOLERANCE_SECONDS": "60"}
    )
    assert (s.max_body_bytes, s.signature_tolerance_seconds) == (10, 60)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({**BASE, "JOBS_TABLE_NAME": ""}, "JOBS_TABLE_NAME"),
        ({k: v for k, v in BASE.items() if k != "JOBS_QUEUE_URL"}, "JOBS_QUEUE_URL"),
        ({**BASE, "SUME_COM_WEBHOOK_SIGNING_SECRET": " "}, "SIGNING_SECRET_ARN"),
        ({**BASE, "MAX_BODY_BYTES": "lots"}, "MAX_BODY_BYTES"),
        ({**BASE, "MAX_BODY_BYTES": "0"}, "MAX_BODY_BYTES"),
    ],
)
def test_misconfiguration_names_the_variable(env, message):
    with pytest.raises(ConfigurationError, match=message):
        ReceiverSettings.from_env(env)
