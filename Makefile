# slurmbridge: the front door.
#   make               build everything into bin/
#   make demo          bring the local Slurm testbed up and show it working (root)
#   make test          bring the testbed up, then vet and run every test, integration included (root)
#   make test-unit     vet and unit tests only (no Slurm needed)
#   make bench         run every benchmark
#   make testbed-up | testbed-down | testbed-status | testbed-clean

SHELL := /bin/bash
export PATH := $(PATH):/usr/local/go/bin
GO ?= go
BIN := bin
TESTBED_DIR ?= /tmp/slurmbridge-testbed
export TESTBED_DIR

.PHONY: all build vet test test-unit bench demo \
	testbed-up testbed-down testbed-status testbed-clean clean

all: build

build:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ ./...

vet:
	$(GO) vet ./...
	$(GO) vet -tags integration ./...

test-unit: vet
	$(GO) test -count=1 ./...

# Integration tests (build tag `integration`) share one cluster, so packages run one at a time.
test: testbed-up vet
	$(GO) test -count=1 -p 1 -tags integration -timeout 30m ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

demo: testbed-up
	@bash testbed/demo.sh

testbed-up:
	@bash testbed/testbed.sh up

testbed-down:
	@bash testbed/testbed.sh down

testbed-status:
	@bash testbed/testbed.sh status

testbed-clean:
	@bash testbed/testbed.sh clean

clean:
	rm -rf $(BIN)
