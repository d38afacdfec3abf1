package leaderboard_test

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/internal/redistest"
	lb "github.com/leaderboard/leaderboard/leaderboard"
)

// eachMaster runs f on every primary behind c (c itself when it is not a cluster client).
func eachMaster(t *testing.T, c redis.UniversalClient, f func(c *redis.Client) error) {
	t.Helper()
	ctx := context.Background()
	var err error
	if cc, ok := c.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error { return f(c) })
	} else {
		err = f(c.(*redis.Client))
	}
	if err != nil {
		t.Fatal(err)
	}
}

// libraries returns the names of the store's function libraries on c.
func libraries(c *redis.Client) ([]string, error) {
	libs, err := c.FunctionList(context.Background(), redis.FunctionListQuery{LibraryNamePattern: "lb_*"}).Result()
	var names []string
	for _, l := range libs {
		names = append(names, l.Name)
		if len(l.Functions) != lb.LibraryFunctions() {
			return nil, fmt.Errorf("library %s has %d functions, want %d", l.Name, len(l.Functions),
				lb.LibraryFunctions())
		}
	}
	return names, err
}

// commandCalls returns how many times c ran each of the script commands since its statistics were reset.
func commandCalls(t *testing.T, c *redis.Client) map[string]int {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, line := range strings.Split(info, "\r\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":calls=")
		if !ok || !strings.HasPrefix(line, "cmdstat_") {
			continue
		}
		n, _ := strconv.Atoi(strings.SplitN(rest, ",", 2)[0])
		out[name] = n
	}
	return out
}

// The scripts run as functions of one library (FCALL, never EVAL or EVALSHA), loaded when a call finds it missing
// (not before: another process may have loaded it); reads
// are no-writes functions, so they still answer while Redis is over maxmemory and writes are refused as
// Unavailable, known not to have been applied.
func TestScriptsRunAsFunctions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := redistest.Standalone(t).Client(t).(*redis.Client)
	s := lb.New(c, lb.Config{})
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	mustBoard(t, s, lb.Board{ID: "fn"})
	v := lb.View{Board: "fn"}
	for i, p := range []string{"a", "b", "c"} {
		mustSubmit(t, s, lb.Submission{Board: "fn", Player: p, Score: float64(10 * (i + 1))})
	}
	if got := topIDs(t, s, v, 10); strings.Join(got, ",") != "c,b,a" {
		t.Fatalf("top %v", got)
	}
	if e, err := s.Rank(ctx, v, "b"); err != nil || e.Rank != 2 || e.Score != 20 {
		t.Fatalf("rank of b: %+v %v", e, err)
	}
	if es, err := s.Around(ctx, v, "a", 1); err != nil || len(es) != 3 || es[1].PlayerID != "b" || es[2].Rank != 3 {
		t.Fatalf("around a: %+v %v", es, err)
	}
	calls := commandCalls(t, c)
	// create (twice: the first call finds the library missing, which is then loaded once), 3 submits, top, rank,
	// around.
	if calls["fcall"] != 8 || calls["function|load"] != 1 || calls["eval"]+calls["evalsha"] != 0 {
		t.Fatalf("script commands %v, want 8 FCALL, one FUNCTION LOAD and no EVAL/EVALSHA", calls)
	}
	if libs, err := libraries(c); err != nil || len(libs) != 1 {
		t.Fatalf("libraries %v %v", libs, err)
	}
	// Another process of the same version uses the loaded library without loading it again.
	other := lb.New(c, lb.Config{})
	if _, err := other.Rank(ctx, v, "c"); err != nil {
		t.Fatal(err)
	}
	if calls := commandCalls(t, c); calls["function|load"] != 1 || calls["fcall"] != 9 {
		t.Fatalf("a second store: %v, want no new FUNCTION LOAD and one FCALL", calls)
	}

	if err := c.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	if got := topIDs(t, s, v, 10); strings.Join(got, ",") != "c,b,a" {
		t.Fatalf("top over maxmemory %v", got)
	}
	_, err := s.Submit(ctx, lb.Submission{Board: "fn", Player: "d", Score: 99})
	if lb.ErrorCode(err) != lb.Unavailable || lb.OutcomeUnknown(err) {
		t.Fatalf("submit over maxmemory: %v (code %s, outcome unknown %t)", err, lb.ErrorCode(err), lb.OutcomeUnknown(err))
	}
	if err := c.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if got := topIDs(t, s, v, 10); strings.Join(got, ",") != "c,b,a" {
		t.Fatalf("top after the refused submit %v", got)
	}
}

