"""The opt-in multi-region deployment's settings: which regions, which domain (no CDK).

``-c regions=us-east-1,us-east-2 -c witness_region=us-west-2`` (and the
domain's context, below) deploys the same stage once in each region, around
one jobs table: a DynamoDB global table with multi-region strong consistency
(MRSC), replicated in the two regions and with a witness in the third of
their region set. Without ``regions`` nothing here is used and the
single-region stack is what it always was. Each setting is checked here, once,
so a bad one fails the synth in one line naming the key
(docs/operations.md, "Two regions"); infra/regions.py builds what they describe.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from infra.config import ConfigError

# Where MRSC global tables can live: all replicas and the witness in one set
# (the DynamoDB API reference, CreateGlobalTableWitnessGroupMemberAction).
REGION_SETS: Final = (
    ("us-east-1", "us-east-2", "us-west-2"),
    ("eu-west-1", "eu-west-2", "eu-west-3", "eu-central-1"),
    ("ap-northeast-1", "ap-northeast-2", "ap-northeast-3"),
)

# Context keys, all empty by default: the single-region deployment.
KEYS: Final = (
    "regions",
    "witness_region",
    "domain_name",
    "hosted_zone_id",
    "hosted_zone_name",
    "certificate_arns",
)

_DOMAIN = re.compile(r"^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$")
_ZONE_ID = re.compile(r"^Z[A-Z0-9]{1,31}$")
_CERTIFICATE_ARN = re.compile(r"^arn:aws[a-z-]*:acm:([a-z0-9-]+):\d{12}:certificate/[0-9a-f-]{36}$")


@dataclass(frozen=True)
class RegionPlan:
    regions: tuple[str, str]
    """The two regions that take deliveries; the first is Route 53's primary."""
    witness_region: str
    domain_name: str
    """The one webhook host Sume is given (``https://<domain_name>/webhooks/sume``)."""
    hosted_zone_id: str
    hosted_zone_name: str
    certificate_arns: Mapping[str, str]
    """An ACM certificate for ``domain_name`` per region; empty: the stacks create them,
    validated by DNS in the hosted zone."""

    @property
    def primary(self) -> str:
        return self.regions[0]

    def other(self, region: str) -> str:
        return self.regions[1] if region == self.regions[0] else self.regions[0]

    @classmethod
    def from_context(cls, lookup: Callable[[str], Any]) -> RegionPlan | None:
        """The plan, or None when ``regions`` is unset (the single-region deployment)."""
        values = {key: str(lookup(key) or "").strip().lower() for key in KEYS}
        if not values["regions"]:
            extra = [key for key in KEYS if values[key]]
            if extra:
                raise ConfigError(
                    f"context {extra[0]} is only used with -c regions=<region>,<region>"
                )
            return None
        regions = tuple(r.strip() for r in values["regions"].split(",") if r.strip())
        if len(regions) != 2 or regions[0] == regions[1]:
            raise ConfigError(
                "context regions must name two different regions, e.g. "
                f"-c regions=us-east-1,us-east-2, got {values['regions']!r}"
            )
        region_set = next((s for s in REGION_SETS if regions[0] in s), None)
        if region_set is None or regions[1] not in region_set:
            raise ConfigError(
                f"context regions {','.join(regions)} must lie in one MRSC region set: "
                + "; ".join(", ".join(s) for s in REGION_SETS)
            )
        witness = values["witness_region"]
        if witness not in region_set or witness in regions:
            raise ConfigError(
                f"context witness_region must be a region of {', '.join(region_set)} other "
                f"than {' and '.join(regions)}, got {witness or 'nothing'!r}"
            )
        domain = values["domain_name"]
        if not _DOMAIN.match(domain):
            raise ConfigError(
                "context domain_name must be the webhook's host name (e.g. "
                f"-c domain_name=hooks.example.com), got {domain or 'nothing'!r}"
            )
        zone_name = values["hosted_zone_name"].rstrip(".")
        zone_id = str(lookup("hosted_zone_id") or "").strip()
        if not _ZONE_ID.match(zone_id) or not _DOMAIN.match(zone_name):
            raise ConfigError(
                "context hosted_zone_id and hosted_zone_name must name the Route 53 public "
                "hosted zone of domain_name (e.g. -c hosted_zone_id=Z0123456789ABC "
                "-c hosted_zone_name=example.com)"
            )
        if domain != zone_name and not domain.endswith(f".{zone_name}"):
            raise ConfigError(
                f"context domain_name {domain} is not in hosted_zone_name {zone_name}"
            )
        return cls(
            regions=(regions[0], regions[1]),
            witness_region=witness,
            domain_name=domain,
            hosted_zone_id=zone_id,
            hosted_zone_name=zone_name,
            certificate_arns=_certificates(str(lookup("certificate_arns") or ""), regions),
        )


def _certificates(raw: str, regions: tuple[str, ...]) -> dict[str, str]:
    """``region=arn,region=arn``: one per region, each in its region; or none at all."""
    entries = [e.strip() for e in raw.split(",") if e.strip()]
    arns: dict[str, str] = {}
    for entry in entries:
        region, _, arn = entry.partition("=")
        found = _CERTIFICATE_ARN.match(arn.strip())
        if not found or found.group(1) != region.strip():
            raise ConfigError(
                "context certificate_arns must be region=<ACM certificate ARN in that region>, "
                f"comma-separated, got {entry!r}"
            )
        arns[region.strip()] = arn.strip()
    if arns and set(arns) != set(regions):
        raise ConfigError(
            f"context certificate_arns must name a certificate for each of {', '.join(regions)} "
            "(or none: the stacks then create them, validated by DNS)"
        )
    return arns
