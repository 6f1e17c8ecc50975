# tickwork — every target installs what it needs from the package registries and starts the
# local servers it uses (scripts/with-servers.sh stops them on exit, pass or fail).
SHELL := /bin/bash
.DEFAULT_GOAL := help

MOTO_VERSION         := 5.2.5
CFN_LINT_VERSION     := 1.58.0
SAM_CLI_VERSION      := 1.170.0
CARGO_LAMBDA_VERSION := 1.9.2
ZIG_VERSION          := 0.15.2
DYNALITE_VERSION     := 4.0.0
CHECKOV_VERSION      := 3.3.30
VENV     := .venv
SAM_VENV := .tools/sam
SAM      := SAM_CLI_TELEMETRY=0 AWS_DEFAULT_REGION=$${AWS_DEFAULT_REGION:-us-east-1} $(SAM_VENV)/bin/sam
LAMBDA_VENV := .tools/lambda
# cargo finds the `cargo-lambda` subcommand (and cargo-lambda finds zig) on PATH.
LAMBDA_PATH := PATH="$(CURDIR)/$(LAMBDA_VENV)/bin:$$PATH"
FUNCTIONS := pulse-sweep tenant-fanout queue-worker archiver control
DYNALITE := .tools/dynalite/node_modules/dynalite/cli.js
CARGO    ?= cargo
WITH_SERVERS := scripts/with-servers.sh

.PHONY: help deps tools test iam-check chaos lint fmt clippy cfn-lint sam-validate checkov build release deploy stack-env watch run demo bench dev servers prove-lock clean \
	$(addprefix invoke-,$(FUNCTIONS))

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'
	@echo "  make invoke-<fn> send events/<fn>.json to the running \`make watch\` (<fn>: $(FUNCTIONS))"

$(VENV)/.moto-$(MOTO_VERSION):
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check 'moto[server]==$(MOTO_VERSION)'
	touch $@

$(DYNALITE):
	mkdir -p .tools/dynalite
	cd .tools/dynalite && npm install --no-audit --no-fund --silent dynalite@$(DYNALITE_VERSION)

# The SAM CLI and cfn-lint in their own virtualenv: SAM pins an older boto3 than moto. SAM 1.170.0
# itself depends on cfn-lint 1.58.0, so `sam validate --lint` and `cfn-lint` run the same linter.
$(SAM_VENV)/.sam-$(SAM_CLI_VERSION)-cfn-$(CFN_LINT_VERSION):
	python3 -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/pip install --quiet --disable-pip-version-check \
	  'aws-sam-cli==$(SAM_CLI_VERSION)' 'cfn-lint==$(CFN_LINT_VERSION)'
	touch $@

# cargo-lambda as the prebuilt wheel from PyPI (`cargo install cargo-lambda` takes ~15 min here),
# with zig for the arm64 cross build.
$(LAMBDA_VENV)/.cargo-lambda-$(CARGO_LAMBDA_VERSION)-zig-$(ZIG_VERSION):
	python3 -m venv $(LAMBDA_VENV)
	$(LAMBDA_VENV)/bin/pip install --quiet --disable-pip-version-check \
	  'cargo-lambda==$(CARGO_LAMBDA_VERSION)' 'ziglang==$(ZIG_VERSION)'
	touch $@

# checkov in its own virtualenv too (its dependencies pin other versions than SAM's).
CHECKOV_VENV := .tools/checkov
$(CHECKOV_VENV)/.checkov-$(CHECKOV_VERSION):
	python3 -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/pip install --quiet --disable-pip-version-check 'checkov==$(CHECKOV_VERSION)'
	touch $@

# The example target handlers in their real runtimes (tests/it/targets.rs): Python under
# awslambdaric (PyPI, a manylinux wheel), JavaScript under aws-lambda-ric (npm), whose native
# client builds from source with cmake (PyPI) and autotools (Debian).
PY_HANDLER_VENV := .tools/python-handler
PY_HANDLER_DEP  := $(PY_HANDLER_VENV)/.deps
JS_HANDLER_DEP  := examples/javascript-handler/node_modules/.deps
CMAKE_VENV      := .tools/cmake
CMAKE_VERSION   := 4.4.5
$(PY_HANDLER_DEP): examples/python-handler/requirements.txt
	python3 -m venv $(PY_HANDLER_VENV)
	$(PY_HANDLER_VENV)/bin/pip install --quiet --disable-pip-version-check -r examples/python-handler/requirements.txt
	touch $@
