# ontap-csi — see README.md. `make test` is what CI runs (.ci/run).
SHELL := /bin/bash
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# The Trident release the binary reports to trident-operator (docs/operator.md).
TRIDENT_VERSION ?= 26.06.0
LDFLAGS := -s -w -X github.com/ontap-csi/ontap-csi/server.Version=$(VERSION) -X main.tridentVersion=$(TRIDENT_VERSION)
BIN := bin/ontap-csi
IMAGE ?= ontap-csi:$(VERSION)

.PHONY: all build test lane-unit lane-fuzz lane-vm lane-e2e unit fuzz kubelet e2e vm vm-bin lint tools render bench demo image clean


all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/ontap-csi
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/ontap-sim ./cmd/ontap-sim

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# The whole suite. Tests need root (loop devices, mounts, network namespaces).
# Two phases, each of two lanes side by side. First the unit tests beside
# `make fuzz`: the unit tests mostly wait (test/sanity on the simulator's
# latency) and left a third of the two CPUs idle, which the fuzzing (one
# worker) takes instead of running first in the VM lane. Then the VM suite
# and the demo beside the cluster e2e, with the kubelet suites split
# between the two (below). Most of those are waiting too (the guest's and
# kubelet's timers, rollouts), and the lanes share nothing but the CPU:
# side by side they take about as long as the longer one (docs/e2e.md).
# Each target's output is printed whole when it ends. When a lane fails,
# the failures are printed again at the very end of its phase (the other
# lane's whole output would otherwise bury them), from a copy of the
# output kept in bin/<phase>.log.
test: lint tools build
	@$(call lanes,unit,lane-unit lane-fuzz)
	@$(call lanes,e2e-vm,lane-vm lane-e2e)

# lanes runs make targets $(2) side by side, output in bin/$(1).log.
lanes = set -o pipefail; $(MAKE) --no-print-directory -j2 --output-sync=target $(2) 2>&1 | tee bin/$(1).log || { \
	echo "=== make test: a lane failed; what failed (all of it in bin/$(1).log):"; \
	grep -n -e '--- FAIL' -e '^FAIL' -e 'Error [0-9]' bin/$(1).log | head -n 40; \
	echo "=== the first failures, each with the 25 lines before it:"; \
	grep -n -B25 -A2 -e '--- FAIL' -e '^FAIL' -e 'Error [0-9]' bin/$(1).log | head -n 150; exit 1; }

# The lanes of `make test`. Each step prints how long it took, so a run's
# log shows which lane CI waited on (docs/e2e.md keeps the figures).
timed = s=$$(date +%s); $(MAKE) --no-print-directory $(1); rc=$$?; echo "== make $(1): $$rc after $$(( $$(date +%s) - s )) s"; exit $$rc
lane-unit:
	@$(call timed,unit)
lane-fuzz:
	@$(call timed,fuzz)
# The kubelet suites are split between the lanes: v1.37.2's (about 155 s,
# its S11 the longest scenario) after the cluster e2e, the two older ones
# (about 110 s side by side) after the VM suite; together after the
# cluster e2e they made that lane 175 s longer than the other.
lane-vm:
	@$(call timed,vm)
	@$(call timed,demo)
	@$(call timed,kubelet KUBELET_MODULES="k8s-1.29 k8s-1.19")
lane-e2e:
	@$(call timed,e2e)
	@$(call timed,kubelet KUBELET_MODULES=.)

# Tests that need the binary use the one built here (static, like the image).
# test/sanity runs beside the other packages, not after them: its fault
# test waits out the simulator's latency for about 100 s with little CPU,
# and as go test's last package it was the end of the unit tests alone
# (docs/e2e.md).
UNIT_LATE := github.com/ontap-csi/ontap-csi/test/sanity
unit: build
	@set -o pipefail; late=$$(mktemp); trap 'rm -f "$$late"' EXIT; \
	ONTAP_CSI_BINARY=$(CURDIR)/$(BIN) $(GO) test -count=1 -timeout 40m $(UNIT_LATE) >"$$late" 2>&1 & pid=$$!; \
	ONTAP_CSI_BINARY=$(CURDIR)/$(BIN) $(GO) test -count=1 -timeout 40m $$($(GO) list ./... | grep -vxF $(UNIT_LATE)); rc=$$?; \
	wait $$pid; late_rc=$$?; cat "$$late"; [ $$rc -eq 0 ] && [ $$late_rc -eq 0 ]

# Every fuzz target of the repository for FUZZTIME each (docs/fuzz.md). The
# corpus found is kept in $ONTAP_CSI_E2E_CACHE/fuzz (default
# ~/.cache/ontap-csi/fuzz) and grows from run to run; a failing input is
# written to the package's testdata/fuzz/ and fails the run.
FUZZTIME ?= 4s
FUZZ_PARALLEL ?= 1
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) FUZZ_PARALLEL=$(FUZZ_PARALLEL) test/fuzz/run.sh

