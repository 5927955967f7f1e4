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

PLUGIN := $(BIN)/job_submit_pools.so
SPANK := $(BIN)/spank_elastic.so
PLUGIN_SRC := $(shell find cgo-plugins/job_submit_pools bridge/pools bridge/gpureq -name '*.go' -o -name '*.c' -o -name '*.h') go.mod go.sum
# Where `make install-plugin` puts the plugin: the first directory of the running Slurm's
# PluginDir unless given.
PLUGIN_DIR ?= $(shell scontrol show config 2>/dev/null | awk -F' = ' '/^PluginDir/ {split($$2, d, ":"); print d[1]}')

.PHONY: all build plugin spank install-plugin vet test test-unit bench demo \
	testbed-up testbed-down testbed-status testbed-clean clean

all: build

# Commands (package main under */cmd/) go to bin/; the plugin is built by its own rule.
build: plugin spank
	@mkdir -p $(BIN)
	@cmds=$$($(GO) list -f '{{if eq .Name "main"}}{{.ImportPath}}{{end}}' ./... | grep '/cmd/' || true); \
	if [ -n "$$cmds" ]; then echo "$(GO) build -o $(BIN)/ $$cmds"; $(GO) build -o $(BIN)/ $$cmds; fi

# The job_submit plugin is built against this machine's /usr/include/slurm, so its
# plugin_version matches the slurmctld installed here (libslurm-dev).
plugin: $(PLUGIN)

$(PLUGIN): $(PLUGIN_SRC)
	@mkdir -p $(BIN)
	CGO_ENABLED=1 $(GO) build -buildmode=c-shared -o $@ ./cgo-plugins/job_submit_pools
	@rm -f $(BIN)/job_submit_pools.h

# The SPANK plugin (elastic job declarations) is plain C against the same headers; sbatch,
# srun and slurmstepd load it through plugstack.conf (see elasticd/README.md).
spank: $(SPANK)

$(SPANK): cgo-plugins/spank_elastic/spank_elastic.c
	@mkdir -p $(BIN)
	$(CC) -Wall -Wextra -Werror -O2 -fPIC -shared -o $@ $<

# Installed by rename, never overwritten in place: slurmctld may have the old one mapped.
install-plugin: $(PLUGIN)
	@test -n "$(PLUGIN_DIR)" || { echo "PluginDir unknown: make install-plugin PLUGIN_DIR=/usr/lib/x86_64-linux-gnu/slurm-wlm"; exit 1; }
	install -m 0755 $(PLUGIN) $(DESTDIR)$(PLUGIN_DIR)/.job_submit_pools.so.new
	mv -f $(DESTDIR)$(PLUGIN_DIR)/.job_submit_pools.so.new $(DESTDIR)$(PLUGIN_DIR)/job_submit_pools.so
	@echo "installed $(DESTDIR)$(PLUGIN_DIR)/job_submit_pools.so; enable it with JobSubmitPlugins=pools and restart slurmctld"

vet:
	$(GO) vet ./...
	$(GO) vet -tags integration ./...

test-unit: vet
	$(GO) test -count=1 ./...

# Integration tests (build tag `integration`) share one cluster, so packages run one at a time.
test: testbed-up vet
	$(GO) test -count=1 -p 1 -tags integration -timeout 30m ./...

# Every benchmark, one results file in bench/results/ (see bench/README.md).
bench:
	@bash bench/run.sh

demo: testbed-up
	@bash testbed/demo.sh

# Packages first: building the plugins needs libslurm-dev's headers. Then the cluster, with the
# plugins installed and quotad and elasticd started (testbed/quotad.sh, testbed/elasticd.sh).
testbed-up:
	@bash testbed/testbed.sh packages
	@$(MAKE) --no-print-directory build
	@bash testbed/testbed.sh up

testbed-down:
	@bash testbed/testbed.sh down

testbed-status:
	@bash testbed/testbed.sh status

testbed-clean:
	@bash testbed/testbed.sh clean

clean:
	rm -rf $(BIN)