// A Redis that lost the library (FUNCTION FLUSH, a restart without persistence, a new cluster primary) gets it
// again on every primary at the next call, which then runs once, alone or in a pipeline of the batcher. Private
// servers: a FUNCTION FLUSH on the shared ones would pull the functions from under the other tests.
func TestFunctionsLoadAgain(t *testing.T) {
	t.Parallel()
	targets := []redistest.Target{{Name: "standalone", Client: redistest.Standalone(t).Client(t)}}
	if len(redistest.Targets(t)) > 1 {
		targets = append(targets, redistest.Target{Name: "cluster", Client: redistest.Cluster(t).Client(t), Cluster: true})
	}
	for _, tg := range targets {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			for _, lanes := range []int{0, 2} {
				s := lb.New(tg.Client, lb.Config{Prefix: redistest.Prefix(t) + strconv.Itoa(lanes), BatchLanes: lanes})
				boards := make([]string, 12) // spread over the cluster's primaries
				for i := range boards {
					boards[i] = fmt.Sprintf("b%d", i)
					mustBoard(t, s, lb.Board{ID: boards[i], Mode: lb.Sum})
				}
				eachMaster(t, tg.Client, func(c *redis.Client) error {
					libs, err := libraries(c)
					if err == nil && len(libs) != 1 {
						err = fmt.Errorf("%s has libraries %v, want one", c.Options().Addr, libs)
					}
					return err
				})
				for round := range 3 {
					if round > 0 {
						eachMaster(t, tg.Client, func(c *redis.Client) error { return c.FunctionFlush(ctx).Err() })
					}
					var wg sync.WaitGroup
					for g := range 24 {
						wg.Add(1)
						go func() {
							defer wg.Done()
							b := boards[g%len(boards)]
							r, err := s.Submit(ctx, lb.Submission{Board: b, Player: fmt.Sprintf("p%d", g), Score: 1})
							if err != nil || r.Entry.Score != float64(round+1) {
								t.Errorf("round %d, %s on %s: %+v %v", round, fmt.Sprintf("p%d", g), b, r, err)
							}
						}()
					}
					wg.Wait()
				}
				// Each call ran exactly once: 3 rounds of +1.
				for _, b := range boards {
					p, err := s.Top(ctx, lb.View{Board: b}, 0, 10)
					if err != nil || p.Size != 2 || p.Entries[0].Score != 3 || p.Entries[1].Score != 3 {
						t.Fatalf("%s: %+v %v", b, p, err)
					}
				}
			}
		})
	}
}

// Servers without functions (the embedded store) run the same scripts with EVALSHA.
func TestScriptsWithoutFunctions(t *testing.T) {
	t.Parallel()
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { c.Close() })
	if err := c.FunctionList(context.Background(), redis.FunctionListQuery{}).Err(); err == nil {
		t.Fatal("miniredis has FUNCTION now: this test no longer covers the EVALSHA path")
	}
	for _, lanes := range []int{0, 2} {
		s := lb.New(c, lb.Config{PublishCommand: lb.PublishPlain, BatchLanes: lanes, Prefix: "lanes" + strconv.Itoa(lanes)})
		mustBoard(t, s, lb.Board{ID: "emb"})
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := s.Submit(context.Background(), lb.Submission{Board: "emb", Player: fmt.Sprintf("p%d", g), Score: float64(g)}); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if got := topIDs(t, s, lb.View{Board: "emb"}, 3); strings.Join(got, ",") != "p7,p6,p5" {
			t.Fatalf("top %v", got)
		}
	}
}