# The handover scenarios against the real kubelet code of v1.37.2, v1.29.15
# and v1.19.16, one Go module each (test/kubelet/README.md).
kubelet: build
	ONTAP_CSI_BINARY=$(CURDIR)/$(BIN) GO=$(GO) KUBELET_MODULES="$(KUBELET_MODULES)" test/kubelet/run.sh

# ontap-csi as deploy/ installs it on a real two-node cluster, with the real
# csi-attacher and csi-snapshotter (test/cluster, its own module, and
# test/cluster/sidecars, the sidecars' and their stand-ins'; docs/e2e.md).
# The Kubernetes binaries and the sidecars are built once per content key
# and cached in $ONTAP_CSI_E2E_CACHE (default ~/.cache/ontap-csi/e2e).
# The sidecars module is vetted and tested with the flags its binaries are
# built with (localcluster.BuildSidecars: -trimpath, no cgo), so that a cold
# run compiles its Kubernetes dependencies once, not twice.
e2e: build tools
	cd test/cluster/sidecars && export CGO_ENABLED=0 GOFLAGS=-trimpath && $(GO) vet ./... && $(GO) test -count=1 ./...
	cd test/cluster && $(GO) vet ./... && ONTAP_CSI_BINARY=$(CURDIR)/$(BIN) E2E_COMMAND="make e2e" $(GO) test -count=1 -v -timeout 80m ./...

# The data path on a real Linux kernel: Debian 12 in QEMU (TCG), with the
# simulator's kernel data plane (LIO, nfsd) and no shims (docs/vm.md). The
# image is built once and cached next to the e2e cache (minutes the first
# time). The binaries run in the VM, so they are static.
# One boot runs every guest suite: the guest tests, csi-sanity for nas and
# san, the e2e suite, its crash tests and the kernel faults
# (test/vm/guest_test.go).
# vm-bin builds what the VM runs (make bench uses it for the real-kernel
# node benchmark), with the flags of `make build` (-trimpath, no cgo) so that
# a cold run compiles the dependencies once for both: nothing the VM runs
# reads its sources.
VM_BIN := bin/vm
vm: vm-bin
	ONTAP_CSI_VM=1 ONTAP_CSI_VM_BIN=$(CURDIR)/$(VM_BIN) $(GO) test -count=1 -v -timeout 80m ./test/vm/

vm-bin: build
	mkdir -p $(VM_BIN)
	cp bin/ontap-csi $(VM_BIN)/
	CGO_ENABLED=0 $(GO) build -trimpath -tags crashpoints -o $(VM_BIN)/ontap-csi-crashpoints ./cmd/ontap-csi
	CGO_ENABLED=0 $(GO) test -trimpath -c -o $(VM_BIN)/guest.test ./test/vm/guest
	CGO_ENABLED=0 $(GO) test -trimpath -c -o $(VM_BIN)/e2e.test ./test/e2e
	CGO_ENABLED=0 $(GO) test -trimpath -c -o $(VM_BIN)/sanity-nas.test ./test/sanity/nas
	CGO_ENABLED=0 $(GO) test -trimpath -c -o $(VM_BIN)/sanity-san.test ./test/sanity/san

# kustomize and Helm, pinned in deploy/tools/go.mod, built once per Go build
# cache; built before the tests so their cold build does not eat a test's timeout.
tools:
	$(GO) -C deploy/tools tool kustomize version
	$(GO) -C deploy/tools tool helm version --short

# make render [OVERLAY=ha]: print the kustomize output.
render:
	@$(GO) -C deploy/tools tool kustomize build $(CURDIR)/deploy/kustomize/$(or $(OVERLAY),base)

# Every benchmark, written to docs/benchmarks.md (30-45 minutes, root).
bench: build
	test/bench/run.sh docs/benchmarks.md

# The main job on one machine (test/demo): needs root and Go, no cluster.
demo: build
	@echo "make demo: builds the kubelet code first (minutes the first time), then runs for about two minutes"
	@ONTAP_CSI_DEMO=1 $(GO) test -count=1 -timeout 30m -run '^TestDemo$$' -v ./test/demo/ | grep --line-buffered -v -e '^=== RUN' -e '^--- PASS' -e '^PASS$$' -e '^ok '; exit $${PIPESTATUS[0]}

image:
	@if command -v docker >/dev/null && docker info >/dev/null 2>&1; then \
		docker build --build-arg VERSION=$(VERSION) --build-arg TRIDENT_VERSION=$(TRIDENT_VERSION) -t $(IMAGE) . ; \
	else \
		echo "no container engine is running here; the Dockerfile is linted by the tests instead"; exit 1; \
	fi

clean:
	rm -rf bin
