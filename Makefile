# slurmbridge: the front door.
#   make               build everything into bin/
#   make demo          bring the local Slurm testbed up and show it working (root)
#   make test          bring the testbed up, then vet and run every test, integration included (root)
#   make test SLURM_RELEASE=24.11   the same against another supported release (22.05, 24.11,
#                      26.05): on the host when it runs that release, else in a Debian container
#                      of it (testbed/container.sh)
#   make test-unit     vet and unit tests only (no Slurm needed)
#   make bench         run every benchmark (bench-replay-full: the trace replay's full run)
#   make install       binaries, plugins, units, example configs (PREFIX, DESTDIR, PLUGIN_DIR)
#   make deb           Debian packages slurmbridge-controller, -node and -client in dist/
#   make test-deb      build the packages, install and remove them with dpkg, check the files (root)
#   make test-installed  the testbed from the installed packages: integration tests, doctor (root)
#   make testbed-up | testbed-down | testbed-status | testbed-clean
#   make docker-base | testbed-docker-up | testbed-docker-test | testbed-docker-down   (containers)

SHELL := /bin/bash
export PATH := $(PATH):/usr/local/go/bin
GO ?= go
BIN := bin
# A testbed of a site's size, from a trace's cluster (bench/scale): make testbed-up PRESET=alibaba
# [NODES=N] brings up its 1,523 nodes (or N in the same proportions) in a testbed of its own,
# TRACE_DIR the trace's folder; testbed-down, -status and -clean take the same PRESET.
PRESET ?=
NODES ?=
# testbed.sh's NODES is a bash array of the nodes' names: make's NODES stays out of its way.
unexport NODES
TRACE_DIR ?= $(abspath ../shared/traces/alibaba-gpu-v2023)
TESTBED_DIR ?= $(if $(PRESET),/tmp/slurmbridge-$(PRESET),/tmp/slurmbridge-testbed)
export TESTBED_DIR
ifneq ($(PRESET),)
ifneq ($(filter test demo test-installed testbed-docker-% site-%,$(MAKECMDGOALS)),)
$(error make $(filter test demo test-installed testbed-docker-% site-%,$(MAKECMDGOALS)): runs on the testbed of slurm-conf/testbed; PRESET=$(PRESET) is for testbed-up and the scale benchmarks)
endif
endif

# The Slurm release to test against (testbed/release.sh lists them); empty means the host's.
HOST_RELEASE := $(shell bash testbed/release.sh host 2>/dev/null)
SLURM_RELEASE ?=
# Set when the release asked for is not the host's: test targets then run in its container.
IN_CONTAINER := $(if $(SLURM_RELEASE),$(filter-out $(HOST_RELEASE),$(SLURM_RELEASE)))
# The container testbed and its base image are of SLURM_RELEASE (the host's when empty).
export SLURM_RELEASE

# RACE=1: the tests are built with Go's race detector, elasticd's integration tests with the
# daemon in them (they run it in-process, its HTTP API read as a user while it cycles). CI runs
# the host's suite so. RACE_DAEMONS=1 also builds the commands, the testbed's daemons among them,
# with it; they then stop at the first data race with its report in their log
# (testbed/supervise.sh sets GORACE). Not in CI: a race-built quotad cycling all suite long
# slowed the other releases' suites beside it on 2 cores until a torchrun test timed out. The
# plugins never are: a race-instrumented Go runtime has no place inside slurmctld.
RACE ?=
RACE_DAEMONS ?=
RACE_FLAG := $(if $(RACE),-race)
RACE_BUILD_FLAG := $(if $(RACE_DAEMONS),-race)

PLUGIN := $(BIN)/job_submit_pools.so
SPANK := $(BIN)/spank_elastic.so
# The plugins are built for the Slurm of /usr/include/slurm (they must match it to the micro
# version): a stamp named after that version rebuilds them when the headers change.
SLURM_HEADERS_VERSION := $(shell awk '$$1 == "\#define" && $$2 == "SLURM_VERSION_NUMBER" {print $$3}' /usr/include/slurm/slurm_version.h 2>/dev/null)
SLURM_STAMP := $(BIN)/.built-for-slurm-$(or $(SLURM_HEADERS_VERSION),none)
PLUGIN_SRC := $(shell find cgo-plugins/job_submit_pools bridge/pools bridge/gpureq bridge/slurm bridge/noderoom -name '*.go' -o -name '*.c' -o -name '*.h') go.mod go.sum
# Where `make install-plugin` puts the plugin: the first directory of the running Slurm's
# PluginDir unless given, else (no slurmctld to ask) the directory of Debian's own plugins.
PLUGIN_DIR ?= $(or $(shell scontrol show config 2>/dev/null | awk -F' = ' '/^PluginDir/ {split($$2, d, ":"); print d[1]}'),$(shell dpkg -L slurm-wlm-basic-plugins slurm-smd 2>/dev/null | sed -n 's|/select_cons_tres\.so$$||p' | head -n1))

