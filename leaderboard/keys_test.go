package leaderboard

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/internal/redistest"
)

// The key bytes of a board, written out: data written before keys.go owned the layout stays readable. A change
// of a name here is a change of the keys every existing board has in Redis.
func TestKeyLayoutBytes(t *testing.T) {
	t.Parallel()
	s := New(nil, Config{Prefix: "lb"})
	base := s.makeKeyBase("b{1}")
	got := map[string]string{
		"base":     base,
		"def":      keyDef.of(base),
		"rdef":     keyRestoreDef.of(base),
		"names":    keyNames.of(base),
		"counters": keyCounters.of(base),
		"event":    keyEvent.of(base) + "ev1",
		"limit":    keyLimit.of(base) + "29500000:p",
		"watch":    keyWatch.of(base),
		"season":   keySeason.of(base),
		"seasons":  keySeasons.of(base),
		"used":     keySeasonsUsed.of(base),
		"outbox":   s.outboxKey("b{1}"),
		"dead":     s.deadLetterKey("b{1}"),
		"tomb":     keyTomb.of(base),
		"restore":  keyRestoring.of(base),
		"channel":  s.Channel("b{1}"),
		"snaps":    s.SnapshotKeys("b{1}"),
		"all":      s.BoardKeys("b{1}"),
		"registry": s.registryKey("b{1}"),
		"z":        keyRanking.at(base, Weekly, "2026-W48"),
		"s":        s.stateKey("b{1}", Daily, "2026-11-29"),
		"r":        keyRecords.atN(base, AllTime, AllPeriod, 17),
		"r-prefix": recordsPrefix(base, Monthly, "2026-11"),
		"h":        keyHistogram.at(base, Season, "s1"),
		"v":        keyTailScores.atN(base, Season, "s1", 3),
		"x":        keyFence.at(base, Daily, "2026-11-29"),
	}
	want := map[string]string{
		"base":     "lb:{YnsxfQ}:",
		"def":      "lb:{YnsxfQ}:def",
		"rdef":     "lb:{YnsxfQ}:rdef",
		"names":    "lb:{YnsxfQ}:m",
		"counters": "lb:{YnsxfQ}:c",
		"event":    "lb:{YnsxfQ}:e:ev1",
		"limit":    "lb:{YnsxfQ}:l:29500000:p",
		"watch":    "lb:{YnsxfQ}:watch",
		"season":   "lb:{YnsxfQ}:season",
		"seasons":  "lb:{YnsxfQ}:seasons",
		"used":     "lb:{YnsxfQ}:seasons:used",
		"outbox":   "lb:{YnsxfQ}:o",
		"dead":     "lb:{YnsxfQ}:o:dead",
		"tomb":     "lb:{YnsxfQ}:del",
		"restore":  "lb:{YnsxfQ}:restoring",
		"channel":  "lb:{YnsxfQ}:live",
		"snaps":    "lb:{YnsxfQ}:snap:*",
		"all":      "lb:{YnsxfQ}:*",
		"registry": "lb:{~671}:boards",
		"z":        "lb:{YnsxfQ}:z:w:2026-W48",
		"s":        "lb:{YnsxfQ}:s:d:2026-11-29",
		"r":        "lb:{YnsxfQ}:r:a:all:17",
		"r-prefix": "lb:{YnsxfQ}:r:m:2026-11:",
		"h":        "lb:{YnsxfQ}:h:s:s1",
		"v":        "lb:{YnsxfQ}:v:s:s1:3",
		"x":        "lb:{YnsxfQ}:x:d:2026-11-29",
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s key %q, want %q", k, got[k], w)
		}
	}
	if len(boardKeyTable) != 16 || len(windowKeyTable) != 6 {
		t.Errorf("%d board keys and %d window period keys: a key was added; write its bytes here", len(boardKeyTable),
			len(windowKeyTable))
	}
}

