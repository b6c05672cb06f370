"""Before a CDK command that needs an AWS account: are there credentials at all?

``make bootstrap|diff|deploy|destroy`` run this first (``make check-aws``), so
a missing profile costs about a second and says what to do, instead of
failing after a 25 s synth. Credentials are resolved the way the CDK CLI and
every AWS SDK resolve them (environment, ``AWS_PROFILE``, SSO, container or
instance role), without calling any AWS API: whether they are still valid is
for the deploy itself to find out.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping

import botocore.session
from botocore.exceptions import ProfileNotFound

from sume_cli import FAILED, OK

# The CDK CLI deploys to us-east-1 when nothing names a region.
CDK_DEFAULT_REGION = "us-east-1"

NO_CREDENTIALS = (
    "no AWS credentials: set AWS_PROFILE to a configured profile "
    "(`aws configure sso` or `aws configure` creates one) or export "
    "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, then `make bootstrap` "
    "(once per account and region) and `make deploy`"
)


def check(
    session: botocore.session.Session, env: Mapping[str, str] = os.environ
) -> tuple[bool, str]:
    """Whether there are credentials, and one line saying which (or what to do)."""
    profile = session.get_config_variable("profile")
    try:
        credentials = session.get_credentials()
        # The CDK CLI reads AWS_REGION first; botocore only AWS_DEFAULT_REGION.
        region = env.get("AWS_REGION") or session.get_config_variable("region")
    except ProfileNotFound:
        return False, (
            f"AWS_PROFILE={profile} names no profile in the AWS config or credentials file: "
            "`aws configure list-profiles` shows the ones there are"
        )
    if credentials is None:
        return False, NO_CREDENTIALS
    where = f"AWS credentials from {credentials.method}"
    if profile:
        where += f" (profile {profile})"
    if region:
        return True, f"{where}; region {region}"
    return True, (
        f"{where}; no region set, so the CDK CLI uses {CDK_DEFAULT_REGION} "
        "(set AWS_REGION or the profile's region to choose)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sume_cli.preflight",
        description="Check for AWS credentials and a region before a CDK command (no AWS call).",
    )
    parser.parse_args(argv)
    ok, message = check(botocore.session.get_session())
    print(message, file=sys.stdout if ok else sys.stderr)
    return OK if ok else FAILED


if __name__ == "__main__":
    raise SystemExit(main())
