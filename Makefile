# tenure's build. Everything a fresh machine needs comes through the go
# command (staticcheck is run at a pinned version), so `make test` works on
# a clean clone with only Go installed.

GO          ?= go
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
FUZZTIME    ?= 15s
BENCHTIME   ?= 1s
RUN_FLAGS   ?=

.PHONY: all build run test bench lint fuzz clean

all: build

build:
	$(GO) build -o bin/tenure ./cmd/tenure

# The coordinator on its default settings, listening on 127.0.0.1:9092,
# with its state in an embedded etcd in ./tenure-data.
run: build
	./bin/tenure serve $(RUN_FLAGS)

test:
	$(GO) vet ./...
	$(GO) test -race ./...

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

clean:
	rm -rf bin
