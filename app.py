#!/usr/bin/env python3
"""CDK entry point: ``cdk synth|deploy -c stage=NAME`` or ``python app.py -c stage=NAME``."""

from __future__ import annotations

import sys

from infra.app import add_stage, create_app
from infra.config import ConfigError


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
    app = create_app(cli_context(sys.argv[1:]))
    try:
        add_stage(app)
    except ConfigError as error:
        # A setting that cannot be deployed is the operator's to fix: one line
        # naming the key, not a traceback through the CDK.
        raise SystemExit(f"error: {error}") from None
    app.synth()


if __name__ == "__main__":
    main()
