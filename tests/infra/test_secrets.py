"""Sume's signing secret and API token (``infra/secrets.py``)."""

from __future__ import annotations

from tests.infra.conftest import Stage


def test_secrets_start_random_never_empty(dev: Stage) -> None:
    for base in ("SecretsSigningSecret", "SecretsSumeApiToken"):
        _, secret = dev.one(base, "AWS::SecretsManager::Secret")
        props = secret["Properties"]
        assert "SecretString" not in props
        assert props["GenerateSecretString"]["PasswordLength"] >= 32
