"""From the page to the fix on the local stack, following only what the tool prints.

An artifact origin answers 503 for a while: the jobs finished meanwhile give up
(``processing_error``) and ``ProcessingErrors`` pages. Its text (infra's own
builder, for the local stack's CLI instead of a stage's) names ``report``; from
there each command is one the tool printed, run exactly as printed, with the
console script as an operator starts it from the project root, until ``report
--check`` passes. The operator's only own act is fixing the origin.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import time
from collections.abc import Iterable, Iterator

import pytest

from devstack.simulator import Sume, SumeJob
from infra.monitoring import processing_errors_text
from sume.store.job import State
from sume_cli.invocation import PROG
from tests.e2e.conftest import environment
from tests.e2e.own_stack import ROOT, OwnStack, own_stack

# The console script, as an operator in the project root types it.
PROGRAM = ".venv/bin/sume-webhooks"
DOWN = 10**6
"""A flaky count no test reaches: the link answers 503 until it is set to 0."""
# The hang guard: ten CLI processes, each a Python start with boto3, and a stack
# started in a child take 25 s on a quiet machine and several times that beside two
# busy suites; the suite's 120 s is for one in-process round.
pytestmark = pytest.mark.timeout(300)
# A printed next step: ``next: [when: ]COMMAND  (why)``.
NEXT = re.compile(r"^\s*next: (?:while the cause persists: )?(?P<command>.+?)  \([^()]*\)$")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OwnStack]:
    """A stack of its own: ``report --check`` reads every job of the day, and the
    package's other tests leave problems of their own in the shared one."""
    with own_stack(tmp_path_factory.mktemp("own-stack")) as local:
        yield local


def shell_env() -> dict[str, str]:
    """The operator's shell: nothing of the package stack's environment."""
    return {k: v for k, v in environment().items() if not k.startswith("AWS_")}


def run(argv: list[str], *expected: int) -> str:
    """One command as printed, as the shell would run it; what it printed (stdout,
    then stderr: the notes and ``check`` lines)."""
    # As started; the bare name when the shell's PATH finds that same script.
    assert argv[0] in (PROGRAM, PROG), argv
    done = subprocess.run(
        argv, check=False, cwd=ROOT, env=shell_env(), capture_output=True, text=True, timeout=120
    )
    assert done.returncode in (expected or (0,)), (argv, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    return done.stdout + done.stderr


def run_json(argv: list[str]) -> dict:
    done = subprocess.run(
        argv, check=False, cwd=ROOT, env=shell_env(), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def printed(text: str, prefix: str) -> list[list[str]]:
    """The commands printed in backticks that start with ``prefix``, as argv."""
    return [shlex.split(c) for c in re.findall(r"`([^`]+)`", text) if c.startswith(prefix)]


def next_steps(output: str) -> list[list[str]]:
    return [shlex.split(m["command"]) for line in output.splitlines() if (m := NEXT.match(line))]


def states(stack: OwnStack, jobs: Iterable[SumeJob]) -> set[str | None]:
    table = stack.jobs()
    return {getattr(table.get(job.job_id), "state", None) for job in jobs}


def wait_for(stack: OwnStack, jobs: list[SumeJob], state: str) -> None:
    while states(stack, jobs) != {state}:
        time.sleep(0.2)  # pytest's timeout bounds a hang


def test_from_the_processing_errors_page_to_a_passing_check(stack: OwnStack) -> None:
    local = shlex.join([PROGRAM, "--endpoint-url", stack.endpoint_url, "--prefix", stack.prefix])
    page = processing_errors_text(local)
    (report,) = printed(page, f"{local} report")[:1]
    (check,) = printed(page, f"{local} report --check")
    assert check == [*report, "--check"]

    with Sume(stack.url, [stack.signing_secret], spacing_seconds=0.05) as sume:
        outage = [sume.new_job(artifacts=1, flaky=DOWN) for _ in range(3)]
        fine = sume.new_job(artifacts=1)
        for job in (*outage, fine):
            assert sume.deliver(job).delivered
        wait_for(stack, outage, State.PROCESSING_ERROR)
        wait_for(stack, [fine], State.PROCESSED)

        # The page: the report names the group and what puts all of it right.
        shown = run(report)
        assert "processing_error http_503: 3 job(s): " in shown
        assert all(job.job_id in shown for job in outage)
        pause, dry_run = next_steps(shown)
        assert pause[-4:-1] == ["pause", "worker", "--reason"]
        assert "--dry-run" in dry_run and dry_run[dry_run.index("--error-code") + 1] == "http_503"
        run(check, 3)

        run(pause)
        # The origin is fixed: the operator's own act.
        for job in outage:
            job.flaky = 0

        # While paused the report no longer says pause, and says resume.
        shown = run(report)
        dry_run_again, resume = next_steps(shown)
        assert dry_run_again == dry_run
        assert resume[-2:] == ["resume", "worker"]
        listed = run(dry_run)
        (replay_line,) = [line for line in listed.splitlines() if line.startswith("to replay")]
        replay = shlex.split(replay_line.partition(": ")[2])
        assert all(job.job_id in listed for job in outage) and fine.job_id not in listed
        run(replay)
        run(resume)
        wait_for(stack, outage, State.PROCESSED)

        passed = run(check)
        assert passed.strip().splitlines()[-1].startswith("check passed: ")
    stored = stack.jobs()
    for job in outage:
        item = stored.get(job.job_id)
        assert item is not None and (item.replays, item.artifact_count) == (1, 1)
    untouched = stored.get(fine.job_id)
    assert untouched is not None and untouched.replays is None


def test_the_json_report_gives_the_same_commands_as_argv(stack: OwnStack) -> None:
    # What a script reads: the text's commands, split as a shell would, are the argv.
    local = [PROGRAM, "--endpoint-url", stack.endpoint_url, "--prefix", stack.prefix]
    with Sume(stack.url, [stack.signing_secret], spacing_seconds=0.05) as sume:
        broken = [sume.new_job(artifacts=1, flaky=DOWN) for _ in range(2)]
        for job in broken:
            assert sume.deliver(job).delivered
        wait_for(stack, broken, State.PROCESSING_ERROR)
        text = run([*local, "report"])
        body = run_json([*local, "report", "--output", "json"])
    assert [step["argv"] for step in body["next"]] == next_steps(text)
