"""Build the CDK app: feature flags from cdk.json, cdk-nag, one stack per stage.

``python app.py`` (make synth, tests) does not go through the CDK CLI, which
is what normally reads ``cdk.json``; loading its context here means the CLI,
``make synth`` and the tests synthesize the same template.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_cdk import App, Validations
from cdk_nag import AwsSolutionsChecks, ServerlessChecks

from infra.context import KNOWN_KEYS, StageSettings, cdk_json_context, stage_settings
from infra.stack import SumeWebhooksStack


def create_app(context: Mapping[str, Any] | None = None, outdir: str | None = None) -> App:
    """An app with the project's feature flags and cdk-nag's AWS Solutions and Serverless
    rule packs attached."""
    # Context given by the CLI (-c) takes precedence over these, as in cdk.json.
    app = App(context={**cdk_json_context(), **(context or {})}, outdir=outdir)
    Validations.of(app).add_plugins(AwsSolutionsChecks(app), ServerlessChecks(app))
    return app


def add_stacks(app: App, settings: StageSettings) -> list[SumeWebhooksStack]:
    """The stage's stacks: one, or one per region when ``regions`` is set (infra/regions.py)."""
    config, plan = settings.config, settings.plan
    if plan is None:
        return [SumeWebhooksStack(app, config)]
    primary, secondary = (SumeWebhooksStack(app, config, plan, r) for r in plan.regions)
    # The secondary's functions use the table's replica, which the primary creates.
    secondary.add_stack_dependency(primary, "the jobs table's replica is created by the primary")
    return [primary, secondary]


def add_stage(
    app: App, stage: str | None = None, overrides: Mapping[str, Any] | None = None
) -> list[SumeWebhooksStack]:
    """``add_stacks`` with the settings read from the app's context, ``overrides`` over it."""
    context = {key: app.node.try_get_context(key) for key in KNOWN_KEYS}
    return add_stacks(app, stage_settings({**context, **(overrides or {})}, stage))
