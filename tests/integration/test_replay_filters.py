"""``replay --since``'s filters, each a dry run over one outage's window (the jobs of
tests/integration/test_replay_window.py, which shows that a dry run writes nothing).

A dry run writes nothing, so the window is built once for the module, on moto's server
reset before and after it; the runs that write are in test_replay_window.py, each on a
fresh moto.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator

import boto3
import pytest

from infra.spec import ResourceNames
from sume.store.jobs import JobsTable
from sume_cli.times import iso
from tests.builders import SECRET
from tests.integration import test_report as reported
from tests.integration.conftest import served_resources
from tests.integration.test_replay_window import OUTAGE, REASON, an_outage
from tests.integration.test_report import NOW, reset

cli = reported.cli


@pytest.fixture(scope="module")
def endpoint(moto_server: str) -> Iterator[str]:
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("AWS_ENDPOINT_URL", raising=False)
        reset(moto_server)
        yield moto_server
        reset(moto_server)


@pytest.fixture(scope="module")
def names(endpoint: str) -> ResourceNames:
    return served_resources(endpoint, signing_secret=SECRET)


@pytest.fixture(scope="module")
def outage(endpoint: str, names: ResourceNames) -> JobsTable:
    return an_outage(JobsTable(boto3.client("dynamodb", endpoint_url=endpoint), names.table, 16))


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ((), [*OUTAGE, "job_gone_404", "job_fine", "job_fixed_by_retry"]),
        (("--state", "processed"), ["job_fine", "job_fixed_by_retry"]),
        (("--error-code", "http_404"), ["job_gone_404"]),
        (("--error-code", "too_many_attempts"), list(OUTAGE)),
        (("--outcome", "failed"), ["job_out_failed"]),
        (("--event", "job.failed"), ["job_out_failed"]),
        (
            ("--event", "job.failed", "--event", "job.completed", "--state", "processed"),
            ["job_fine", "job_fixed_by_retry"],
        ),
        (("--error-code", "http_503", "--outcome", "canceled"), []),
        (
            ("--until", str(iso(NOW - 50 * 60))),
            [
                "job_out_a",
                "job_out_b",
                "job_out_c",
                "job_out_failed",
                "job_gone_404",
                "job_fine",
                "job_fixed_by_retry",
            ],
        ),
        (("--until", str(iso(NOW - 70 * 60))), []),
    ],
)
def test_each_filter_narrows_the_window(cli, outage, filters, expected):
    code, out, err = cli(
        "replay", "--since", "3h", *filters, "--reason", REASON, "--dry-run", "--output", "json"
    )
    # A filter that matches nothing fails, with no command to replay (what the window
    # holds instead: test_a_filter_matching_nothing_names_what_the_window_holds).
    assert code == (0 if expected else 3), err
    plan = json.loads(out)
    assert [job["job_id"] for job in plan["jobs"]] == expected
    assert (plan["command"] is None) == (not expected)


def test_a_filter_matching_nothing_names_what_the_window_holds(cli, outage, endpoint):
    # The outage's jobs gave up on http_503; the operator asked for connection_refused.
    asked = ("replay", "--since", "3h", "--state", "processing_error")
    code, out, err = cli(*asked, "--error-code", "connection_refused", "--reason", REASON)
    assert code == 3, err
    assert "to replay them" not in out and "nothing replayed" in out
    assert "matches --state processing_error --error-code connection_refused" in out
    lines = out.splitlines()
    held = {tuple(line.split()[:3]): line for line in lines[lines.index("the window holds:") + 2 :]}
    assert set(held) == {
        ("processing_error", "http_503", str(len(OUTAGE))),
        ("processing_error", "http_404", "1"),
        ("processed", "-", "2"),
        ("lost", "-", "1"),
    }
    # Each code's group, as a dry run that runs as pasted: it names exactly those jobs.
    group = held[("processing_error", "http_503", str(len(OUTAGE)))]
    argv = shlex.split(group[group.index("sume-webhooks") :])
    assert argv[:3] == ["sume-webhooks", "--endpoint-url", endpoint]
    code, out, err = cli(*argv[3:], "--output", "json")
    assert code == 0, err
    assert sorted(job["job_id"] for job in json.loads(out)["jobs"]) == sorted(OUTAGE)

    code, out, err = cli(
        *asked, "--error-code", "connection_refused", "--reason", REASON, "--output", "json"
    )
    assert code == 3, err
    plan = json.loads(out)
    assert (plan["matched"], plan["command"]) == (0, None)
    assert {(h["state"], h["error_code"]): h["count"] for h in plan["held"]} == {
        ("processing_error", "http_503"): len(OUTAGE),
        ("processing_error", "http_404"): 1,
        ("processed", None): 2,
        ("lost", None): 1,
    }
