# skillreg: make run (serve the embedded examples), make test (everything,
# conformance included), make build, make bench.

GO      ?= go
BIN     := bin/skillreg
VERSION := $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
# The shared conformance suite sits beside the checkout.
CONFORMANCE ?= ../shared/conformance/run.sh

.PHONY: all build run test unit lint conformance inspector bench fmt-check vet tools go-tools debian-tools node npm-tools
all: build

tools:
	@command -v $(GO) >/dev/null 2>&1 || { echo "make: Go is required (https://go.dev/dl/); install it and retry" >&2; exit 1; }
	@command -v git >/dev/null 2>&1 || { echo "make: git is required (tests run a real git server); install git and retry" >&2; exit 1; }

build: tools
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/skillreg

run: build
	$(BIN) serve

fmt-check: tools
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^vendor/') 2>&1); \
	if [ -n "$$out" ]; then echo "gofmt would change:" >&2; echo "$$out" >&2; exit 1; fi
	@$(GO) mod tidy -diff >/dev/null || { echo "go.mod/go.sum are not tidy: run 'go mod tidy' and commit the result" >&2; exit 1; }

vet: tools
	$(GO) vet ./...

# The pinned Go linters (scripts/go-tools.txt: staticcheck, deadcode) go
# into $$SKILLREG_TOOLS/go/bin (default ~/.cache/skillreg-tools/go/bin);
# a no-op, without network, once installed.
GO_TOOLS_BIN = $(shell scripts/install-go-tools.sh --bin)
go-tools: tools
	@GO=$(GO) scripts/install-go-tools.sh

# staticcheck with its default checks; deadcode -test must report nothing:
# a function no test or binary reaches is deleted, not kept "for later".
lint: go-tools
	$(GO_TOOLS_BIN)/staticcheck ./...
	@out=$$($(GO_TOOLS_BIN)/deadcode -test ./...) || exit 1; \
	if [ -n "$$out" ]; then echo "deadcode: unreachable functions (delete them, or use them):" >&2; echo "$$out" >&2; exit 1; fi

# The web catalog's browser tests drive Debian's headless Chromium, and the
# headersHelper tests run curl and jq; this installs them when missing (a
# no-op when present; outside CI those tests skip with a message if they
# cannot be installed, with CI=true they fail).
debian-tools:
	@scripts/install-debian-tools.sh

# The pinned npm tools that tests run (Node.js itself, the official
# TypeScript MCP SDK, the MCP Inspector, ...): the list is
# scripts/npm-tools.txt, one name@version a line, and Go tests find them
# with internal/tools. They go into $$SKILLREG_TOOLS/npm (default
# ~/.cache/skillreg-tools/npm); a no-op, without network, once installed.
npm-tools:
	@scripts/install-npm-tools.sh

unit: tools debian-tools npm-tools
	$(GO) test -race -count=1 ./...
	@# Allocation bounds the race detector blurs (it drops pooled buffers, so
	@# those tests skip under -race): once more without it.
	$(GO) test -count=1 -run 'IntoOneBuffer' ./registry/

test: fmt-check vet lint unit conformance inspector

node:
	@command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || { echo "make: Node.js and npm are required for the MCP conformance suite and to install the pinned test tools (scripts/npm-tools.txt); install them and retry" >&2; exit 1; }

conformance: build node
	@test -x $(CONFORMANCE) || { echo "make: $(CONFORMANCE) not found (set CONFORMANCE=path/to/run.sh)" >&2; exit 1; }
	scripts/conformance.sh $(BIN) $(CONFORMANCE)

# A real external client (the MCP Inspector's CLI) lists and calls every tool.
inspector: build npm-tools
	scripts/inspector.sh $(BIN)

# make bench SCALE=1 adds the scale section's 100,000-skill rows (tens of
# minutes); BENCHFLAGS passes anything else (e.g. BENCHFLAGS="-only scale").
bench: build
	$(GO) run ./internal/bench $(if $(SCALE),-scale) $(BENCHFLAGS)
