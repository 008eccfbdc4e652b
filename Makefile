# minidubbo: `make demo` and `make test` are all a new user needs.
GO ?= go
# Fuzz runs are counts, not durations: Go 1.26's fuzz coordinator can fail a
# target with "context deadline exceeded" when a duration ends while a worker
# is busy (golang/go#75804, fixed in Go 1.27); a count has no deadline to race.
# FUZZTIME, when set (e.g. FUZZTIME=200000x), is every target's count; unset,
# each target runs FUZZRUNS inputs, or its own count from FUZZRUNS_BY_TARGET.
# A count bounds the CPU a target takes, so on a loaded machine the stage is
# slower but not unbounded. FUZZMINIMIZE bounds the runs spent shrinking each
# new interesting input (Go's default is 60 s of them per input).
FUZZTIME ?=
FUZZRUNS ?= 10000x
# FuzzOpenCache writes a file per input: 1.3 CPU-ms a run, 3-10 times the others.
# monitor/server's FuzzCollect stores a report in SQLite and queries the
# dashboard per input: 3000 inputs took 101 s at load 40.
FUZZRUNS_BY_TARGET ?= FuzzOpenCache=2000x FuzzCollect=1000x
FUZZMINIMIZE ?= 1000x
# The inputs a fuzz run finds interesting are cached, and the next run of the
# target starts by running all of them to learn their coverage. go test keeps
# them in GOCACHE/fuzz with no bound, so each `make fuzz` ran more of them
# first (config's FuzzParse: 485 cached inputs, ~10 CPU-s before its first
# new input). make fuzz keeps its own cache, FUZZCACHE (inside GOCACHE/fuzz,
# so `go clean -fuzzcache` empties it too), and trims each target's to its
# FUZZKEEP newest inputs before running it; FUZZKEEP=0 starts from the seeds
# alone. The seeds (f.Add, and testdata/fuzz: the inputs that once failed)
# are not in the cache and always run.
FUZZCACHE ?= $(shell $(GO) env GOCACHE)/fuzz/minidubbo-make-fuzz
FUZZKEEP ?= 100

.PHONY: test unit race fuzz fuzz-list lint cross bench bench-peers demo chaos zk-start zk-stop zookeeper

## test: every test, with the race detector, against a real ZooKeeper, then short fuzz runs.
test: zookeeper lint race fuzz

## zookeeper: make sure ZooKeeper 3.8 can be started (installs the Debian package as root).
zookeeper:
	@bash scripts/zookeeper.sh install

race:
	$(GO) test -race -count=1 -timeout 20m ./...

## unit: the quick tests only (real-ZooKeeper tests skip under -short).
unit:
	$(GO) test -short -count=1 ./...

## fuzz: each fuzz target for its count of inputs (see FUZZTIME above); every
## seed corpus also runs in the race stage. The targets are found in the test files
## `go list` names (build tags respected) rather than by `go test -list`, which
## built and linked every package's test binary just to list them (3 minutes
## on a loaded 2-core machine with a warm cache), and by one awk rather than a
## sed per test file (240 processes: 12-15 s of wall time at load 12).
FUZZLIST = $(GO) list -f '{{$$d := .Dir}}{{.ImportPath}}{{range .TestGoFiles}} {{$$d}}/{{.}}{{end}}{{range .XTestGoFiles}} {{$$d}}/{{.}}{{end}}' ./... | \
	awk '{ for (i = 2; i <= NF; i++) { \
		while ((getline l < $$i) > 0) if (l ~ /^func Fuzz[A-Za-z0-9_]*\(.*testing\.F\)/) { sub(/^func /, "", l); sub(/\(.*/, "", l); print $$1 ":" l }; \
		close($$i) } }'
fuzz:
	@set -e; targets=$$($(FUZZLIST)); \
	[ -n "$$targets" ] || { echo "fuzz: no fuzz targets found"; exit 1; }; \
	for kv in $(FUZZRUNS_BY_TARGET); do \
		echo "$$targets" | grep -q ":$${kv%%=*}$$" || \
			{ echo "fuzz: FUZZRUNS_BY_TARGET names $${kv%%=*}, which is not a fuzz target; the targets:" $$targets; exit 1; }; \
	done; \
	for t in $$targets; do \
		pkg=$${t%:*}; f=$${t#*:}; n='$(FUZZTIME)'; \
		if [ -z "$$n" ]; then \
			n=$(FUZZRUNS); \
			for kv in $(FUZZRUNS_BY_TARGET); do [ "$${kv%%=*}" != "$$f" ] || n=$${kv#*=}; done; \
		fi; \
		cache='$(FUZZCACHE)'/$$pkg; mkdir -p "$$cache/$$f"; \
		ls -t "$$cache/$$f" | tail -n +$$(($(FUZZKEEP) + 1)) | while read -r e; do rm -f "$$cache/$$f/$$e"; done; \
		echo "fuzz $$pkg $$f ($$n; $$(ls "$$cache/$$f" | wc -l) cached inputs)"; \
		$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime "$$n" -fuzzminimizetime $(FUZZMINIMIZE) -timeout 5m $$pkg \
			-args -test.fuzzcachedir="$$cache"; \
	done

## fuzz-list: the fuzz targets `make fuzz` runs, one pkg:Name a line.
fuzz-list:
	@$(FUZZLIST)

STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2

lint:
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	$(GO) vet ./...
	$(STATICCHECK) ./...
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run go mod tidy"; exit 1; }
	@$(MAKE) --no-print-directory cross

## cross (part of lint): the module and its tests build (go vet) for a 32-bit
## platform (386: int is 32 bits there, as on 32-bit ARM), Windows and macOS.
## With a warm build cache it takes seconds; the first run on a machine builds
## each platform's standard library and dependencies once (CGO_ENABLED=0: no
## C compiler is needed).
cross:
	CGO_ENABLED=0 GOARCH=386 $(GO) vet ./...
	CGO_ENABLED=0 GOOS=windows $(GO) vet ./...
	CGO_ENABLED=0 GOOS=darwin $(GO) vet ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

## bench-peers: minidubbo against raw TCP, net/rpc, rpcx, Kitex and grpc-go, servers in
## their own processes (the nested module bench/, its own go.mod); prints one table.
## Each system's server and load clients run a binary linking that system alone
## (bench/scripts/build.sh); the parent binary links them all.
BENCHFLAGS ?= -reps 5 -duration 2s
bench-peers:
	@d=$$(mktemp -d) && trap 'rm -rf "$$d"' EXIT && \
		GO=$(GO) bash bench/scripts/build.sh "$$d" && \
		timeout 15m "$$d/bench" $(BENCHFLAGS)

demo:
	bash scripts/demo.sh

## chaos: every fault scenario against real processes and a real ZooKeeper; prints one table (under 10 minutes).
CHAOS_TABLE ?= chaos-table.md
chaos: zookeeper
	$(GO) test -count=1 -timeout 14m -run '^TestChaos$$' -v ./examples/chaos/ -chaos.full -chaos.table $(abspath $(CHAOS_TABLE))
	@echo "table written to $(CHAOS_TABLE)"

zk-start:
	bash scripts/zookeeper.sh start

zk-stop:
	bash scripts/zookeeper.sh stop