// The embedded store's Lua (gopher-lua, in miniredis) reads no exponent after digits without a decimal point:
// tonumber("1e+06") is nil there, and "1e+06" is how Go writes a score of 1,000,000 and %.15g a stored 1e15. Every
// such score must rank and read back as on a real Redis: the same submissions on both (a board of each mode, one
// with an estimated tail, whose records keep internal scores as text), every entry of every list compared.
func TestScriptsWithoutFunctionsReadExponents(t *testing.T) {
	t.Parallel()
	m := miniredis.RunT(t)
	emb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { emb.Close() })
	real := redistest.Targets(t)[0]
	at := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	clock := func() time.Time { return at }
	stores := map[string]*lb.Store{
		"embedded": lb.New(emb, lb.Config{PublishCommand: lb.PublishPlain, Prefix: "exp", Clock: clock}),
		real.Name:  lb.New(real.Client, lb.Config{Prefix: redistest.Prefix(t), Clock: clock}),
	}
	boards := []lb.Board{{ID: "best"}, {ID: "asc", Order: lb.Asc}, {ID: "sum", Mode: lb.Sum},
		{ID: "latest", Mode: lb.Latest}, {ID: "tail", ExactTop: 2}}
	scores := []float64{1e6, 2e7, 1e-05, -4e+07, 4e15, 1e15, 1e15, 3, 1e6, 7e-07} // |score| <= 2^53
	ctx := context.Background()
	pages, outcomes := map[string][]*lb.Page{}, map[string][]string{}
	for name, s := range stores {
		for _, b := range boards {
			mustBoard(t, s, b)
			for i, x := range scores {
				for _, p := range []string{fmt.Sprint("p", i), fmt.Sprint("p", i%3)} { // p0..p2 twice
					// Refusals (a delta too small to change a sum) must be the same on both.
					r, err := s.Submit(ctx, lb.Submission{Board: b.ID, Player: p, Score: x})
					out := fmt.Sprint(err)
					if err == nil {
						out = fmt.Sprintf("%+v %v %v %d", r.Entry, r.Updated, r.Duplicate, r.Size)
					} else if lb.ErrorCode(err) == lb.Internal {
						t.Fatalf("%s, board %s: Submit(%s, %g): %v", name, b.ID, p, x, err)
					}
					outcomes[name] = append(outcomes[name], out)
				}
			}
			page, err := s.Top(ctx, lb.View{Board: b.ID}, 0, 100)
			if err != nil {
				t.Fatalf("%s, board %s: Top: %v", name, b.ID, err)
			}
			want := len(scores) // every player is listed, but for the tail's (estimated ranks)
			if b.ExactTop > 0 {
				want = b.ExactTop
			}
			if len(page.Entries) != want {
				t.Fatalf("%s, board %s: %d entries, want %d", name, b.ID, len(page.Entries), want)
			}
			ranks, err := s.Ranks(ctx, lb.View{Board: b.ID}, []string{"p0", "p4", "p6", "p9"})
			if err != nil {
				t.Fatalf("%s, board %s: Ranks: %v", name, b.ID, err)
			}
			pages[name] = append(pages[name], page, ranks)
		}
	}
	if a, b := outcomes["embedded"], outcomes[real.Name]; !reflect.DeepEqual(a, b) {
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("submission %d: embedded %s, real Redis %s", i, a[i], b[i])
			}
		}
	}
	emPages, realPages := pages["embedded"], pages[real.Name]
	for i := range realPages {
		if !reflect.DeepEqual(emPages[i].Entries, realPages[i].Entries) || emPages[i].Size != realPages[i].Size {
			t.Errorf("board %s, read %d: embedded %+v, real Redis %+v", boards[i/2].ID, i%2, emPages[i], realPages[i])
		}
	}
}

// TestBusyRedisRefusesHonestly: while another client's script keeps Redis busy past its busy-reply-threshold,
// Redis refuses every other command with BUSY. A submission then fails as UNAVAILABLE with a known outcome (nothing
// ran: a retry without an eventId cannot apply it twice), not as an internal error, and nothing was written.
func TestBusyRedisRefusesHonestly(t *testing.T) {
	t.Parallel()
	srv := redistest.Standalone(t)
	c := srv.Client(t)
	ctx := context.Background()
	s := lb.New(c, lb.Config{})
	if _, err := s.CreateBoard(ctx, lb.Board{ID: "busy"}); err != nil {
		t.Fatal(err)
	}
	if err := c.ConfigSet(ctx, "busy-reply-threshold", "50").Err(); err != nil {
		t.Fatal(err)
	}
	// A script of its own connection (no read timeout, no retries) that keeps Redis busy for 6 s: the submission
	// below must reach Redis before it ends, however slow the machine.
	ctl := redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: -1, MaxRetries: -1})
	defer ctl.Close()
	done := make(chan error, 1)
	go func() {
		done <- ctl.Eval(ctx, `local t0 = redis.call('TIME')
			local t = t0
			while (t[1] - t0[1]) * 1000000 + (t[2] - t0[2]) < 6000000 do t = redis.call('TIME') end
			return 1`, nil).Err()
	}()
	// Wait until Redis answers BUSY (the script has run past the threshold), then submit at once.
	probe := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	defer probe.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := probe.Get(ctx, "anything").Err()
		if err != nil && strings.HasPrefix(err.Error(), "BUSY") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Redis never answered BUSY: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, err := s.Submit(ctx, lb.Submission{Board: "busy", Player: "p", Score: 5})
	if lb.ErrorCode(err) != lb.Unavailable || lb.OutcomeUnknown(err) {
		t.Fatalf("submit while Redis is busy: %v (code %s, outcome unknown %t)", err, lb.ErrorCode(err),
			lb.OutcomeUnknown(err))
	}
	if err := <-done; err != nil {
		t.Fatalf("the busy script: %v", err)
	}
	if e, err := s.Rank(ctx, lb.View{Board: "busy"}, "p"); err != nil || e != nil {
		t.Fatalf("after the refused submit: %+v %v", e, err)
	}
}
