"""Build the CDK app: feature flags from cdk.json, cdk-nag, one stack per stage.

``python app.py`` (make synth, tests) does not go through the CDK CLI, which
is what normally reads ``cdk.json``; loading its context here means the CLI,
``make synth`` and the tests synthesize the same template.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from aws_cdk import App, Validations
from cdk_nag import AwsSolutionsChecks, ServerlessChecks

from infra.config import DEFAULT_STAGE, StageConfig
from infra.regions import RegionPlan
from infra.stack import SumeWebhooksStack

CDK_JSON: Final = Path(__file__).resolve().parent.parent / "cdk.json"


def cdk_json_context() -> dict[str, Any]:
    context: dict[str, Any] = json.loads(CDK_JSON.read_text(encoding="utf-8")).get("context", {})
    return context


def create_app(context: Mapping[str, Any] | None = None, outdir: str | None = None) -> App:
    """An app with the project's feature flags and cdk-nag's AWS Solutions and Serverless
    rule packs attached."""
    # Context given by the CLI (-c) takes precedence over these, as in cdk.json.
    app = App(context={**cdk_json_context(), **(context or {})}, outdir=outdir)
    Validations.of(app).add_plugins(AwsSolutionsChecks(app), ServerlessChecks(app))
    return app


def add_stage(
    app: App, stage: str | None = None, overrides: Mapping[str, Any] | None = None
) -> list[SumeWebhooksStack]:
    """The stage's stacks: one, or one per region when ``regions`` is set (infra/regions.py)."""
    name = stage or app.node.try_get_context("stage") or DEFAULT_STAGE
    config = StageConfig.from_context(str(name), app.node.try_get_context, overrides)
    given = overrides or {}
    plan = RegionPlan.from_context(
        lambda key: given[key] if key in given else app.node.try_get_context(key)
    )
    if plan is None:
        return [SumeWebhooksStack(app, config)]
    primary, secondary = (SumeWebhooksStack(app, config, plan, r) for r in plan.regions)
    # The secondary's functions use the table's replica, which the primary creates.
    secondary.add_stack_dependency(primary, "the jobs table's replica is created by the primary")
    return [primary, secondary]
