# The leaderboard service. `make run` starts it (embedded Redis, demo mode); `make test` runs the whole suite
# against real redis-server processes that the tests start themselves.
# Go from PATH, else where the official archive installs it.
GO ?= $(or $(shell command -v go 2>/dev/null),/usr/local/go/bin/go)
PKGS := ./...

.PHONY: run test test-deps bench generate lint fuzz

run:
	$(GO) run . -demo

# test-deps (scripts/test-deps.sh) checks for redis-server, redis-cli, Chromium and Node.js 18+ and installs the
# missing ones with apt-get when it may (root or passwordless sudo); otherwise it stops before any test runs.
test: test-deps
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 -timeout 9m $(PKGS)

test-deps:
	@sh scripts/test-deps.sh

bench:
	$(GO) run ./cmd/lbbench

generate:
	$(GO) run github.com/99designs/gqlgen generate

lint:
	gofmt -l . | (! grep .)
	$(GO) vet $(PKGS)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@latest $(PKGS)

# Fuzz each parser of client input for a short while (FUZZTIME, default 30s each).
FUZZTIME ?= 30s
fuzz:
	$(GO) test ./leaderboard -run '^$$' -fuzz FuzzParsePeriod -fuzztime $(FUZZTIME)
	$(GO) test ./leaderboard -run '^$$' -fuzz FuzzSubmissionArgs -fuzztime $(FUZZTIME)
	$(GO) test ./leaderboard -run '^$$' -fuzz FuzzPeriodKeys -fuzztime $(FUZZTIME)
	$(GO) test ./leaderboard -run '^$$' -fuzz FuzzCheckScoreText -fuzztime $(FUZZTIME)
	$(GO) test ./leaderboard -run '^$$' -fuzz FuzzRecordEncoding -fuzztime $(FUZZTIME)