$(JS_HANDLER_DEP): examples/javascript-handler/package.json
	@command -v autoreconf >/dev/null && command -v libtoolize >/dev/null || { \
	  sudo=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$sudo apt-get install -y --no-install-recommends autoconf automake libtool make g++ \
	  || { $$sudo apt-get update && $$sudo apt-get install -y --no-install-recommends autoconf automake libtool make g++; }; }
	test -x $(CMAKE_VENV)/bin/cmake || { python3 -m venv $(CMAKE_VENV) && $(CMAKE_VENV)/bin/pip install --quiet --disable-pip-version-check 'cmake==$(CMAKE_VERSION)'; }
	cd examples/javascript-handler && PATH="$(CURDIR)/$(CMAKE_VENV)/bin:$$PATH" npm install --no-audit --no-fund --silent
	touch $@

# The control function's clients in their real runtimes (tests/it/control.rs): the Python client
# installed from its path with boto3 (PyPI), the TypeScript client's @aws-sdk/client-lambda (npm).
PY_CLIENT_VENV := .tools/python-client
PY_CLIENT_DEP  := $(PY_CLIENT_VENV)/.deps
TS_CLIENT_DEP  := clients/typescript/node_modules/.deps
$(PY_CLIENT_DEP): clients/python/pyproject.toml clients/python/tickwork_control/__init__.py
	python3 -m venv $(PY_CLIENT_VENV)
	$(PY_CLIENT_VENV)/bin/pip install --quiet --disable-pip-version-check ./clients/python
	touch $@
$(TS_CLIENT_DEP): clients/typescript/package.json
	cd clients/typescript && npm install --no-audit --no-fund --silent
	touch $@

SAM_DEP    := $(SAM_VENV)/.sam-$(SAM_CLI_VERSION)-cfn-$(CFN_LINT_VERSION)
CHECKOV_DEP := $(CHECKOV_VENV)/.checkov-$(CHECKOV_VERSION)
LAMBDA_DEP := $(LAMBDA_VENV)/.cargo-lambda-$(CARGO_LAMBDA_VERSION)-zig-$(ZIG_VERSION)

deps: $(VENV)/.moto-$(MOTO_VERSION) $(DYNALITE) $(PY_HANDLER_DEP) $(JS_HANDLER_DEP) $(PY_CLIENT_DEP) $(TS_CLIENT_DEP) ## install the local servers (moto, dynalite), the example handlers' runtimes and the control clients

tools: $(SAM_DEP) $(LAMBDA_DEP) ## install the SAM CLI, cfn-lint, cargo-lambda and zig (own virtualenvs)

fmt: ## check formatting
	$(CARGO) fmt --all -- --check

clippy: ## lint Rust, warnings are errors
	$(CARGO) clippy --workspace --all-targets -- -D warnings

cfn-lint: $(SAM_DEP) ## lint template.yaml and the example targets template with cfn-lint
	$(SAM_VENV)/bin/cfn-lint template.yaml examples/targets.yaml

sam-validate: $(SAM_DEP) ## validate template.yaml with the SAM CLI (no AWS credentials needed)
	$(SAM) validate --lint --template template.yaml

checkov: $(CHECKOV_DEP) ## security checks on template.yaml (findings fixed, or skipped in its Metadata with a reason)
	$(CHECKOV_VENV)/bin/checkov -f template.yaml --framework cloudformation --compact --quiet --skip-download

lint: fmt clippy cfn-lint sam-validate checkov ## every static check

build: $(SAM_DEP) $(LAMBDA_DEP) ## the Lambda artefacts (arm64, release) with `sam build`, into .aws-sam/build
	rustup target add aarch64-unknown-linux-gnu
	$(LAMBDA_PATH) SAM_CLI_BETA_RUST_CARGO_LAMBDA=1 $(SAM) build --template template.yaml
	@for f in $(FUNCTIONS); do ls -l target/lambda/$$f/bootstrap; done

