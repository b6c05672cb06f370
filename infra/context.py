"""The CDK context as a plain dict, and one stage's settings from it (no CDK).

``app.py`` checks the settings here before it imports the CDK, so a bad one
fails in one line without starting jsii. The context is what the CDK app
itself would read: ``cdk.json``'s, then the CDK CLI's (``CDK_CONTEXT_JSON``,
with what did not fit in the environment in the file
``CONTEXT_OVERFLOW_LOCATION_ENV`` names), then ``-c key=value`` given to
``python app.py``.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from infra.config import DEFAULT_STAGE, DEFAULTS, ConfigError, StageConfig
from infra.region_plan import KEYS as REGION_KEYS
from infra.region_plan import RegionPlan

CDK_JSON: Final = Path(__file__).resolve().parent.parent / "cdk.json"
# The variables the CDK CLI hands an app its context in (aws-cdk's cxapi).
CONTEXT_ENV: Final = "CDK_CONTEXT_JSON"
CONTEXT_OVERFLOW_ENV: Final = "CONTEXT_OVERFLOW_LOCATION_ENV"

# Every context key of ours: the one list an unknown key is checked against.
KNOWN_KEYS: Final = frozenset({"stage", *DEFAULTS, *REGION_KEYS})
# Keys that are the CDK's, not ours: feature flags (``@aws-cdk/...``), keys it
# injects (``aws:cdk:...``) or caches lookups under (``provider:account=...``),
# and what ``cdk acknowledge`` writes to cdk.context.json.
CDK_KEYS: Final = frozenset({"acknowledged-issue-numbers"})


def cdk_json_context() -> dict[str, Any]:
    context: dict[str, Any] = json.loads(CDK_JSON.read_text(encoding="utf-8")).get("context", {})
    return context


def cli_given_context(env: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """The context the CDK CLI passes a ``cdk synth|deploy`` app; empty without the CLI."""
    context: dict[str, Any] = json.loads(env.get(CONTEXT_ENV) or "{}")
    overflow = env.get(CONTEXT_OVERFLOW_ENV)
    if overflow:
        context.update(json.loads(Path(overflow).read_text(encoding="utf-8")))
    return context


def is_cdk_key(key: str) -> bool:
    return key.startswith("@") or ":" in key or key in CDK_KEYS


def check_keys(context: Mapping[str, Any]) -> None:
    """A key that is neither ours nor the CDK's is a typo: it would deploy a default."""
    unknown = sorted(k for k in context if k not in KNOWN_KEYS and not is_cdk_key(k))
    if not unknown:
        return
    named = []
    for key in unknown:
        near = difflib.get_close_matches(key, sorted(KNOWN_KEYS), n=1)
        named.append(f"{key} (did you mean {near[0]}?)" if near else key)
    raise ConfigError(f"unknown context key {', '.join(named)}: docs/operations.md lists them")


@dataclass(frozen=True)
class StageSettings:
    config: StageConfig
    plan: RegionPlan | None
    """None: the single-region deployment."""


def stage_settings(context: Mapping[str, Any], stage: str | None = None) -> StageSettings:
    """The stage's settings from its whole context, every key checked; ConfigError if not."""
    check_keys(context)
    name = stage or context.get("stage") or DEFAULT_STAGE
    plan = RegionPlan.from_context(context.get)
    regions = plan.regions if plan else ()
    return StageSettings(
        config=StageConfig.from_context(str(name), context.get, regions=regions), plan=plan
    )