# `make install` layout. Units and configs name the binaries and /etc/slurmbridge by these.
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
SYSCONFDIR ?= /etc
DOCDIR ?= $(PREFIX)/share/doc/slurmbridge
UNITDIR ?= $(PREFIX)/lib/systemd/system

.PHONY: all build plugin spank install-plugin install-spank install deb test-deb test-installed vet test test-representative test-unit bench bench-replay-full fuzz demo \
	testbed-up testbed-down testbed-status testbed-clean testbed-render clean

all: build

# Commands (package main under */cmd/) go to bin/; the plugins are built by their own rules, and
# bench/'s tools run with `go run` (bench/README.md).
build: plugin spank
	@mkdir -p $(BIN)
	@cmds=$$($(GO) list -f '{{if eq .Name "main"}}{{.ImportPath}}{{end}}' ./... | grep '/cmd/' | grep -v '/bench/' || true); \
	if [ -n "$$cmds" ]; then echo "$(GO) build $(RACE_BUILD_FLAG) -o $(BIN)/ $$cmds"; $(GO) build $(RACE_BUILD_FLAG) -o $(BIN)/ $$cmds; fi

# The job_submit plugin is built against this machine's /usr/include/slurm, so its
# plugin_version matches the slurmctld installed here (libslurm-dev).
plugin: $(PLUGIN)

$(SLURM_STAMP):
	@mkdir -p $(BIN)
	@rm -f $(BIN)/.built-for-slurm-*
	@touch $@

$(PLUGIN): $(PLUGIN_SRC) $(SLURM_STAMP)
	@mkdir -p $(BIN)
	CGO_ENABLED=1 $(GO) build -buildmode=c-shared -o $@ ./cgo-plugins/job_submit_pools
	@rm -f $(BIN)/job_submit_pools.h

# The SPANK plugin (elastic job declarations) is plain C against the same headers; sbatch,
# srun and slurmstepd load it through plugstack.conf (see elasticd/README.md).
spank: $(SPANK)

$(SPANK): cgo-plugins/spank_elastic/spank_elastic.c $(SLURM_STAMP)
	@mkdir -p $(BIN)
	$(CC) -Wall -Wextra -Werror -O2 -fPIC -shared -o $@ $<

# Installed by rename, never overwritten in place: slurmctld may have the old one mapped.
install-plugin: $(PLUGIN)
	@test -n "$(PLUGIN_DIR)" || { echo "PluginDir unknown: make install-plugin PLUGIN_DIR=/usr/lib/x86_64-linux-gnu/slurm-wlm"; exit 1; }
	install -d -m 0755 $(DESTDIR)$(PLUGIN_DIR)
	install -m 0755 $(PLUGIN) $(DESTDIR)$(PLUGIN_DIR)/.job_submit_pools.so.new
	mv -f $(DESTDIR)$(PLUGIN_DIR)/.job_submit_pools.so.new $(DESTDIR)$(PLUGIN_DIR)/job_submit_pools.so
	@echo "installed $(DESTDIR)$(PLUGIN_DIR)/job_submit_pools.so; enable it with JobSubmitPlugins=pools and restart slurmctld"

# The SPANK plugin goes beside it, the same way: sbatch and slurmstepd map it for every job.
install-spank: $(SPANK)
	@test -n "$(PLUGIN_DIR)" || { echo "PluginDir unknown: make install-spank PLUGIN_DIR=/usr/lib/x86_64-linux-gnu/slurm-wlm"; exit 1; }
	install -d -m 0755 $(DESTDIR)$(PLUGIN_DIR)
	install -m 0755 $(SPANK) $(DESTDIR)$(PLUGIN_DIR)/.spank_elastic.so.new
	mv -f $(DESTDIR)$(PLUGIN_DIR)/.spank_elastic.so.new $(DESTDIR)$(PLUGIN_DIR)/spank_elastic.so

# Everything, for a controller and its nodes alike; nothing is enabled or started (see
# docs/operations.md). Existing files in /etc/slurmbridge are kept: they are the site's.
install: build install-plugin install-spank
	BINDIR=$(BINDIR) SYSCONFDIR=$(SYSCONFDIR) DOCDIR=$(DOCDIR) UNITDIR=$(UNITDIR) DESTDIR=$(DESTDIR) \
		bash packaging/install.sh

# Debian packages built against this machine's Slurm, in dist/ (packaging/build-deb.sh).
deb: build
	bash packaging/build-deb.sh

# Builds the packages, installs and removes them with dpkg, checks every file comes and goes.
test-deb: deb
	bash packaging/test-deb.sh