# A release a team deploys with the SAM CLI alone: every function built once for arm64 (release
# profile, cargo-lambda with zig), zipped with its version, the template pointing at the zips,
# SHA256SUMS and the CHANGELOG entry, in dist/tickwork-<version>/; then the release test holds it
# (sam validate --lint, an aarch64 ELF `bootstrap` and the version in every zip).
RELEASE_VERSION = $(shell sed -n '/^  Version:/,/Value:/s/^    Value: "\(.*\)"/\1/p' template.yaml)
release: $(SAM_DEP) $(LAMBDA_DEP) ## build dist/tickwork-<version>/: the function zips, a template pointing at them, checksums, release notes
	rustup target add aarch64-unknown-linux-gnu
	$(LAMBDA_PATH) $(CARGO) lambda build --release --arm64 $(addprefix -p ,$(FUNCTIONS))
	python3 scripts/release.py "$(RELEASE_VERSION)" $(FUNCTIONS)
	TICKWORK_RELEASE_DIR=$(CURDIR)/dist/tickwork-$(RELEASE_VERSION) $(CARGO) test -p tickwork-tests --test it release::the_release_deploys_with_the_sam_cli_alone -- --ignored --nocapture

# Deploys the environment ENV of samconfig.toml (dev or prod), non-interactively; then writes the
# stack's outputs where `tickctl --stack <name>` reads them. Needs AWS credentials; never run here.
# `ENV := dev`, not `?=`: a shell's own ENV variable never picks the environment; only
# `make deploy ENV=prod` does. dev applies its changeset at once; prod shows it and asks first.
ENV := dev
deploy: build ## deploy samconfig.toml's environment ENV (dev, prod); dev without a prompt; then `make stack-env`
	$(SAM) deploy --config-env $(ENV) $(if $(filter dev,$(ENV)),--no-confirm-changeset)
	$(MAKE) stack-env ENV=$(ENV)

# `tickctl --stack NAME` reads .local/stacks/NAME.env: the stack's outputs as tickwork variables.
stack-env: $(SAM_DEP) ## write .local/stacks/<stack>.env from a deployed stack's outputs (STACK=name, or ENV's stack)
	@stack="$(STACK)"; if [ -z "$$stack" ]; then stack=$$(scripts/samconfig-stack.sh $(ENV)) || exit 1; fi; \
	  scripts/stack-env.sh "$(SAM)" "$$stack" --config-env $(ENV)

# The local Lambda loop: the servers, the tables, an env file, and `cargo lambda watch` serving every
# function on 127.0.0.1:9000. In a second terminal: `make invoke-pulse-sweep` (or any function).
watch: deps $(LAMBDA_DEP) ## serve every function locally (cargo lambda watch) against the local servers
	$(CARGO) build -p tickctl
	TICKWORK_NO_DYNALITE=1 $(WITH_SERVERS) scripts/lambda-env.sh env $(LAMBDA_PATH) $(CARGO) lambda watch --env-file .local/lambda.env

$(addprefix invoke-,$(FUNCTIONS)): invoke-%: $(LAMBDA_DEP) ## send events/<fn>.json to the running `make watch`
	@(exec 3<>/dev/tcp/127.0.0.1/9000) 2>/dev/null || { echo "nothing serves 127.0.0.1:9000: start \`make watch\` in another terminal first" >&2; exit 1; }
	$(LAMBDA_PATH) $(CARGO) lambda invoke $* --data-file events/$*.json

# Two moto servers (one per core) and four tests at once: the tests wait on the servers, not the
# CPU. cargo-nextest (on the machine) runs each test in its own process; cargo test otherwise.
TEST_RUNNER = $(if $(shell $(CARGO) nextest --version 2>/dev/null),nextest run --workspace -j 4 --no-fail-fast,test --workspace)
# Every call a function's code makes in any test is logged as the IAM access it needs
# (tickwork::iam), then held against template.yaml: `iam-check`.
IAM_LOG := $(CURDIR)/.local/iam-calls
# A test thread's stack: 8 MiB, as a main thread's. `#[tokio::test]` pins a test's whole future on
# its thread's stack, and in a debug build the larger ones (about 0.9 MB, measured in gdb) with
# the SDK's poll frames beneath them pass the default 2 MiB (a firing tick overflowed there).
TEST_STACK := RUST_MIN_STACK=8388608
test: deps lint ## static checks, unit tests, integration tests against the local servers, then the IAM check of every call they made
	rm -rf $(IAM_LOG)
	TICKWORK_IAM_LOG=$(IAM_LOG) TICKWORK_MOTO_INSTANCES=2 RUST_TEST_THREADS=4 $(TEST_STACK) $(WITH_SERVERS) $(CARGO) $(TEST_RUNNER)
	$(MAKE) --no-print-directory iam-check

