"""Synthesize a dev and a prod stage into one cloud assembly (run as a subprocess).

``python -m tests.infra.synth_stages OUTDIR``: the infra tests run this once
per session, with no AWS credentials in its environment, and read the
templates and assets it writes. The prod stage sets every context knob it
can, so the tests see both the defaults and the overrides.

It then synthesizes, into ``OUTDIR/careless``, an app of ours with a bucket
and a queue that break AwsSolutions and Serverless rules, and writes the error that synth raised. A
process's first synth costs about 6 s (CDK loads its template validation),
so that check is made here, after the stages, rather than in the tests' process.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Final

CARELESS: Final = "careless"
CARELESS_ERROR: Final = "synth-error.txt"

PROD_OVERRIDES: Final = {
    "alarm_email": "ops@example.com",
    "sume_peak_jobs_per_second": "1",
    "throttle_rate": "25",
    "throttle_burst": "40",
    "api_rate_quota": "9000",
    "api_burst_quota": "4000",
    "api_client_error_threshold": "30",
    "poll_rate_minutes": "10",
    "due_shards": "8",
    "due_shards_previous": "16",
    "poller_shards_per_run": "4",
    "due_index_migration": "add",
    "log_retention_days": "90",
    "worker_batch_size": "5",
    "worker_batching_window_seconds": "2",
    "worker_max_concurrency": "4",
    "registrations_max_concurrency": "3",
    "receiver_reserved_concurrency": "80",
    "lambda_concurrency_quota": "1500",
    "table_warm_writes_per_second": "5000",
    "table_warm_reads_per_second": "15000",
    "dynamodb_table_quota": "50000",
    "signature_rejection_threshold": "7",
    "poll_recovery_share_percent": "30",
    "poll_recovery_window_minutes": "120",
    "poll_recovery_min_endings": "20",
    "delivery_silence_minutes": "180",
    "paused_alarm_minutes": "120",
    "retention_days": "60",
    "announcements_archive_days": "14",
    "payloads_expire_days": "120",
    "artifact_allowed_hosts": "cdn.sume.example",
    "status_allowed_hosts": "api.sume.example",
}


# A multi-region stage (infra/regions.py): two regions of the US set and a
# witness, the webhook's domain in a hosted zone, certificates made by the stacks.
GLOBAL_STAGE: Final = "global"
GLOBAL_OVERRIDES: Final = {
    "status_allowed_hosts": "api.sume.example",
    "alarm_email": "ops@example.com",
    "regions": "us-east-1,us-east-2",
    "witness_region": "us-west-2",
    "domain_name": "hooks.example.com",
    "hosted_zone_id": "Z0123456789ABCDEFGHIJ",
    "hosted_zone_name": "example.com",
}


def main(outdir: str) -> None:
    # Here, not at the top: the tests import this module's names, and importing the
    # CDK starts a jsii runtime (about 2 s), in the workers that only collect them too.
    from infra.node import prepare_jsii

    prepare_jsii()
    from infra.app import add_stage, create_app

    app = create_app(outdir=outdir)
    add_stage(app, "dev")
    add_stage(app, "prod", PROD_OVERRIDES)
    add_stage(app, GLOBAL_STAGE, GLOBAL_OVERRIDES)
    app.synth()
    careless(Path(outdir) / CARELESS)


def careless(outdir: Path) -> None:
    """A bucket without TLS enforcement or logs, a queue without a DLQ: our app's
    synth must refuse them (AwsSolutions and Serverless alike)."""
    from aws_cdk import Stack
    from aws_cdk import aws_s3 as s3
    from aws_cdk import aws_sqs as sqs

    from infra.app import create_app

    app = create_app(outdir=str(outdir))
    stack = Stack(app, "Careless")
    s3.Bucket(stack, "Bucket")
    sqs.Queue(stack, "Queue")
    try:
        app.synth()
    except RuntimeError as error:
        (outdir / CARELESS_ERROR).write_text(str(error), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1])
