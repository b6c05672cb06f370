"""``make bench``: what a delivery, a job, a copy and a poll cost, each against its floor
(dev-only, offline: AWS is moto or botocore's Stubber, every server on loopback)."""
