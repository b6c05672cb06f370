"""docs/integrating.md's ajv code, run exactly, over the committed schemas.

Every event checked is one the code produced on moto: the worker's
announcements in every outcome, a lost job's and a refused registration's, a
registration event as the poller's queue receives it (so the files, the code
and the documented ajv setup cannot drift apart). Each is checked whole and
its detail alone; the same events made wrong are refused.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from typing import Any

import poller
from devstack.eventsources import sqs_records
from infra.spec import SCHEMAS_DIR
from sume.core.names import DETAIL_TYPES, REGISTRATION_DETAIL_TYPE, REGISTRATION_REFUSED_DETAIL_TYPE
from tests.builders import LambdaContext, job_body
from tests.integration.test_announcement_schemas import CASES
from tests.integration.test_endings import give_up, world  # noqa: F401 - a fixture
from tests.integration.test_registration_events import bus  # noqa: F401 - a fixture
from tests.integration.test_worker import deliver, run
from tests.schema_tools import SCHEMA_CHECK, code_block, installed

# What the test adds after the documented code: every case checked, one answer each.
HARNESS = """
const ajv = loadSchemas(process.env.SCHEMAS);
const cases = JSON.parse(readFileSync(process.env.CASES, "utf8"));
const answers = cases.map(([detailType, value]) =>
  detailType === null ? checkEvent(ajv, value) : checkDetail(ajv, detailType, value),
);
console.log(JSON.stringify(answers));
"""
# Each outcome's announcement; the one cut to fit (hundreds of artifacts, slow on
# moto) is checked against the same files by test_announcement_schemas.
OUTCOMES = {name: case for name, case in CASES.items() if name != "truncated artifacts"}
URL = "https://api.sume.example/v1/jobs/job_1"


def problems(tmp_path, cases: list[list[Any]]) -> list[list[str]]:
    """What the documented checks say of each case: [] when it is valid."""
    for package in ("ajv", "ajv-draft-04", "ajv-formats"):
        installed(package)
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(cases))
    # Module code from stdin resolves its imports from the working directory.
    answer = subprocess.run(
        ["node", "--input-type=module"],
        input=code_block("### Validating with ajv", "js") + HARNESS,
        cwd=SCHEMA_CHECK,
        env={"SCHEMAS": str(SCHEMAS_DIR), "CASES": str(path), "PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert answer.stderr == ""
    answers: list[list[str]] = json.loads(answer.stdout)
    return answers


def both(event: dict[str, Any]) -> list[list[Any]]:
    """The event whole, and its detail alone."""
    return [[None, event], [event["detail-type"], event["detail"]]]


def accepted(tmp_path, wrong: list[list[Any]]) -> list[list[Any]]:
    """The cases of ``wrong`` the documented checks took."""
    answers = problems(tmp_path, wrong)
    return [case for case, answer in zip(wrong, answers, strict=True) if not answer]


def test_every_job_announcement_is_valid_and_one_made_wrong_is_not(
    aws,
    sume,
    world,  # noqa: F811
    server,
    local_urls,
    tmp_path,
):
    for make, _ in OUTCOMES.values():
        job_id = make(world, server)
        assert run(job_id)[1] == []
    assert world.table.request_replay(job_id, int(time.time()), int(time.time()) + 120)
    assert run(job_id)[1] == []
    give_up(aws, sume, "job_lost", time.time())
    assert run("job_lost")[1] == []
    deliver(job_body("job_lost", artifacts=[]))
    assert run("job_lost")[1] == []

    announced = world.announcements()
    assert len(announced) == len(OUTCOMES) + 3
    assert {event["detail-type"] for event in announced} == set(DETAIL_TYPES.values())
    cases = [case for event in announced for case in both(event)]
    assert problems(tmp_path, cases) == [[]] * len(cases)

    by_type = {event["detail-type"]: event for event in announced}
    completed, lost = by_type[DETAIL_TYPES["completed"]], by_type[DETAIL_TYPES["lost"]]
    done, gone = completed["detail"], lost["detail"]
    wrong: list[list[Any]] = [
        [None, {**completed, "detail": {**done, "outcome": "failed"}}],
        [None, {**completed, "detail": {**done, "event": "job.canceled"}}],
        [None, {**completed, "detail-type": DETAIL_TYPES["failed"]}],
        [None, {k: v for k, v in completed.items() if k != "account"}],
        [DETAIL_TYPES["completed"], {**done, "sequence": 0}],
        [DETAIL_TYPES["completed"], {**done, "metadata": [1]}],
        [DETAIL_TYPES["completed"], {**done, "artifacts": [{"bucket": "b"}]}],
        [DETAIL_TYPES["completed"], {**done, "lost_at": "yesterday"}],
        [None, {**lost, "detail": {**gone, "lost_at": None}}],
        [None, {**lost, "resources": ["arn:aws:s3:::b/k"]}],
        [None, {**lost, "source": "com.example.orders"}],
        [DETAIL_TYPES["lost"], {k: v for k, v in gone.items() if k != "polls"}],
    ]
    assert accepted(tmp_path, wrong) == []


def test_a_registration_and_its_refusal_are_valid_and_made_wrong_are_not(
    aws,
    bus,  # noqa: F811
    tmp_path,
):
    bus.put({"job_id": "job_1", "status_url": URL, "metadata": {"order": "o-7"}})
    # Valid as the schema says, refused by the stack: its host is not on the allow-list.
    bus.put({"job_id": "job_2", "status_url": "https://elsewhere.example/v1/jobs/job_2"})
    messages = bus.received()
    put = [json.loads(m["Body"]) for m in messages]
    arn = "arn:aws:sqs:us-east-1:123456789012:registrations"
    poller.handler(sqs_records(messages, arn), LambdaContext())

    (refusal,) = bus.announcements()
    assert refusal["detail-type"] == REGISTRATION_REFUSED_DETAIL_TYPE
    cases = [case for event in [*put, refusal] for case in both(event)]
    assert problems(tmp_path, cases) == [[]] * len(cases)

    registered = next(e for e in put if e["detail"]["job_id"] == "job_1")
    detail, refused = registered["detail"], refusal["detail"]
    wrong: list[list[Any]] = [
        [REGISTRATION_DETAIL_TYPE, {**detail, "status_url": "ftp://x/y"}],
        [REGISTRATION_DETAIL_TYPE, {**detail, "metdata": {}}],
        [REGISTRATION_DETAIL_TYPE, {"status_url": URL}],
        # The whole-event schema wants what EventBridge adds: not a sender's check.
        [None, {"detail-type": REGISTRATION_DETAIL_TYPE, "detail": detail}],
        [None, {**refusal, "detail": {**refused, "reason": "not_a_reason"}}],
        [None, {**refusal, "detail": {**refused, "refused_at": "2026-12-01 12:00"}}],
        [REGISTRATION_REFUSED_DETAIL_TYPE, {**refused, "registration_event_id": 7}],
    ]
    assert accepted(tmp_path, wrong) == []


def test_each_problem_names_the_property_at_fault(tmp_path):
    """An integrator reads which property to fix, even one that is missing or extra."""
    detail = {"job_id": "job_1", "status_url": URL, "metadata": {"order": "o-7"}}
    wrong: list[list[Any]] = [
        [REGISTRATION_DETAIL_TYPE, {**detail, "metdata": {}}],
        [REGISTRATION_DETAIL_TYPE, {"status_url": URL}],
        [REGISTRATION_DETAIL_TYPE, {**detail, "status_url": "ftp://x/y"}],
        [REGISTRATION_DETAIL_TYPE, {**detail, "metadata": [1]}],
        [None, {"detail-type": REGISTRATION_DETAIL_TYPE, "detail": {"status_url": URL}}],
    ]
    answers = problems(tmp_path, wrong)
    assert answers[:4] == [
        ["/metdata: must NOT have additional properties"],
        ["/job_id: must have required property 'job_id'"],
        ['/status_url: must match pattern "^[Hh][Tt][Tt][Pp][Ss]?://"'],
        ["/metadata: must be object,null"],
    ]
    assert "/detail/job_id: must have required property 'job_id'" in answers[4]


def test_the_command_line_runs_the_documented_code(tmp_path):
    """validate.mjs checks with events.mjs, which is the documented code, character
    for character; it names each problem's property and answers by exit status."""
    assert (SCHEMA_CHECK / "events.mjs").read_text() == code_block("### Validating with ajv", "js")
    good = {"job_id": "job_1", "status_url": URL}
    (tmp_path / "good.json").write_text(json.dumps(good))
    (tmp_path / "bad.json").write_text(json.dumps({**good, "metdata": {}}))
    (tmp_path / "event.json").write_text(json.dumps({"detail-type": "Sume Job Lost"}))
    (tmp_path / "broken.json").write_text("{")

    def validate(*args: str) -> tuple[int, str]:
        done = subprocess.run(
            ["node", str(SCHEMA_CHECK / "validate.mjs"), *args],
            check=False,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
        return done.returncode, done.stdout + done.stderr

    detail = ["--detail", REGISTRATION_DETAIL_TYPE]
    assert validate(*detail, "good.json") == (0, "good.json: ok\n")
    assert validate(*detail, "good.json", "bad.json") == (
        1,
        "good.json: ok\nbad.json: /metdata: must NOT have additional properties\n",
    )
    status, out = validate("event.json")
    assert status == 1
    assert "event.json: /detail: must have required property 'detail'" in out.splitlines()
    assert validate(*detail, "broken.json")[0] == 2
    assert validate("--detail", "Sume Job Nothing", "good.json")[0] == 2
    assert validate()[0] == 2
