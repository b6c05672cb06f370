"""Secrets Manager secrets: Sume's webhook signing secret(s) and API token.

Both are created with a long random value, never empty: a fresh stack
rejects every delivery (401, the signature alarm fires) until ops put Sume's
real secret in, instead of running with a guessable or empty key.
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from infra.nag import acknowledge

_NO_ROTATION = {
    "SigningSecret": "Sume issues the signing secret, so Secrets Manager cannot rotate it: "
    "ops rotate by hand (new secret first in a JSON list, old one retired when unused), "
    "as docs/operations.md describes.",
    "SumeApiToken": "Sume issues the API token, so Secrets Manager cannot rotate it: ops "
    "replace the value when Sume issues a new token, as docs/operations.md describes.",
}


class SumeSecrets(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, is_dev: bool) -> None:
        super().__init__(scope, construct_id)
        removal = RemovalPolicy.DESTROY if is_dev else RemovalPolicy.RETAIN
        self.signing = self._secret(
            "SigningSecret",
            "Sume webhook signing secret: one string, or a JSON list of strings while rotating",
            removal,
        )
        self.api_token = self._secret(
            "SumeApiToken",
            "Sume API token the poller sends when it reads a job's status_url",
            removal,
        )

    def _secret(
        self, construct_id: str, description: str, removal: RemovalPolicy
    ) -> secretsmanager.Secret:
        secret = secretsmanager.Secret(
            self,
            construct_id,
            description=description,
            generate_secret_string=secretsmanager.SecretStringGenerator(
                password_length=64, exclude_punctuation=True
            ),
            removal_policy=removal,
        )
        acknowledge(secret, "AwsSolutions-SMG4", _NO_ROTATION[construct_id])
        return secret
