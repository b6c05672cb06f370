#!/usr/bin/env python3
"""CDK entry point: ``cdk synth|deploy -c stage=NAME`` or ``python app.py -c stage=NAME``.

The settings are checked before the CDK is imported: a bad one fails in one
line in a fraction of a second, instead of after jsii's start.
"""

from __future__ import annotations

import sys

from infra.config import ConfigError
from infra.context import cdk_json_context, cli_given_context, stage_settings
from infra.node import prepare_jsii


def cli_context(argv: list[str]) -> dict[str, str]:
    """``-c key=value`` pairs, for ``python app.py`` run without the CDK CLI."""
    context: dict[str, str] = {}
    args = iter(argv)
    for arg in args:
        if arg in {"-c", "--context"}:
            key, sep, value = next(args, "").partition("=")
            if not sep or not key:
                raise SystemExit(f"expected -c key=value, got {arg} {key}")
            context[key] = value
    return context


def main() -> None:
    given = cli_context(sys.argv[1:])
    try:
        settings = stage_settings({**cdk_json_context(), **cli_given_context(), **given})
    except ConfigError as error:
        # A setting that cannot be deployed is the operator's to fix: one line
        # naming the key, not a traceback through the CDK.
        raise SystemExit(f"error: {error}") from None
    prepare_jsii()
    from infra.app import add_stacks, create_app

    app = create_app(given)
    add_stacks(app, settings)
    app.synth()


if __name__ == "__main__":
    main()