# Installs the packages, restarts the testbed from them (TESTBED_FROM=installed), runs the pools
# and quotad integration tests and the installed doctor against it, then purges them.
test-installed: deb
	bash packaging/test-installed.sh

vet:
	$(GO) vet ./...
	$(GO) vet -tags integration ./...

# Under the race detector: the daemons' HTTP handlers read state their cycles change, and a Go
# map read during a write is a fatal error (about 90 s on 2 cores).
test-unit: vet
	$(GO) test -race -count=1 ./...

# Integration tests (build tag `integration`) share one cluster, so packages run one at a time.
# A package's limit covers its turns waiting for other suites' torchrun tests in CI.
ifeq ($(IN_CONTAINER),)
test: testbed-up vet
	$(GO) test $(RACE_FLAG) -count=1 -p 1 -tags integration -timeout 45m ./...
else
test:
	@bash testbed/release.sh check $(SLURM_RELEASE)
	bash testbed/container.sh $(SLURM_RELEASE) make test
endif

# The representative part of the suite that CI runs on the releases built from SchedMD's source
# (25.05, 25.11), where the whole suite runs on demand (make test SLURM_RELEASE=25.11): the
# testbed up with the plugin loaded and doctor clean on it, routing, the job-record table of
# the release, a lend kept to its time limit and reclaimed by requeue, and the attacker's suite.
REPRESENTATIVE_TESTS = ^(TestLiveDoctorIsCleanOnTheTestbed|TestLayoutsAreThoseOfTheSourceAtHand|TestExportedLayoutReleasesAreTheTables|TestPluginRoutesPendingJobsToPools|TestPluginRejectsImpossibleRequestsWithUsefulMessage|TestRoutedGPUJobRunsInCheapestPool|TestFullSpotPoolFallsBackToOnDemand|TestPluginRoutesInteractiveJobs|TestPluginChecksUpdatesOfPendingJobs|TestHeterogeneousJobsHoldNoGPUs|TestBorrowReclaimReturn|TestReclaimedBorrowerKeepsItsLogAndResumes|TestAttack.*)$$
ifeq ($(IN_CONTAINER),)
test-representative: testbed-up
	$(GO) test -count=1 -p 1 -tags integration -timeout 30m -run '$(REPRESENTATIVE_TESTS)' ./...
else
test-representative:
	@bash testbed/release.sh check $(SLURM_RELEASE)
	bash testbed/container.sh $(SLURM_RELEASE) make test-representative
endif

# Every benchmark, one results file in bench/results/ (see bench/README.md).
bench:
	@bash bench/run.sh

# Fuzzing: every native fuzz target (func FuzzXxx in a _test.go file) of every package runs for
# FUZZTIME each (default 10s), one after another (.ci/fuzz.sh, listed by `go test -list`). A
# target that fails stops the run and fails it; go writes the input that failed to the
# package's testdata/fuzz/FuzzXxx/, which is kept (committed) as a regression seed that every
# plain `go test` replays. A target stopped only by Go's own fuzz deadline (no input written,
# golang/go#75804) runs once more. The targets cover every reader of user or
# Slurm text: GPU requests and TRES (bridge/gpureq), pools.yaml and routing (bridge/pools),
# squeue (text and --json), sinfo/scontrol nodes, sacct, sacctmgr, unmunge, versions
# (bridge/slurm), quotas.yaml (quotad/policy), a job's GPU strings to quotad's terms
# (quotad/snapshot), elasticd's report lines and declaration.json (elasticd/registry).
# FUZZPKGS names the packages (default: every directory with a func Fuzz in a _test.go file,
# which spares compiling every package's tests only to list them).
FUZZTIME ?= 10s
FUZZPKGS ?= $(sort $(patsubst %/,./%,$(dir $(shell grep -rl --include='*_test.go' '^func Fuzz' bridge quotad elasticd poolctl doctor cgo-plugins 2>/dev/null))))
fuzz:
	@bash .ci/fuzz_test.sh
	@GO=$(GO) bash .ci/fuzz.sh $(FUZZTIME) $(FUZZPKGS)

# The trace replay's full mode, for the record (about 15 minutes; root, testbed up). The trace's
# files are not in the repository: TRACE names one (see bench/README.md).
TRACE ?= ../shared/traces/alibaba-gpu-v2023/openb_pod_list_gpuspec25.csv
bench-replay-full:
	$(GO) run ./bench/cmd/tracereplay -preset full -trace $(TRACE) run

demo: testbed-up
	@bash testbed/demo.sh

# Packages first: building the plugins needs libslurm-dev's headers. Then the cluster, with the
# plugins installed and quotad and elasticd started (testbed/quotad.sh, testbed/elasticd.sh).
testbed-up:
	@bash testbed/testbed.sh packages
	@$(MAKE) --no-print-directory build
