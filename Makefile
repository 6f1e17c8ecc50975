# tickwork — every target installs what it needs from the package registries and starts the
# local servers it uses (scripts/with-servers.sh stops them on exit, pass or fail).
SHELL := /bin/bash
.DEFAULT_GOAL := help

MOTO_VERSION     := 5.2.5
CFN_LINT_VERSION := 1.58.0
DYNALITE_VERSION := 4.0.0
VENV     := .venv
DYNALITE := .tools/dynalite/node_modules/dynalite/cli.js
CARGO    ?= cargo
WITH_SERVERS := scripts/with-servers.sh

.PHONY: help deps test lint fmt clippy cfn-lint run bench servers prove-lock clean

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

$(VENV)/.moto-$(MOTO_VERSION):
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check 'moto[server]==$(MOTO_VERSION)'
	touch $@

$(DYNALITE):
	mkdir -p .tools/dynalite
	cd .tools/dynalite && npm install --no-audit --no-fund --silent dynalite@$(DYNALITE_VERSION)

# cfn-lint in its own virtualenv (the SAM CLI, when added, pins an older boto3 than moto).
.tools/cfn/.cfn-lint-$(CFN_LINT_VERSION):
	python3 -m venv .tools/cfn
	.tools/cfn/bin/pip install --quiet --disable-pip-version-check 'cfn-lint==$(CFN_LINT_VERSION)'
	touch $@

deps: $(VENV)/.moto-$(MOTO_VERSION) $(DYNALITE) ## install the local DynamoDB/S3 servers (moto, dynalite)

fmt: ## check formatting
	$(CARGO) fmt --all -- --check

clippy: ## lint Rust, warnings are errors
	$(CARGO) clippy --workspace --all-targets -- -D warnings

cfn-lint: .tools/cfn/.cfn-lint-$(CFN_LINT_VERSION) ## lint template.yaml
	.tools/cfn/bin/cfn-lint template.yaml

lint: fmt clippy cfn-lint ## every static check

test: deps lint ## static checks, unit tests, and integration tests against the local servers
	$(WITH_SERVERS) $(CARGO) test --workspace

prove-lock: deps ## show that bare moto loses concurrent updates (expects the atomicity tests to FAIL)
	@if TICKWORK_MOTO_UNLOCKED=1 TICKWORK_NO_DYNALITE=1 $(WITH_SERVERS) $(CARGO) test -p tickwork-tests --test it atomicity; \
	then echo "unexpected: bare moto kept every update this time"; exit 1; \
	else echo "as expected: without the lock, moto lost updates (see the assertion values above)"; fi

run: deps ## the pulse sweep end to end, locally: 1,000 tenants, 3 workers, 3 simulated days
	$(CARGO) build -p tickwork-sim
	TICKWORK_MOTO_SWITCH_INTERVAL=0.005 TICKWORK_NO_DYNALITE=1 $(WITH_SERVERS) target/debug/tickwork-sim

bench: deps ## capacity and throughput figures, side by side, against the local servers
	$(CARGO) build -p tickwork-bench
	TICKWORK_MOTO_SWITCH_INTERVAL=0.005 TICKWORK_NO_DYNALITE=1 $(WITH_SERVERS) target/debug/tickwork-bench $(BENCH)

servers: deps ## run the local servers in the foreground (Ctrl-C stops them); prints the endpoints
	$(WITH_SERVERS) bash -c 'env | grep -E "^(AWS_ENDPOINT_URL|TICKWORK_DYNALITE)"; echo "Ctrl-C to stop"; sleep infinity'

clean: ## remove build output and local tools
	rm -rf target $(VENV) .tools .local
