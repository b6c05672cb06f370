"""cdk-nag acknowledgments, each next to the construct it concerns."""

from __future__ import annotations

from typing import Final

from aws_cdk import Acknowledgment, Validations
from constructs import IConstruct

# cdk-nag 3 reports its findings as validation rules of the "AwsSolutions"
# plugin; this is the id form its report asks for.
PLUGIN: Final = "AwsSolutions"


def acknowledge(scope: IConstruct, rule: str, reason: str) -> None:
    """Accept one cdk-nag finding (full id, e.g. ``AwsSolutions-IAM5[Resource::*]``)."""
    Validations.of(scope).acknowledge(Acknowledgment(id=f"{PLUGIN}::{rule}", reason=reason))
