# gpumarket: the front door. `make help` lists the targets.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO       ?= go
DATA_DIR ?= $(or $(GPUMARKET_DATA_DIR),.data)
PKGS     := ./...
STRIPE_MOCK_VERSION := v0.203.0
BENCH_EVENTS ?= 1000000
BENCH_RIGWIRE_CALLS ?= 6000
BENCH_GATEWAY_FLAGS ?=
BENCH_CLOSE_FLAGS ?=
BIN_DIR  := $(abspath $(DATA_DIR))/bin
# Where the platform publishes the agent at /downloads/ (GPUMARKET_DOWNLOADS_DIR, else under the data directory).
DOWNLOADS_DIR ?= $(or $(GPUMARKET_DOWNLOADS_DIR),$(abspath $(DATA_DIR))/downloads)
HOST_ARCH := $(shell $(GO) env GOARCH)
export STRIPE_MOCK_BIN ?= $(BIN_DIR)/stripe-mock

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[1m%-14s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: run
run: stripe-mock agent-download ## run the whole platform on this machine with demo data (finds or starts PostgreSQL, embeds NATS)
	GPUMARKET_DATA_DIR=$(DATA_DIR) GPUMARKET_DOWNLOADS_DIR=$(DOWNLOADS_DIR) $(GO) run ./cmd/gpumarket dev

# The agent for Linux on this machine's architecture, which `make run` publishes at /downloads/. The other
# architecture is left to agent-downloads: built cold, it costs about a minute more.
.PHONY: agent-download
agent-download: ## build the agent for Linux on this machine's architecture into the downloads directory
	CGO_ENABLED=0 GOOS=linux GOARCH=$(HOST_ARCH) $(GO) build -trimpath -o $(DOWNLOADS_DIR)/gpuagent-linux-$(HOST_ARCH) ./cmd/gpuagent

.PHONY: agent-downloads
agent-downloads: ## build the agent for Linux on amd64 and arm64 into the downloads directory, as the image publishes them
	for arch in amd64 arm64; do \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -o $(DOWNLOADS_DIR)/gpuagent-linux-$$arch ./cmd/gpuagent; \
	done

.PHONY: test
test: test-deps stripe-mock verify ## run the whole test suite (starts PostgreSQL and installs Chromium and axe-core when missing)
	@url=$$(GPUMARKET_DATA_DIR=$(DATA_DIR) $(GO) run ./cmd/gpumarket dev postgres); \
	echo "tests use PostgreSQL at $$url"; \
	GPUMARKET_TEST_DATABASE_URL="$$url" GPUMARKET_TEST_ARTEFACTS="$(abspath $(DATA_DIR))/test-artefacts" \
		$(GO) test -count=1 -timeout 15m $(PKGS)
	@echo "fuzzing the usage event decoder and validator for 20,000 inputs"
	@# A count, not a duration: a duration's deadline can race a worker and fail
	@# the run with "context deadline exceeded" though no input failed (go.dev/issue/75804).
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeValidate$$' -fuzztime 20000x -fuzzminimizetime 200x ./services/usage/

.PHONY: test-deps
test-deps: ## install Chromium and axe-core (npm ci) for the browser tests when they are missing
	@if ! command -v chromium >/dev/null && [ -z "$${CHROMIUM_BIN:-}" ]; then \
		echo "installing Debian's chromium for the browser tests (apt-get)"; \
		sudo=""; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
		$$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq chromium >/dev/null; \
	fi
	@if [ ! -f web/webtest/axe/node_modules/axe-core/axe.min.js ]; then \
		if ! command -v npm >/dev/null; then \
			echo "installing Debian's npm for axe-core (apt-get)"; \
			sudo=""; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
			$$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq npm >/dev/null; \
		fi; \
		echo "installing axe-core for the accessibility checks (npm ci in web/webtest/axe)"; \
		npm ci --prefix web/webtest/axe --no-audit --no-fund --silent; \
	fi

.PHONY: test-short
test-short: ## the fast tests alone, in under a minute once built: those that need PostgreSQL, stripe-mock or a browser skip themselves (go test -short)
	$(GO) test -short -count=1 $(PKGS)

.PHONY: bench
bench: bench-meter bench-gateway bench-rigwire bench-close bench-reports bench-batch ## run the benchmarks

.PHONY: bench-meter
bench-meter: ## meter BENCH_EVENTS usage events end to end and compare with this machine's ceilings (starts PostgreSQL when missing)
	@url=$${GPUMARKET_TEST_DATABASE_URL:-$$(GPUMARKET_DATA_DIR=$(DATA_DIR) $(GO) run ./cmd/gpumarket dev postgres)}; \
	echo "the benchmark uses PostgreSQL at $$url" >&2; \
	GPUMARKET_TEST_DATABASE_URL="$$url" $(GO) run ./cmd/meterbench -n $(BENCH_EVENTS)

.PHONY: bench-close
bench-close: ## close a month of 10,000 accounts and 10 million usage events seeded through the rollups (BENCH_CLOSE_FLAGS; starts PostgreSQL when missing)
	@url=$${GPUMARKET_TEST_DATABASE_URL:-$$(GPUMARKET_DATA_DIR=$(DATA_DIR) $(GO) run ./cmd/gpumarket dev postgres)}; \
	echo "the benchmark uses PostgreSQL at $$url" >&2; \
	GPUMARKET_TEST_DATABASE_URL="$$url" $(GO) run ./cmd/closebench $(BENCH_CLOSE_FLAGS)

.PHONY: bench-reports
bench-reports: ## the savings and carbon reports' p99 at 100 requests/s over 10 million usage rows, beside a SELECT 1 handler's (BENCH_REPORTS_FLAGS; starts PostgreSQL when missing)
	@url=$${GPUMARKET_TEST_DATABASE_URL:-$$(GPUMARKET_DATA_DIR=$(DATA_DIR) $(GO) run ./cmd/gpumarket dev postgres)}; \
	echo "the benchmark uses PostgreSQL at $$url" >&2; \
	GPUMARKET_TEST_DATABASE_URL="$$url" $(GO) run ./cmd/reportsbench $(BENCH_REPORTS_FLAGS)

.PHONY: bench-gateway
bench-gateway: ## the latency the /v1 gateway adds at 1,000 and 2,000 requests/s, against a zero-latency rig directly and through it (BENCH_GATEWAY_FLAGS; starts PostgreSQL when missing)
	@url=$${GPUMARKET_TEST_DATABASE_URL:-$$(GPUMARKET_DATA_DIR=$(DATA_DIR) $(GO) run ./cmd/gpumarket dev postgres)}; \
	echo "the benchmark uses PostgreSQL at $$url" >&2; \
	GPUMARKET_TEST_DATABASE_URL="$$url" $(GO) run -tags benchharness ./cmd/gpumarket bench-gateway $(BENCH_GATEWAY_FLAGS)

.PHONY: bench-rigwire
bench-rigwire: ## the hop to a rig alone: a call over NATS against the same call over loopback HTTP, p50 and p99 at 1,000 calls/s (BENCH_RIGWIRE_CALLS a path)
	$(GO) test -run '^$$' -bench '^BenchmarkHop$$' -benchtime $(BENCH_RIGWIRE_CALLS)x -count 3 ./services/rigwire

.PHONY: bench-batch
bench-batch: ## a 50,000-line batch against a zero-latency rig: lines per second and the overhead per line over direct calls (BENCH_BATCH_FLAGS; starts PostgreSQL when missing)
	@url=$${GPUMARKET_TEST_DATABASE_URL:-$$(GPUMARKET_DATA_DIR=$(DATA_DIR) $(GO) run ./cmd/gpumarket dev postgres)}; \
	echo "the benchmark uses PostgreSQL at $$url" >&2; \
	GPUMARKET_TEST_DATABASE_URL="$$url" $(GO) run -tags benchharness ./cmd/gpumarket bench-batch $(BENCH_BATCH_FLAGS)

.PHONY: stripe-mock
stripe-mock: $(STRIPE_MOCK_BIN) ## install stripe-mock (Stripe's API mock) under the data directory

$(STRIPE_MOCK_BIN):
	@echo "installing stripe-mock $(STRIPE_MOCK_VERSION) into $(dir $@) (go install)"
	GOBIN=$(dir $@) $(GO) install github.com/stripe/stripe-mock@$(STRIPE_MOCK_VERSION)

.PHONY: generate
generate: ## regenerate templ components
	$(GO) tool templ generate

.PHONY: verify
verify: lint ## fail when generated code is stale or the code is not formatted and vetted
	@before=$$(cat templates/*_templ.go | sha256sum); \
	$(GO) tool templ generate >/dev/null 2>&1; \
	if [ "$$before" != "$$(cat templates/*_templ.go | sha256sum)" ]; then \
		echo "generated templates were stale: 'make generate' has rewritten them; commit the result"; exit 1; \
	fi

.PHONY: lint
lint: ## gofmt and go vet
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '_templ.go$$')); \
	if [ -n "$$out" ]; then echo "gofmt would change: $$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) vet -tags benchharness ./cmd/gpumarket

.PHONY: build
build: ## build the binaries into bin/, and the platform binary with the gateway and batch benchmarks as bin/gpumarket-bench
	$(GO) build -o bin/ ./cmd/...
	$(GO) build -tags benchharness -o bin/gpumarket-bench ./cmd/gpumarket

.PHONY: clean
clean: ## remove built binaries (the data directory stays)
	rm -rf bin
