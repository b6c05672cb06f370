"""What the three functions share, from the one factory (``infra/functions/factory.py``,
imported in the tests: it imports the CDK, which starts a jsii runtime)."""

from __future__ import annotations

import json
import tomllib
from fnmatch import fnmatch
from typing import Any

from infra import spec
from sume.core.names import METRICS_NAMESPACE, SERVICE_NAME
from tests.infra.conftest import ROOT, Stage, ref_name

# name -> (handler, timeout, memory): what the bench and the docs quote.
FUNCTIONS = {
    "Receiver": ("receiver.handler", spec.RECEIVER_TIMEOUT, spec.RECEIVER_MEMORY_MB),
    "Worker": ("worker.handler", spec.WORKER_TIMEOUT, spec.WORKER_MEMORY_MB),
    "Poller": ("poller.handler", spec.POLLER_TIMEOUT, spec.POLLER_MEMORY_MB),
}


def test_three_functions_share_runtime_architecture_layer_and_tracing(dev: Stage) -> None:
    from infra.functions.factory import POWERTOOLS_LAYER_PARAMETER, POWERTOOLS_VERSION

    layer_param = next(
        key
        for key, p in dev.template["Parameters"].items()
        if p.get("Default") == POWERTOOLS_LAYER_PARAMETER
    )
    assert dev.template["Parameters"][layer_param]["Type"] == "AWS::SSM::Parameter::Value<String>"
    assert (
        f"/aws/service/powertools/python/arm64/python3.13/{POWERTOOLS_VERSION}"
    ) == POWERTOOLS_LAYER_PARAMETER
    code = {json.dumps(dev.function(name)["Code"]) for name in FUNCTIONS}
    assert len(code) == 1, "the three functions must run the one functions/ asset"
    for name, (handler, timeout, memory) in FUNCTIONS.items():
        props = dev.function(name)
        assert props["Handler"] == handler
        assert props["Runtime"] == "python3.13"
        assert props["Architectures"] == ["arm64"]
        assert props["Layers"] == [{"Ref": layer_param}]
        assert props["TracingConfig"] == {"Mode": "Active"}
        assert (props["Timeout"], props["MemorySize"]) == (timeout, memory)
        logging = props["LoggingConfig"]
        assert logging["LogFormat"] == "JSON"
        assert logging["ApplicationLogLevel"] == "INFO"
        assert ref_name(logging["LogGroup"]) == f"Functions{name}Logs"
        _, group = dev.one(f"Functions{name}Logs", "AWS::Logs::LogGroup")
        assert group["Properties"]["RetentionInDays"] == 30
        env = props["Environment"]["Variables"]
        assert env["POWERTOOLS_SERVICE_NAME"] == SERVICE_NAME
        assert env["POWERTOOLS_METRICS_NAMESPACE"] == METRICS_NAMESPACE
        assert env["POWERTOOLS_LOG_LEVEL"] == "INFO"
        assert env["POWERTOOLS_LOGGER_LOG_EVENT"] == "false"


def test_powertools_layer_is_the_version_pinned_in_pyproject() -> None:
    from infra.functions.factory import POWERTOOLS_VERSION

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    pins = [d for d in project["project"]["dependencies"] if d.startswith("aws-lambda-powertools")]
    assert pins == [f"aws-lambda-powertools[tracer]=={POWERTOOLS_VERSION}"]


def test_payload_keys_granted_are_the_ones_the_payload_store_writes() -> None:
    from infra.functions.factory import PAYLOADS_PREFIX
    from sume.store.payloads import PayloadStore

    class Recorder:
        key = ""

        def put_object(self, **kwargs: Any) -> None:
            self.key = kwargs["Key"]

    recorder = Recorder()
    PayloadStore(lambda: recorder, "bucket").put("job/1", "{}")
    assert recorder.key.startswith("events/")
    assert fnmatch(recorder.key, PAYLOADS_PREFIX)


def test_every_event_source_is_capped(dev: Stage, prod: Stage) -> None:
    # No queue, whoever fills it, can take more of the account's concurrency
    # than its cap (docs/operations.md, "Capacity plan").
    for stage in (dev, prod):
        mappings = stage.of_type("AWS::Lambda::EventSourceMapping").values()
        assert {ref_name(m["Properties"]["EventSourceArn"]) for m in mappings} == {
            "JobsQueue",
            "RegistrationsQueue",
            "PollerScheduleShards",
        }
        for mapping in mappings:
            cap = mapping["Properties"]["ScalingConfig"]["MaximumConcurrency"]
            assert 2 <= cap <= 1000
