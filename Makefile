# octogate — GitHub identity for Kubernetes.
SHELL := bash
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)
TEST_TIMEOUT ?= 40m
FUZZTIME ?= 60s

.PHONY: all build tools test unit e2e lint bench fuzz demo clean

all: build

## build: the octogate binary into bin/octogate
build:
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/octogate ./cmd/octogate

## tools: pinned kube-apiserver, kube-controller-manager, kubectl, etcd, helm into bin/k8s/
tools:
	bash tools/build.sh

## test: vet + gofmt, then every test (unit, fuzz seeds, envtest, end to end) with -race
test: tools lint
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...

## unit: every test except test/e2e
unit:
	$(GO) test -race -count=1 $$($(GO) list ./... | grep -v /test/e2e)

## e2e: only the end-to-end tests against a real kube-apiserver
e2e: tools
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) -v ./test/e2e/...

lint:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

## bench: load benchmark of every route against a bare TLS handler, plus micro-benchmarks
bench:
	$(GO) run ./bench $(BENCHFLAGS)
	$(GO) test -run '^$$' -bench . -benchmem ./subjectaccessreview/ ./tokenreview/ ./admission/ ./actionsoidc/

## fuzz: every fuzz target for $(FUZZTIME) each
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$t"; $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; done

## demo: a local kube-apiserver using octogate, kubectl as GitHub users (Ctrl-C stops it)
demo: tools build
	$(GO) build -o bin/octogate-demo ./cmd/octogate-demo
	@exec bin/octogate-demo -octogate $(CURDIR)/bin/octogate

clean:
	rm -rf bin demo
