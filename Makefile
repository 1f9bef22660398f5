# tenure's build. Everything a fresh machine needs comes through the go
# command (staticcheck is run at a pinned version), so `make test` works on
# a clean clone with only Go installed.

GO          ?= go
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
FUZZTIME    ?= 15s
BENCHTIME   ?= 1s
RUN_FLAGS   ?=
CHAOS_SEED  ?= 1
CHAOS_RUNS  ?= 20
CHAOS_FLAGS ?=
TENURE_TEST_POSTGRES ?= postgres://tenure@127.0.0.1:55432/tenure_test?sslmode=disable

.PHONY: all build run test bench lint fuzz chaos interop fidelity clean

all: build

build:
	$(GO) build -o bin/tenure ./cmd/tenure

# The coordinator on its default settings, listening on 127.0.0.1:9092,
# with its state in an embedded etcd in ./tenure-data.
run: build
	./bin/tenure serve $(RUN_FLAGS)

# .ci/skipped.sh says which suites skip for want of a tool or server.
test:
	@bash .ci/skipped.sh
	$(GO) vet ./...
	$(GO) test -race -timeout 25m ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./...

lint:
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

# Runs every fuzz target for FUZZTIME each. `make test` already runs their
# seed corpora.
fuzz:
	@set -e; for f in $$(grep -rl --include='*_test.go' '^func Fuzz' .); do \
		dir=$$(dirname $$f); \
		for t in $$(grep -o '^func Fuzz[A-Za-z0-9_]*' $$f | cut -d' ' -f2); do \
			echo "== $$dir $$t"; \
			$(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$dir; \
		done; \
	done

# CHAOS_RUNS seeded runs of real processes under faults (and one unfenced
# control run the checker must catch), against the PostgreSQL server of
# TENURE_TEST_POSTGRES; see docs/CHAOS.md. `make test` runs a short version.
chaos: build
	$(GO) build -o bin/etcd go.etcd.io/etcd/server/v3
	./bin/tenure chaos --seed $(CHAOS_SEED) --runs $(CHAOS_RUNS) --etcd-bin bin/etcd \
		--postgres-dsn "$(TENURE_TEST_POSTGRES)" --quiet $(CHAOS_FLAGS)

# The simulator against real servers and members (docs/SIMULATOR.md): for
# each way a member goes away, the time until its partitions are owned
# again, simulated and real, and the difference; fails past max(200 ms,
# 10 %). `make test` leaves it out. FIDELITY_FLAGS narrows it:
# FIDELITY_FLAGS='-fidelity.cases fail-over'.
FIDELITY_FLAGS ?=
fidelity:
	$(GO) test -count=1 -timeout 30m -run '^TestFidelity$$' -v ./internal/e2e/ -args -fidelity $(FIDELITY_FLAGS)

# The fail-over matrix (docs/FAILOVER.md): stock clients of every language
# we support against a coordinator lost for good. Needs Debian's
# python3-confluent-kafka and python3-kafka, and Node.js with npm (the Node
# drivers' packages come from their lock file). INTEROP_FLAGS narrows it:
# INTEROP_FLAGS='-interop.clients kgo-848 -interop.faults kill9'.
INTEROP_FLAGS ?=
interop:
	cd internal/interop/drivers/node && npm ci --no-audit --no-fund --loglevel=error
	$(GO) test -count=1 -timeout 80m -run '^(TestSetPortsUnderChurn|TestFailoverMatrix|TestSASLLogins)$$' ./internal/interop -interop $(INTEROP_FLAGS)

clean:
	rm -rf bin chaos-runs
