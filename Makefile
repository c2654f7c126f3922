# octogate — GitHub identity for Kubernetes.
SHELL := bash
GO ?= go
# The one version source is the chart's appVersion: the binary, the image tag, the chart's
# default image.tag and the release tag (v$(VERSION)) all come from it.
VERSION ?= $(shell sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$$/\1/p' charts/octogate/Chart.yaml)
COMMIT ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
# Reproducible builds record the commit time, not the build time.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)
# The image the chart pulls by default: image.repository of the chart's values and its appVersion.
IMAGE_REPO ?= $(shell sed -n 's/^  repository: *//p' charts/octogate/values.yaml)
IMAGE ?= $(IMAGE_REPO):$(VERSION)
# Where `make chart-push` publishes the chart as an OCI artifact.
CHART_REPO ?= oci://ghcr.io/octogate/charts
HELM ?= helm
DIST ?= dist
DIST_PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64
# Where the GitHub release of v$(VERSION) serves its files (the krew manifest's uris).
RELEASE_URL ?= https://github.com/octogate/octogate/releases/download/v$(VERSION)
# KUBE_VERSION picks the Kubernetes of the tools: empty is tools/go.mod's, what every test runs
# against (bin/k8s, or $$OCTOGATE_K8S_BIN); 1.32 is tools/k8s-1.32/go.mod, built into bin/k8s-1.32.
KUBE_VERSION ?=
# KUBE_OLDEST is the oldest Kubernetes minor octogate supports (docs/upgrading.md).
KUBE_OLDEST ?= 1.32
K8S_MODULE := tools$(if $(KUBE_VERSION),/k8s-$(KUBE_VERSION))
K8S_OLDEST_BIN ?= $(CURDIR)/bin/k8s-$(KUBE_OLDEST)
K8S_BIN ?= $(if $(KUBE_VERSION),$(CURDIR)/bin/k8s-$(KUBE_VERSION),$(or $(OCTOGATE_K8S_BIN),$(CURDIR)/bin/k8s))
# The end-to-end tests run against KUBE_OLDEST: login, whoami, authorization, namespaces and
# the chart's objects.
E2E_OLDEST_RUN ?= ^(TestScenario|TestSelfServiceNamespaces|TestPolicyCheckAgreesWithKubeAPIServer|TestInstallDocShowsTheChartsWiring|TestChartServerDryRun|TestTokenReviewV1beta1)$$
TEST_TIMEOUT ?= 40m
FUZZTIME ?= 60s
BENCH_NAMESPACES ?= 10000
# The golangci-lint that make lint runs: the version tools/lint/go.mod pins.
GOLANGCI_LINT_VERSION := $(shell sed -n 's,^[[:space:]]*github.com/golangci/golangci-lint/v2 \(v[^ ]*\).*,\1,p' tools/lint/go.mod)
GOLANGCI_LINT := bin/golangci-lint-$(GOLANGCI_LINT_VERSION)

.PHONY: all build tools test unit e2e e2e-oldest lint bench bench-bare fuzz demo chart-docs clean image image-push print-image print-version print-dist-platforms dist krew-manifest chart-package chart-push release-notes check-version

all: build

## build: the octogate binary into bin/octogate
build:
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/octogate ./cmd/octogate

## tools: pinned kube-apiserver, kube-controller-manager, kubectl, etcd, helm into bin/k8s/
## (KUBE_VERSION=1.32: the Kubernetes binaries of tools/k8s-1.32 into bin/k8s-1.32/)
tools:
	OCTOGATE_K8S_MODULE=$(K8S_MODULE) OCTOGATE_K8S_BIN=$(K8S_BIN) bash tools/build.sh

## test: lint (vet, gofmt, golangci-lint), then every test (unit, fuzz seeds, envtest, end to end)
## with -race, then the end-to-end tests of the oldest supported Kubernetes (e2e-oldest).
## test/fault runs alone after the others: it bounds latencies under load, which other
## packages' tests on the same cores would move.
test: tools lint
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $$($(GO) list ./... | grep -v '/test/fault$$')
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./test/fault/
	$(MAKE) e2e-oldest

## unit: every test except test/e2e
unit:
	$(GO) test -race -count=1 $$($(GO) list ./... | grep -v /test/e2e)

## e2e: only the end-to-end tests against a real kube-apiserver (of KUBE_VERSION)
e2e: tools
	OCTOGATE_K8S_BIN=$(K8S_BIN) $(GO) test -count=1 -timeout $(TEST_TIMEOUT) -v ./test/e2e/...

## e2e-oldest: the end-to-end tests E2E_OLDEST_RUN against KUBE_OLDEST, the oldest supported
## Kubernetes, built into K8S_OLDEST_BIN
e2e-oldest:
	$(MAKE) tools KUBE_VERSION=$(KUBE_OLDEST) K8S_BIN=$(K8S_OLDEST_BIN)
	OCTOGATE_K8S_BIN=$(K8S_OLDEST_BIN) $(GO) test -count=1 -timeout $(TEST_TIMEOUT) \
	  -run '$(E2E_OLDEST_RUN)' ./test/e2e/

## lint: go vet, gofmt, then golangci-lint with .golangci.yml
lint: $(GOLANGCI_LINT)
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GOLANGCI_LINT) run ./...

# golangci-lint is pinned in a module of its own (tools/lint), not in tools/go.mod, whose every
# change rebuilds the Kubernetes binaries. The binary's name carries the version, so it is
# built once per pin.
$(GOLANGCI_LINT):
	$(GO) -C tools/lint build -o $(CURDIR)/$@ github.com/golangci/golangci-lint/v2/cmd/golangci-lint