ifeq ($(PRESET),)
	@bash testbed/testbed.sh up
else
	@$(GO) run ./bench/cmd/scalepreset -preset '$(PRESET)' -trace '$(TRACE_DIR)' -nodes '$(or $(NODES),0)' -out '$(TESTBED_DIR)/scalepreset'
	@TESTBED_FACTS='$(TESTBED_DIR)/scalepreset/facts.yaml' bash testbed/testbed.sh up
endif

testbed-down:
	@bash testbed/testbed.sh down

testbed-status:
	@bash testbed/testbed.sh status

testbed-clean:
	@bash testbed/testbed.sh clean

# slurm-conf/testbed/quotas.yaml rendered again from the testbed's facts (facts.yaml) after a
# change to them: the container testbed and the tests read it by its path (testbed.sh up renders
# its own copy, which quotad.sh imports; a unit test keeps the two the same).
testbed-render:
	$(GO) run ./testbed/cmd/testbed-render files -facts slurm-conf/testbed/facts.yaml -out slurm-conf/testbed quotas.yaml

clean:
	rm -rf $(BIN) dist

# The container testbed (docker/slurm-testbed/): no registry needed, the base image comes from
# a Debian mirror (debootstrap + docker import) and Go builds offline from this host's toolchain.
# testbed-docker-test brings it up first when it is not (the image is rebuilt only on changes).
DOCKER_TESTBED := bash docker/slurm-testbed/testbed-docker.sh
.PHONY: docker-base testbed-docker-build testbed-docker-up testbed-docker-test testbed-docker-down \
	testbed-docker-logs testbed-docker-state testbed-docker-shell

docker-base:
	@bash docker/slurm-testbed/build-base.sh

testbed-docker-build: docker-base
	@$(DOCKER_TESTBED) build

testbed-docker-up: docker-base
	@$(DOCKER_TESTBED) up

testbed-docker-test: testbed-docker-up
	@$(DOCKER_TESTBED) test

testbed-docker-down:
	@$(DOCKER_TESTBED) down

testbed-docker-logs:
	@$(DOCKER_TESTBED) logs

testbed-docker-state:
	@$(DOCKER_TESTBED) state

testbed-docker-shell:
	@$(DOCKER_TESTBED) shell alice

# The site cluster (site/site.sh): slurmbridge from its packages on hosts with systemd as PID 1,
# two controllers, a database host, a login host and a host per node; the fault suite against it.
SITE_RELEASE = $(if $(SLURM_RELEASE),$(SLURM_RELEASE),$(shell bash testbed/release.sh host))
.PHONY: site-up site-down site-status site-logs site-demo site-test site-upgrade-test site-slurm-upgrade-test
site-up:
	@bash site/site.sh up $(SITE_RELEASE)
site-down:
	@bash site/site.sh down $(SITE_RELEASE)
site-status:
	@bash site/site.sh status $(SITE_RELEASE)
site-logs:
	@bash site/site.sh logs $(SITE_RELEASE)
# make demo's steps on the running site (make site-up first), from its login host.
site-demo:
	@bash site/site.sh demo $(SITE_RELEASE)
# Against the running site: elastic jobs across hosts, then the faults.
site-test:
	SLURM_RELEASE=$(SITE_RELEASE) $(GO) test -count=1 -tags site -timeout 40m -v -run 'TestElasticAcrossHosts|TestFaults' ./site/sitetest/
# A new site from the previous release's packages (site/previous-release), upgraded under load
# to this tree's and rolled back.
site-upgrade-test:
	@bash site/site.sh previous-debs $(SITE_RELEASE)
	@bash site/site.sh debs $(SITE_RELEASE)
	@SITE_DEBS=site/.dist-previous/$(SITE_RELEASE) bash site/site.sh up $(SITE_RELEASE)
	SLURM_RELEASE=$(SITE_RELEASE) SITE_UPGRADE_FROM=$(CURDIR)/site/.dist-previous/$(SITE_RELEASE) SITE_UPGRADE_TO=$(CURDIR)/site/.dist/$(SITE_RELEASE) \
		$(GO) test -count=1 -tags site -timeout 30m -v -run '^TestUpgradeSlurmbridge$$' ./site/sitetest/
# A new site of Slurm 24.11 upgraded under load to 26.05 (Debian sid's packages) with this
# tree's packages built for 26.05.
site-slurm-upgrade-test:
	@bash site/site.sh debs 26.05
	@bash site/site.sh up 24.11
	SLURM_RELEASE=24.11 SITE_SLURM_UPGRADE_DEBS=$(CURDIR)/site/.dist/26.05 \
		$(GO) test -count=1 -tags site -timeout 30m -v -run '^TestUpgradeSlurm$$' ./site/sitetest/
