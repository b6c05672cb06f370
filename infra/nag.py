"""cdk-nag acknowledgments, each next to the construct it concerns."""

from __future__ import annotations

from aws_cdk import Acknowledgment, Validations
from constructs import IConstruct


def acknowledge(scope: IConstruct, rule: str, reason: str) -> None:
    """Accept one cdk-nag finding (full id, e.g. ``AwsSolutions-IAM5[Resource::*]``).

    cdk-nag 3 reports its findings as validation rules of one plugin per rule
    pack, named as the rule id starts (``AwsSolutions``, ``Serverless``); this
    is the id form its report asks for.
    """
    plugin = rule.split("-", 1)[0]
    Validations.of(scope).acknowledge(Acknowledgment(id=f"{plugin}::{rule}", reason=reason))
