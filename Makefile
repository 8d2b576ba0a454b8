# ontap-csi — see README.md. `make test` is what CI runs (.ci/run).
SHELL := /bin/bash
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# The Trident release the binary reports to trident-operator (docs/operator.md).
TRIDENT_VERSION ?= 26.06.0
LDFLAGS := -s -w -X github.com/ontap-csi/ontap-csi/server.Version=$(VERSION) -X main.tridentVersion=$(TRIDENT_VERSION)
BIN := bin/ontap-csi
IMAGE ?= ontap-csi:$(VERSION)

.PHONY: all build test unit lint tools render bench demo image clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/ontap-csi

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# The whole suite. Tests need root (loop devices, mounts, network namespaces).
test: lint tools build unit

# Tests that need the binary use the one built here (static, like the image).
unit: build
	ONTAP_CSI_BINARY=$(CURDIR)/$(BIN) $(GO) test -count=1 -timeout 40m ./...

# kustomize and Helm, pinned in deploy/tools/go.mod, built once per Go build
# cache; built before the tests so their cold build does not eat a test's timeout.
tools:
	$(GO) -C deploy/tools tool kustomize version
	$(GO) -C deploy/tools tool helm version --short

# make render [OVERLAY=ha]: print the kustomize output.
render:
	@$(GO) -C deploy/tools tool kustomize build $(CURDIR)/deploy/kustomize/$(or $(OVERLAY),base)

bench:
	@echo "benchmarks are added by the issues that measure them; see docs/benchmarks.md"

demo: build
	@test/demo/run.sh $(BIN)

image:
	@if command -v docker >/dev/null && docker info >/dev/null 2>&1; then \
		docker build --build-arg VERSION=$(VERSION) --build-arg TRIDENT_VERSION=$(TRIDENT_VERSION) -t $(IMAGE) . ; \
	else \
		echo "no container engine is running here; the Dockerfile is linted by the tests instead"; exit 1; \
	fi

clean:
	rm -rf bin
