"""Signing secrets and Sume's API token: from Secrets Manager in AWS, from the environment locally.

The signing secret value holds one secret, or a JSON list of secrets while ops
rotate on our side. Anything else that is JSON (an object such as
``{"key": "value"}``, a number, a list holding non-strings) is a configuration
fault, never a secret: used as an HMAC key it would make every genuine delivery
a 401, and Sume gives up after 10 of those, while a configuration fault is
answered 5xx and Sume keeps retrying until ops fix the value. An empty secret
is a fault too: verifying with an empty key would accept anything signed with
it. Messages never quote the value.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from sume.core.errors import ConfigurationError, RetryableError


class SecretsUnavailable(RetryableError):
    """Secrets Manager could not be read: a transient fault, answered with 5xx."""


_NOT_JSON = object()


def _as_text(value: object, what: str) -> str:
    if value is None:
        return ""
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            raise ConfigurationError(f"{what} is not UTF-8 text") from None
    if not isinstance(value, str):
        raise ConfigurationError(f"{what} must be text, got {type(value).__name__}")
    return value.strip()


def _json_value(text: str, what: str) -> Any:
    """``text`` parsed as JSON, or ``_NOT_JSON`` when it is a plain secret."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ConfigurationError(f"{what} is JSON nested too deeply") from None
    except ValueError:
        if text.startswith(("[", "{")):
            # Meant as JSON (a rotation list, most likely) but broken.
            raise ConfigurationError(f"{what} looks like JSON but does not parse") from None
        return _NOT_JSON


def parse_secrets(value: object) -> tuple[bytes, ...]:
    what = "the signing secret"
    text = _as_text(value, what)
    items = _json_value(text, what)
    if items is _NOT_JSON:
        items = [text]
    elif not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise ConfigurationError(f"{what} must be plain text or a JSON list of strings")
    secrets = tuple(i.strip().encode("utf-8") for i in items)
    if not secrets or not all(secrets):
        raise ConfigurationError("refusing to run with an empty signing secret")
    return secrets


def parse_api_token(value: object) -> str:
    """Sume's API token: one non-empty plain-text value, never JSON."""
    what = "the Sume API token"
    text = _as_text(value, what)
    if _json_value(text, what) is not _NOT_JSON:
        raise ConfigurationError(f"{what} must be the plain token, not JSON")
    if not text:
        raise ConfigurationError(f"{what} must not be empty")
    return text


Fetch = Callable[[], object]


def secret_fetcher(arn: str, max_age: int, client: object | None = None) -> Fetch:
    """The raw value of a Secrets Manager secret, cached by Powertools per container.

    Powertools keeps the value for ``max_age`` seconds, so a change on our side
    reaches every container within a few minutes.
    """
    from aws_lambda_powertools.utilities.parameters import SecretsProvider
    from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError

    provider = SecretsProvider(boto3_client=client)

    def fetch() -> object:
        try:
            return provider.get(arn, max_age=max_age)
        except GetParameterError as exc:
            raise SecretsUnavailable(str(exc)) from exc

    return fetch


class SigningSecrets:
    """Resolves the active secrets, cached by Powertools parameters in AWS."""

    def __init__(self, fetch: Fetch | None, value: str | None) -> None:
        self._fetch = fetch
        self._static = parse_secrets(value) if fetch is None else None

    def current(self) -> tuple[bytes, ...]:
        if self._static is not None:
            return self._static
        assert self._fetch is not None
        return parse_secrets(self._fetch())
