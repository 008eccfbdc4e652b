# minidubbo: `make demo` and `make test` are all a new user needs.
GO ?= go
# A count, not a duration: Go 1.26's fuzz coordinator can fail a target with
# "context deadline exceeded" when a duration ends while a worker is busy
# (golang/go#75804, fixed in Go 1.27); a count has no deadline to race.
FUZZTIME ?= 30000x

.PHONY: test unit race fuzz lint bench bench-peers demo chaos zk-start zk-stop zookeeper

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

## fuzz: each fuzz target for FUZZTIME.
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
			echo "fuzz $$pkg $$f ($(FUZZTIME))"; \
			$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) -timeout 5m $$pkg; \
		done; \
	done

STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2

lint:
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	$(GO) vet ./...
	$(STATICCHECK) ./...

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