iam-check: ## hold every call the last `make test` or `make chaos` logged against template.yaml's policies
	@test -d $(IAM_LOG) || { echo "no IAM log in $(IAM_LOG): run make test or make chaos first" >&2; exit 1; }
	TICKWORK_IAM_LOG=$(IAM_LOG) $(CARGO) test -p tickwork-tests --test it iam::every_call_the_suite_made -- --ignored --nocapture

# Seeds run four at a time over two servers; `SEED=n` replays one schedule exactly.
chaos: deps ## randomised fault schedules over all four jobs: 200 seeds (CHAOS_SEEDS=n; SEED=n replays one); then the IAM check of every call made
	rm -rf $(IAM_LOG)
	TICKWORK_IAM_LOG=$(IAM_LOG) TICKWORK_MOTO_INSTANCES=2 CHAOS_SEEDS=$(or $(CHAOS_SEEDS),200) $(if $(SEED),SEED=$(SEED)) $(TEST_STACK) \
	  $(WITH_SERVERS) $(CARGO) test -p tickwork-tests --test it chaos::chaos_full -- --ignored --nocapture
	TICKWORK_IAM_CHECK=allowed $(MAKE) --no-print-directory iam-check

prove-lock: deps ## show that bare moto loses concurrent updates (expects the atomicity tests to FAIL)
	@if TICKWORK_MOTO_UNLOCKED=1 TICKWORK_NO_DYNALITE=1 $(WITH_SERVERS) $(CARGO) test -p tickwork-tests --test it atomicity; \
	then echo "unexpected: bare moto kept every update this time"; exit 1; \
	else echo "as expected: without the lock, moto lost updates (see the assertion values above)"; fi

run: deps ## the pulse sweep end to end, locally: 1,000 tenants, 3 workers, 3 simulated days; charts into docs/
	$(CARGO) build -p tickwork-sim
	SIM_CHARTS=docs TICKWORK_MOTO_SWITCH_INTERVAL=0.005 TICKWORK_NO_DYNALITE=1 $(WITH_SERVERS) target/debug/tickwork-sim

demo: deps ## a first taste in seconds: 100 tenants, one simulated day, the idle and boundary bill, pulses per zone
	$(CARGO) build -q -p tickwork-sim
	@SIM_CHARTS=.local/demo TICKWORK_MOTO_SWITCH_INTERVAL=0.005 TICKWORK_NO_DYNALITE=1 $(WITH_SERVERS) target/debug/tickwork-sim demo

bench: deps ## the bill chart (docs/bill.svg), capacity, throughput and Lambda start-up figures, side by side, against the local servers
	$(CARGO) build -p tickwork-bench
	$(CARGO) build --release $(addprefix -p ,$(FUNCTIONS))
	TICKWORK_MOTO_SWITCH_INTERVAL=0.005 TICKWORK_NO_DYNALITE=1 $(WITH_SERVERS) target/debug/tickwork-bench $(BENCH)

# A team's handler in its real runtime behind the whole stack, locally (crates/dev): the control
# function, sweep, fan-out and worker behind the local Invoke API; prints what the clients need.
# SCRIPT=file.py runs that Python script against it (with the client installed) and exits.
HANDLER ?= examples/python-handler
dev: deps ## the stack and your handler (HANDLER=dir, Python or Node.js) locally; SCRIPT=x.py drives it through the Python client
	$(CARGO) build -p tickwork-dev -p tickctl
	TICKWORK_NO_DYNALITE=1 $(WITH_SERVERS) target/debug/tickwork-dev --handler $(HANDLER) $(if $(SCRIPT),-- $(PY_CLIENT_VENV)/bin/python $(SCRIPT))

servers: deps ## run the local servers in the foreground (Ctrl-C stops them); prints the endpoints
	$(WITH_SERVERS) bash -c 'env | grep -E "^(AWS_ENDPOINT_URL|TICKWORK_DYNALITE)"; echo "Ctrl-C to stop"; sleep infinity'

clean: ## remove build output and local tools (SAM's build too); keeps the stack files in .local/stacks
	rm -rf target $(VENV) .tools .aws-sam
	find .local -mindepth 1 -maxdepth 1 ! -name stacks -exec rm -rf {} + 2>/dev/null || true
