"""Signing secrets: from Secrets Manager in AWS, from the environment locally.

The value holds one secret, or a JSON list of secrets while ops rotate on our
side. Any empty secret is a configuration fault: verifying with an empty key
would accept anything signed with it, so the function refuses to run.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from sume.settings import ConfigurationError


class SecretsUnavailable(RuntimeError):
    """Secrets Manager could not be read: a transient fault, answered with 5xx."""


def parse_secrets(value: str | bytes | None) -> tuple[bytes, ...]:
    if isinstance(value, bytes):
        value = value.decode("utf-8")
    text = (value or "").strip()
    if text.startswith("["):
        try:
            items = json.loads(text)
        except ValueError:
            raise ConfigurationError("signing secret list is not valid JSON") from None
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            raise ConfigurationError("signing secret list must be a JSON list of strings")
    else:
        items = [text]
    secrets = tuple(i.strip().encode("utf-8") for i in items)
    if not secrets or not all(secrets):
        raise ConfigurationError("refusing to run with an empty signing secret")
    return secrets


class SigningSecrets:
    """Resolves the active secrets, cached by Powertools parameters in AWS."""

    def __init__(
        self,
        fetch: Callable[[], str | bytes | None] | None,
        value: str | None,
    ) -> None:
        self._fetch = fetch
        self._static = parse_secrets(value) if fetch is None else None

    def current(self) -> tuple[bytes, ...]:
        if self._static is not None:
            return self._static
        assert self._fetch is not None
        return parse_secrets(self._fetch())


def from_settings(
    secret_arn: str | None, value: str | None, max_age: int, provider_client: object | None = None
) -> SigningSecrets:
    if not secret_arn:
        return SigningSecrets(None, value)
    from aws_lambda_powertools.utilities.parameters import SecretsProvider
    from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError

    provider = SecretsProvider(boto3_client=provider_client)

    def fetch() -> str | bytes | None:
        # Powertools caches the value for max_age seconds per container, so a
        # rotation on our side reaches every container within a few minutes.
        try:
            secret = provider.get(secret_arn, max_age=max_age)
        except GetParameterError as exc:
            raise SecretsUnavailable(str(exc)) from exc
        if isinstance(secret, dict):
            raise ConfigurationError("signing secret must be a string or a JSON list")
        return secret

    return SigningSecrets(fetch, None)
