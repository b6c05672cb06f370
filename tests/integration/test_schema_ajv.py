"""docs/integrating.md's ajv code, run exactly, over the committed schemas.

The events are the worker's own announcements on moto, in every outcome (so
the files, the code and the documented ajv setup cannot drift apart), and the
events applications put; each is checked whole and its detail alone, and
events no sender may put or no announcement may carry are refused.
"""

import json
import os
import subprocess
import time

from infra.spec import SCHEMAS_DIR
from sume.core.names import DETAIL_TYPES, REGISTRATION_DETAIL_TYPE, REGISTRATION_REFUSED_DETAIL_TYPE
from sume.polling import registration
from tests.builders import job_body
from tests.integration.test_announcement_schemas import CASES
from tests.integration.test_worker import World, deliver, run
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


def problems(tmp_path, cases):
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
    return json.loads(answer.stdout)


def envelope(detail_type, source, detail, resources=()):
    return {
        "version": "0",
        "id": "6a7e8feb-b491-4cf7-a9f1-bf3703467718",
        "detail-type": detail_type,
        "source": source,
        "account": "123456789012",
        "time": "2026-12-01T12:00:00Z",
        "region": "eu-west-1",
        "resources": list(resources),
        "detail": detail,
    }


def both(event):
    """The event whole, and its detail alone."""
    return [[None, event], [event["detail-type"], event["detail"]]]


URL = "https://api.sume.example/v1/jobs/job_1"
REGISTRATION = {"job_id": "job_1", "status_url": URL, "metadata": {"order": "o-7"}}
LOST = {
    "version": 1,
    "job_id": "job_1",
    "sequence": 1,
    "metadata": {"order": "o-7"},
    "registered_at": "2026-11-29T12:00:00Z",
    "lost_at": "2026-12-01T12:00:00Z",
    "polls": 12,
    "last_poll_error": "http_503",
    "replay": False,
}
REFUSED = {
    "version": 1,
    "reason": registration.REFUSAL_REASONS[0],
    "message": "status_url must be an absolute http(s) URL",
    "job_id": "job_1",
    "registration_event_id": "6a7e8feb-b491-4cf7-a9f1-bf3703467718",
    "refused_at": "2026-12-01T12:00:00Z",
}


def put_by_applications_and_the_poller():
    return {
        REGISTRATION_DETAIL_TYPE: envelope(
            REGISTRATION_DETAIL_TYPE, "com.example.orders", REGISTRATION
        ),
        DETAIL_TYPES["lost"]: envelope(DETAIL_TYPES["lost"], "sume.webhooks", LOST),
        REGISTRATION_REFUSED_DETAIL_TYPE: envelope(
            REGISTRATION_REFUSED_DETAIL_TYPE, "sume.webhooks", REFUSED
        ),
    }


# Each outcome's announcement; the one cut to fit (hundreds of artifacts, slow on
# moto) is checked against the same files by test_announcement_schemas.
OUTCOMES = {name: case for name, case in CASES.items() if name != "truncated artifacts"}


def test_every_announcement_the_worker_puts_and_every_event_put_is_valid(
    aws, server, local_urls, tmp_path
):
    world = World(aws)
    for make, _ in OUTCOMES.values():
        job_id = make(world, server)
        assert run(job_id)[1] == []
    assert world.table.request_replay(job_id, int(time.time()), int(time.time()) + 120)
    assert run(job_id)[1] == []
    announced = world.announcements()
    assert len(announced) == len(OUTCOMES) + 1
    events = [*announced, *put_by_applications_and_the_poller().values()]
    covered = {event["detail-type"] for event in events}
    assert {f"{t.replace(' ', '')}.json" for t in covered} == {
        p.name for p in SCHEMAS_DIR.glob("*.json")
    }

    cases = [case for event in events for case in both(event)]
    assert problems(tmp_path, cases) == [[]] * len(cases)


def test_what_no_sender_may_put_and_no_announcement_may_carry_is_refused(tmp_path):
    put = put_by_applications_and_the_poller()
    registered = put[REGISTRATION_DETAIL_TYPE]
    lost = put[DETAIL_TYPES["lost"]]
    refused = put[REGISTRATION_REFUSED_DETAIL_TYPE]
    wrong = [
        [REGISTRATION_DETAIL_TYPE, {**REGISTRATION, "status_url": "ftp://x/y"}],
        [REGISTRATION_DETAIL_TYPE, {**REGISTRATION, "metdata": {}}],
        [REGISTRATION_DETAIL_TYPE, {"status_url": URL}],
        # The whole-event schema wants what EventBridge adds: not a sender's check.
        [None, {"detail-type": REGISTRATION_DETAIL_TYPE, "detail": REGISTRATION}],
        [None, {**registered, "detail-type": "Sume Job Submitted again"}],
        [None, {**lost, "detail": {**LOST, "lost_at": None}}],
        [None, {**lost, "resources": ["arn:aws:s3:::b/k"]}],
        [None, {**lost, "source": "com.example.orders"}],
        [None, {**refused, "detail": {**REFUSED, "reason": "not_a_reason"}}],
        [None, {**refused, "detail": {**REFUSED, "refused_at": "2026-12-01 12:00"}}],
        [REGISTRATION_REFUSED_DETAIL_TYPE, {**REFUSED, "registration_event_id": 7}],
    ]
    answers = problems(tmp_path, wrong)
    assert [case for case, answer in zip(wrong, answers, strict=True) if not answer] == []


def test_an_announcement_of_one_ending_cannot_say_another(aws, server, local_urls, tmp_path):
    world = World(aws)
    job_id = deliver(job_body(artifacts=[server.route("/a.mp4", body=b"a")]))
    assert run(job_id)[1] == []
    (event,) = world.announcements()
    detail = event["detail"]
    wrong = [
        [None, {**event, "detail": {**detail, "outcome": "failed"}}],
        [None, {**event, "detail": {**detail, "event": "job.canceled"}}],
        [DETAIL_TYPES["completed"], {**detail, "outcome": "lost"}],
        [DETAIL_TYPES["completed"], {**detail, "artifacts": [{"bucket": "b"}]}],
        [None, {**event, "detail-type": DETAIL_TYPES["failed"]}],
    ]
    answers = problems(tmp_path, wrong)
    assert [case for case, answer in zip(wrong, answers, strict=True) if not answer] == []
    assert problems(tmp_path, both(event)) == [[], []]
