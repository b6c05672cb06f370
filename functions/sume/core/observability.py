"""The Powertools logger, metrics and tracer shared by the three handlers."""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics, Tracer

from sume.core.names import METRICS_NAMESPACE, SERVICE_NAME

# Service and namespace are pinned here, not left to the environment: the
# stack's alarms select these exact metrics by namespace and service.
logger = Logger(service=SERVICE_NAME)
metrics = Metrics(namespace=METRICS_NAMESPACE, service=SERVICE_NAME)
# Only botocore is worth a subsegment here; patching every library the X-Ray
# SDK knows imports them all and was most of the receiver's cold-start excess.
tracer = Tracer(service=SERVICE_NAME, patch_modules=["botocore"])
