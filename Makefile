# The leaderboard service. `make run` starts it (embedded Redis, demo mode); `make test` runs the whole suite
# against real redis-server processes that the tests start themselves.
GO ?= go
PKGS := ./...

.PHONY: run test bench generate lint fuzz

run:
	$(GO) run . -demo

test:
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 -timeout 9m $(PKGS)

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
