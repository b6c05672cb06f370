"""Synthesize a dev and a prod stage into one cloud assembly (run as a subprocess).

``python -m tests.infra.synth_stages OUTDIR``: the infra tests run this once
per session, with no AWS credentials in its environment, and read the
templates and assets it writes. The prod stage sets every context knob it
can, so the tests see both the defaults and the overrides.
"""

from __future__ import annotations

import sys
from typing import Final

from infra.app import add_stage, create_app

PROD_OVERRIDES: Final = {
    "alarm_email": "ops@example.com",
    "sume_peak_jobs_per_second": "1",
    "throttle_rate": "25",
    "throttle_burst": "40",
    "api_rate_quota": "9000",
    "api_burst_quota": "4000",
    "api_client_error_threshold": "30",
    "poll_rate_minutes": "10",
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
    "retention_days": "60",
    "payloads_expire_days": "120",
    "artifact_allowed_hosts": "cdn.sume.example",
    "status_allowed_hosts": "api.sume.example",
}


def main(outdir: str) -> None:
    app = create_app(outdir=outdir)
    add_stage(app, "dev")
    add_stage(app, "prod", PROD_OVERRIDES)
    app.synth()


if __name__ == "__main__":
    main(sys.argv[1])