// keysHarness returns, from common.lua as the scripts run it, base .. K[name] for each name of boardKeyTable, then
// for each (window code, period, n) given every builder of windowKeyTable, then snap_base('id').
// ARGV: the number of names, the names, then the triples.
func keysHarness() *redis.Script {
	var b strings.Builder
	b.WriteString(`local out, nk = {}, tonumber(ARGV[1])
for i = 2, nk + 1 do out[#out + 1] = base .. K[ARGV[i]] end
for i = nk + 2, #ARGV, 3 do
  local w, p, n = ARGV[i], ARGV[i + 1], ARGV[i + 2]
`)
	for _, k := range windowKeyTable {
		if k.numbered {
			fmt.Fprintf(&b, "  out[#out + 1] = %s(w, p, n)\n  out[#out + 1] = %s(w, p, '')\n", k.lua, k.lua)
		} else {
			fmt.Fprintf(&b, "  out[#out + 1] = %s(w, p)\n", k.lua)
		}
	}
	b.WriteString("end\nout[#out + 1] = snap_base('id')\nreturn out\n")
	return redis.NewScript(commonLua + prologue + b.String())
}

// The keys the scripts name are the keys Go names: every board key of common.lua's K and every window period key
// builder give what keys.go gives, for ids that need their tag, every window, periods of every window and record
// hash numbers, on Redis, the cluster and the embedded store.
func TestLuaKeysMatchGo(t *testing.T) {
	t.Parallel()
	harness := keysHarness()
	type slot struct {
		w      Window
		period string
		n      uint64
	}
	slots := []slot{{AllTime, AllPeriod, 0}, {Daily, "2026-11-29", 1}, {Weekly, "2026-W48", 61}, {Monthly, "2026-11", 62},
		{Season, "s-2026:1", 65535}, {Daily, "2031-01-01", 4294967296}}
	for _, tg := range plainTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			s := New(tg.Client, Config{Prefix: redistest.Prefix(t)})
			for _, board := range []string{"b", "b{1}", "ü:*?[x]", ""} {
				base := s.makeKeyBase(board)
				args := []any{len(boardKeyTable)}
				var want []string
				for _, k := range boardKeyTable {
					args = append(args, k.lua)
					want = append(want, k.of(base))
				}
				for _, sl := range slots {
					args = append(args, windowCodes[sl.w], sl.period, sl.n)
					for _, k := range windowKeyTable {
						if k.numbered {
							want = append(want, k.atN(base, sl.w, sl.period, sl.n), k.at(base, sl.w, sl.period)+":")
						} else {
							want = append(want, k.at(base, sl.w, sl.period))
						}
					}
				}
				want = append(want, keySnap.of(base)+"id:")
				got, err := harness.Run(ctx, tg.Client, declared([]string{base}), args...).StringSlice()
				if err != nil {
					t.Fatal(err)
				}
				if strings.Join(got, "\n") != strings.Join(want, "\n") {
					t.Fatalf("board %q: the scripts name\n%s\nGo names\n%s", board, strings.Join(got, "\n"),
						strings.Join(want, "\n"))
				}
			}
			if want := recordsPrefix(s.makeKeyBase("b"), Daily, "p"); !strings.HasPrefix(
				recordLayout{hv: recordHashVersion}.key(want, "id"), want) {
				t.Fatal("recordLayout.key does not start with recordsPrefix")
			}
		})
	}
}

// No script glues a key of the board by hand: every key after the key base is named through keys.go's K or a
// window period key builder (common.lua's snap_base and limit_key build on K).
func TestScriptsGlueNoKeys(t *testing.T) {
	t.Parallel()
	glued := regexp.MustCompile(`\bbase\s*\.\.\s*(['"]|\[\[|\([^)]*['"])`)
	texts := map[string]string{"common.lua": commonLuaSource}
	for sc := range library.fn {
		texts[sc.role] = sc.body
	}
	for name, text := range texts {
		for i, line := range strings.Split(text, "\n") {
			if code, _, _ := strings.Cut(line, "--"); glued.MatchString(code) {
				t.Errorf("%s:%d glues a key by hand: %s", name, i+1, strings.TrimSpace(line))
			}
		}
	}
}
