import pytest

from sume.secrets import SigningSecrets, parse_secrets
from sume.settings import ConfigurationError


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("s1", (b"s1",)),
        ("  s1 \n", (b"s1",)),
        ('["new", "old"]', (b"new", b"old")),
        (b'["only"]', (b"only",)),
    ],
)
def test_parse(value, expected):
    assert parse_secrets(value) == expected


@pytest.mark.parametrize("value", [None, "", "   ", "[]", '[""]', '["ok", " "]', "[1]", "[oops"])
def test_empty_or_invalid_secret_is_refused(value):
    with pytest.raises(ConfigurationError):
        parse_secrets(value)


def test_fetched_secrets_are_read_each_time():
    values = iter(["a", '["b","a"]'])
    secrets = SigningSecrets(lambda: next(values), None)
    assert secrets.current() == (b"a",)
    assert secrets.current() == (b"b", b"a")