## bench: load benchmark of every route against a bare TLS handler, micro-benchmarks, the
## impersonating proxy against a real kube-apiserver, and the ownership controller with
## $(BENCH_NAMESPACES) namespaces on a real kube-apiserver
bench: tools
	$(GO) run ./bench $(BENCHFLAGS)
	$(GO) test -run '^$$' -bench . -benchmem ./subjectaccessreview/ ./tokenreview/ ./admission/ ./actionsoidc/ ./session/ ./proxy/ ./revocation/
	OCTOGATE_K8S_BIN=$(K8S_BIN) $(GO) test -run '^$$' -bench ProxyRealAPIServer -benchtime 50x -count 5 ./test/e2e/
	$(GO) run ./bench/namespaces -n $(BENCH_NAMESPACES) $(NSBENCHFLAGS)

## bench-bare: only the hot routes of `octogate serve` against a bare TLS handler, separate
## processes, by the server's CPU per request (part of bench; -bare-duration, -bare-rounds)
bench-bare:
	$(GO) run ./bench -routes baseline -duration 1s -rounds 1 -warmup 200ms -burst-tokens 0 -ratelimit-scale 0 -rss-identities 0 $(BENCHFLAGS)

## fuzz: every fuzz target for $(FUZZTIME) each
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$t"; $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; done

## demo: a local kube-apiserver using octogate, kubectl as GitHub users (Ctrl-C stops it);
## octogate-demo runs tools/build.sh itself (once; it reuses bin/k8s when up to date)
demo: build
	$(GO) build -o bin/octogate-demo ./cmd/octogate-demo
	@exec bin/octogate-demo -octogate $(CURDIR)/bin/octogate

## image: the amd64+arm64 OCI image as an OCI layout in bin/image; prints IMAGE@DIGEST
image:
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(GO) run ./internal/image/build -version $(VERSION) \
	  -revision $(REVISION) -ref $(IMAGE) -out bin/image

## image-push: build the image and push it to $(IMAGE) (credentials of ~/.docker/config.json)
image-push:
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(GO) run ./internal/image/build -version $(VERSION) \
	  -revision $(REVISION) -ref $(IMAGE) -out bin/image -push

## print-image: the image reference make image builds and the chart pulls by default
print-image:
	@echo $(IMAGE)

## print-version: the version (the chart's appVersion)
print-version:
	@echo $(VERSION)

## dist: static release binaries for $(DIST_PLATFORMS), the krew archives of the same binaries
## (kubectl-octogate_VERSION_OS_ARCH.tar.gz) and checksums.txt of both into $(DIST)/
dist:
	rm -rf $(DIST) && mkdir -p $(DIST)
	@set -e; for p in $(DIST_PLATFORMS); do \
	  os=$${p%/*}; arch=$${p#*/}; ext=; if [ "$$os" = windows ]; then ext=.exe; fi; \
	  echo "building $(DIST)/octogate_$(VERSION)_$${os}_$${arch}$$ext"; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -buildvcs=false \
	    -ldflags "-s -w -buildid= $(LDFLAGS)" -o $(DIST)/octogate_$(VERSION)_$${os}_$${arch}$$ext ./cmd/octogate; \
	done
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(GO) run ./internal/krew/build archives -dist $(DIST) \
	  -version $(VERSION) -platforms "$(DIST_PLATFORMS)"
	cd $(DIST) && sha256sum octogate_* kubectl-octogate_* > checksums.txt

## krew-manifest: the krew plugin manifest $(DIST)/octogate.yaml from $(DIST)/checksums.txt (make dist)
krew-manifest:
	$(GO) run ./internal/krew/build manifest -dist $(DIST) -version $(VERSION) \
	  -platforms "$(DIST_PLATFORMS)" -download-url $(RELEASE_URL)

## print-dist-platforms: the platforms make dist builds
print-dist-platforms:
	@echo $(DIST_PLATFORMS)

## chart-package: the chart as $(DIST)/octogate-$(VERSION).tgz
chart-package:
	mkdir -p $(DIST)
	$(HELM) package charts/octogate --destination $(DIST) --version $(VERSION) --app-version $(VERSION)

## chart-push: publish the packaged chart to $(CHART_REPO) as an OCI artifact
chart-push: chart-package
	$(HELM) push $(DIST)/octogate-$(VERSION).tgz $(CHART_REPO)

## release-notes: the CHANGELOG.md section of $(VERSION) into $(DIST)/release-notes.md
release-notes:
	mkdir -p $(DIST)
	@awk -v v="$(VERSION)" '/^## /{p = index($$0, "[" v "]") > 0; next} p' CHANGELOG.md > $(DIST)/release-notes.md
	@test -s $(DIST)/release-notes.md || { echo "CHANGELOG.md has no section ## [$(VERSION)]"; exit 1; }

## check-version: TAG (e.g. v0.1.0) names the chart's version and appVersion
check-version:
	@test -n "$(TAG)" || { echo "TAG is empty"; exit 1; }
	@test "$(TAG)" = "v$(VERSION)" || { echo "tag $(TAG) is not v$(VERSION), the chart's appVersion"; exit 1; }
	@grep -q '^version: $(VERSION)$$' charts/octogate/Chart.yaml || { echo "Chart.yaml version is not $(VERSION)"; exit 1; }
## chart-docs: regenerate charts/octogate/README.md from values.yaml (helm-docs, pinned)
chart-docs:
	$(GO) run github.com/norwoodj/helm-docs/cmd/helm-docs@v1.14.2 --chart-search-root charts/octogate \
	  --template-files README.md.gotmpl --skip-version-footer --log-level error

clean:
	rm -rf bin demo dist
