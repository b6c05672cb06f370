# Every target creates what it needs: uv (bootstrapped with pip when absent),
# the .venv from the committed uv.lock, and (for deploy) the pinned CDK CLI.
SHELL := /bin/bash
.DEFAULT_GOAL := help

UV_VERSION := 0.13.9
UV := $(or $(shell command -v uv 2>/dev/null),$(CURDIR)/.tools/bin/uv)
VENV := .venv
PY := $(VENV)/bin/python
STAGE ?= dev
# More CDK context for synth/deploy/destroy, e.g. CONTEXT="-c alarm_email=ops@example.com"
CONTEXT ?=
# Arguments for the bench, e.g. ARGS=--quick or ARGS="--only artifacts,poller"
ARGS ?=

# jsii (behind aws-cdk-lib) and the CDK CLI: quiet, offline, caches in-tree.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export JSII_RUNTIME_PACKAGE_CACHE_ROOT := $(CURDIR)/.cache/jsii
export CDK_DISABLE_CLI_TELEMETRY := 1
export CDK_DISABLE_VERSION_CHECK := 1
export CDK_HOME := $(CURDIR)/.cache/cdk
export UV_PROJECT_ENVIRONMENT := $(CURDIR)/$(VENV)

.PHONY: help install test test-fast lint format run demo bench synth bootstrap deploy destroy clean

help:
	@echo "make run      local stack on moto: the webhook receiver on http://127.0.0.1:8080"
	@echo "make test     the whole test suite (unit, integration, infra, e2e)"
	@echo "make lint     ruff (lint + format check) and mypy"
	@echo "make demo     local stack + Sume simulator scenario, checks the invariants"
	@echo "make bench    AWS calls, CPU, cold start, throughput, cost, artifact copies, poller"
	@echo "              capacity; ARGS=--quick, ARGS=\"--only artifacts,poller\", ARGS=--help"
	@echo "make synth    cdk synth (offline) into cdk.out/"
	@echo "make deploy   cdk deploy STAGE=$(STAGE) (needs AWS credentials)"
	@echo "make destroy  cdk destroy STAGE=$(STAGE) (dev stages delete their data)"

$(CURDIR)/.tools/bin/uv:
	python3 -m venv .tools
	.tools/bin/pip install --quiet "uv==$(UV_VERSION)"

$(VENV)/.synced: pyproject.toml uv.lock | $(UV)
	$(UV) sync --frozen --all-extras --quiet
	@touch $@

install: $(VENV)/.synced

test: install
	$(PY) -m pytest

test-fast: install
	$(PY) -m pytest tests/unit tests/integration

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

format: install
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

run: install
	$(PY) -m devtools.localstack

demo: install
	$(PY) -m devtools.demo

bench: install
	$(PY) -m devtools.bench $(ARGS)

synth: install
	CDK_OUTDIR=cdk.out $(PY) app.py -c stage=$(STAGE) $(CONTEXT)

node_modules/.bin/cdk: package.json package-lock.json
	npm ci --no-audit --no-fund --silent
	@touch $@

bootstrap: install node_modules/.bin/cdk
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" node_modules/.bin/cdk bootstrap --no-notices -c stage=$(STAGE) $(CONTEXT)

deploy: install node_modules/.bin/cdk
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" node_modules/.bin/cdk deploy --no-notices -c stage=$(STAGE) $(CONTEXT)

destroy: install node_modules/.bin/cdk
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" node_modules/.bin/cdk destroy --no-notices -c stage=$(STAGE) $(CONTEXT)

clean:
	rm -rf $(VENV) .tools .cache cdk.out .pytest_cache .mypy_cache .ruff_cache
