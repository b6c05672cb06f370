import pytest

from sume.core.errors import ConfigurationError
from sume.core.secrets import SigningSecrets, parse_api_token, parse_secrets


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("s1", (b"s1",)),
        ("  s1 \n", (b"s1",)),
        ('["new", "old"]', (b"new", b"old")),
        (b'["only"]', (b"only",)),
        ("whsec_{not json", (b"whsec_{not json",)),
    ],
)
def test_parse(value, expected):
    assert parse_secrets(value) == expected


@pytest.mark.parametrize("value", [None, "", "   ", "[]", '[""]', '["ok", " "]', "[1]", "[oops"])
def test_empty_or_invalid_secret_is_refused(value):
    with pytest.raises(ConfigurationError):
        parse_secrets(value)


@pytest.mark.parametrize(
    "value",
    [
        '{"key": "s3cr3t"}',
        b'{"SUME_SIGNING_SECRET": "s3cr3t"}',
        "{s3cr3t",
        "12345",
        "1.5",
        "true",
        "null",
        '"s3cr3t"',
        '["s3cr3t", {"nested": "s3cr3t"}]',
        "[" * 100_000,
        {"key": "s3cr3t"},
        b"\xffs3cr3t",
    ],
)
def test_a_value_that_is_json_but_not_a_list_of_strings_is_a_configuration_fault(value):
    # As an HMAC key it would make every genuine delivery a 401.
    with pytest.raises(ConfigurationError) as raised:
        parse_secrets(value)
    assert "s3cr3t" not in str(raised.value)


def test_fetched_secrets_are_read_each_time():
    values = iter(["a", '["b","a"]', '{"a": "b"}'])
    secrets = SigningSecrets(lambda: next(values), None)
    assert secrets.current() == (b"a",)
    assert secrets.current() == (b"b", b"a")
    with pytest.raises(ConfigurationError):
        secrets.current()


@pytest.mark.parametrize(("value", "expected"), [("tok", "tok"), (b" tok\n", "tok")])
def test_api_token_is_plain_text(value, expected):
    assert parse_api_token(value) == expected


@pytest.mark.parametrize(
    "value", [None, "", "  ", '{"t": "s3cr3t"}', '["s3cr3t"]', '"s3cr3t"', "42", "{s3cr3t", 7]
)
def test_api_token_that_is_empty_or_json_is_a_configuration_fault(value):
    with pytest.raises(ConfigurationError) as raised:
        parse_api_token(value)
    assert "s3cr3t" not in str(raised.value)
