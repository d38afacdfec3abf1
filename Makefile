# The leaderboard service. `make run` starts it (embedded Redis, demo mode); `make test` runs the whole suite
# against real redis-server processes that the tests start themselves.
# Go from PATH, else where the official archive installs it.
GO ?= $(or $(shell command -v go 2>/dev/null),/usr/local/go/bin/go)
GOFMT ?= $(or $(shell command -v gofmt 2>/dev/null),/usr/local/go/bin/gofmt)
PKGS := ./...

.PHONY: run test test-deps tidy bench generate lint fuzz graphiql-assets

# REDISTEST_NO_CLUSTER=1 skips the Redis Cluster runs of the suite for a quick local `go test`; `make test` (what CI
# runs) always runs them, whatever the environment says.
unexport REDISTEST_NO_CLUSTER

run:
	$(GO) run . -demo

# test-deps (scripts/test-deps.sh) checks for redis-server, redis-cli, Chromium, Node.js 18+ and PostgreSQL's initdb
# and postgres and installs the missing ones with apt-get when it may (root or passwordless sudo); otherwise it stops
# before any test runs.
# vet and the runs without the race detector build as the Dockerfile does (CGO_ENABLED=0, -trimpath), as do the
# suite's own builds of the server binary: one compile of every package serves them all. (Each other set of build
# flags is a compile of its own: ~130 s of a 2-core machine from a cold cache, and three tests building the server
# at once from a cold cache each compiled it.)
NORACE := CGO_ENABLED=0 $(GO)

# The race run lists its longest packages first: go test starts packages in the order given, and the longest ones
# last left one core idle at the end (-p is the core count). It builds with -trimpath too, so that its compiled
# packages do not depend on the checkout's directory: a fresh checkout elsewhere reuses a warm build cache (18 s
# to build every test binary from another directory here, 44 s without).
LONGEST := ./internal/server ./leaderboard ./pubsub ./ledger ./cmd/lbbench

# The tests that run without the race detector (each calls redistest.WithoutRace, which skips it under -race; a test
# holds this list to the code), after the race run: sequential volume, where the detector has nothing to see and
# slows the client several times (the plain reads against the scripts, the tail estimate on 1,000,000 players, the
# sharded boards against their model and their twins, ...), a heap figure it distorts (the export's), and rendering
# in the test's own process (the demo's seeding on the embedded store, a stuck websocket reader's 12 MB). Bound by
# Redis without it, each gets a redis-server of its own and four run at once; beside the race run (at nice 19)
# the 1,000,000-player scripts starved past Redis's busy threshold.
NORACE_TESTS := '^(TestExportMemoryFlat|TestTailEstimateAccuracy|TestTailEstimateBounds|TestShardedTwin.*|TestAroundPlainMatchesScript|TestRanksPlainMatchesScript|TestMemoryPerPlayer|TestRecordHashSpreadsIDs|TestTieRankModel|TestExactTopTierIsExact|TestShardedBoardMatchesModel|TestDemoSeedsTheEmbeddedStoreQuietly|TestWSStuckReaderClosed)$$'

test: test-deps tidy
	$(NORACE) vet -trimpath $(PKGS)
	$(GO) test -race -trimpath -count=1 -timeout 9m $(LONGEST) $(PKGS)
	LB_MODEL_SUBMISSIONS=12000 $(NORACE) test -trimpath -count=1 -timeout 6m -parallel 4 -run $(NORACE_TESTS) ./internal/server ./leaderboard
	@# In a process of its own, the stack and heap an idle websocket keeps (race instrumentation doubles stacks).
	$(NORACE) test -trimpath -count=1 -timeout 1m -run '^(TestIdleConnectionStack|TestIdleConnectionHeap)$$' \
		./internal/server

# tidy fails when gofmt would change a file or go.mod/go.sum are not tidy (CI runs it through make test).
tidy:
	@out=$$($(GOFMT) -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
		if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) mod tidy -diff

test-deps:
	@sh scripts/test-deps.sh

bench:
	$(GO) run ./cmd/lbbench

# gqlgen's generate with this repository's plugin (cmd/gqlgen), which also writes graph/operation_generated.go.
generate:
	$(GO) run ./cmd/gqlgen

lint:
	$(GOFMT) -l . | (! grep .)
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
	$(GO) test ./leaderboard -run '^$$' -fuzz FuzzParseRecord -fuzztime $(FUZZTIME)
	$(GO) test ./leaderboard -run '^$$' -fuzz FuzzSeasonID -fuzztime $(FUZZTIME)
	$(GO) test ./leaderboard -run '^$$' -fuzz FuzzCloseTopEncoding -fuzztime $(FUZZTIME)
	$(GO) test ./internal/server -run '^$$' -fuzz FuzzClientAddr -fuzztime $(FUZZTIME)
	$(GO) test ./graph -run '^$$' -fuzz FuzzEncodeScalars -fuzztime $(FUZZTIME)
	$(GO) test ./graph -run '^$$' -fuzz FuzzCoerceVariables -fuzztime $(FUZZTIME)
	$(GO) test ./graph -run '^$$' -fuzz FuzzPreparedArgs -fuzztime $(FUZZTIME)
	$(GO) test ./internal/gqlhttp -run '^$$' -fuzz FuzzBodyParams -fuzztime $(FUZZTIME)
	$(GO) test ./internal/topcache -run '^$$' -fuzz FuzzNamesTop -fuzztime $(FUZZTIME)
	$(GO) test ./internal/fastpath -run '^$$' -fuzz FuzzMarshalResponse -fuzztime $(FUZZTIME)
	$(GO) test ./graph -run '^$$' -fuzz FuzzCheckText -fuzztime $(FUZZTIME)
	$(GO) test ./internal/server -run '^$$' -fuzz FuzzGraphQL -fuzztime $(FUZZTIME)
	$(GO) test ./internal/mediatype -run '^$$' -fuzz FuzzIsJSON -fuzztime $(FUZZTIME)

# Fetch GraphiQL's vendored assets from npm again and check them against web/graphiql/vendor.txt.
graphiql-assets:
	scripts/graphiql-assets.sh
