package ledger_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/internal/pgtest"
	"github.com/leaderboard/leaderboard/internal/redistest"
	"github.com/leaderboard/leaderboard/leaderboard"
	"github.com/leaderboard/leaderboard/ledger"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// clock is a test clock: it starts at a fixed moment relative to nothing but itself and moves when told.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2031, 3, 14, 9, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(time.Millisecond) // every reading is a new moment, as a real clock's
	return c.now
}

// target is a Redis to test on: a private standalone server or a private 3-primary cluster.
type target struct {
	name string
	rdb  func(t *testing.T) redis.UniversalClient
}

func targets(t *testing.T) []target {
	ts := []target{{"standalone", func(t *testing.T) redis.UniversalClient { return redistest.Standalone(t).Client(t) }}}
	if !testing.Short() && !noCluster() {
		ts = append(ts, target{"cluster", func(t *testing.T) redis.UniversalClient { return redistest.Cluster(t).Client(t) }})
	}
	return ts
}

func noCluster() bool {
	v := getenv(redistest.NoClusterEnv)
	return v == "1" || v == "true"
}

func openLedger(t *testing.T, url string) *ledger.Ledger {
	t.Helper()
	l, err := ledger.Open(ctxT(t, 30*time.Second), ledger.Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

func newStore(rdb redis.UniversalClient, l leaderboard.Ledger, c *clock) *leaderboard.Store {
	return leaderboard.New(rdb, leaderboard.Config{Prefix: "lt", Clock: c.Now, Ledger: l,
		PublishCommand: leaderboard.PublishNone})
}

// standings reads everything a user sees of a board's window period: every entry of the top list with all its
// fields, page by page, and the size. It is the oracle the restored board is held to: what the live writes made.
func standings(ctx context.Context, t *testing.T, s *leaderboard.Store, v leaderboard.View) (entries []leaderboard.Entry, size int64, err error) {
	t.Helper()
	for off := 0; ; off += leaderboard.MaxFirst {
		p, err := s.Top(ctx, v, off, leaderboard.MaxFirst)
		if err != nil {
			return nil, 0, err
		}
		entries = append(entries, p.Entries...)
		size = p.Size
		if len(p.Entries) < leaderboard.MaxFirst {
			return entries, size, nil
		}
	}
}

// views are the window periods of a board at the clock's time (the current ones).
func views(ctx context.Context, t *testing.T, s *leaderboard.Store, board string) []leaderboard.View {
	t.Helper()
	b, err := s.Board(ctx, board)
	if err != nil {
		t.Fatal(err)
	}
	var vs []leaderboard.View
	for _, w := range b.Windows {
		r, err := s.Resolve(ctx, leaderboard.View{Board: board, Window: w})
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, leaderboard.View{Board: board, Window: w, Period: r.Period})
	}
	return vs
}

type snapshot map[leaderboard.View]struct {
	Entries []leaderboard.Entry
	Size    int64
}

func snap(ctx context.Context, t *testing.T, s *leaderboard.Store, vs []leaderboard.View) snapshot {
	t.Helper()
	out := snapshot{}
	for _, v := range vs {
		e, n, err := standings(ctx, t, s, v)
		if err != nil {
			t.Fatalf("%+v: %v", v, err)
		}
		out[v] = struct {
			Entries []leaderboard.Entry
			Size    int64
		}{e, n}
	}
	return out
}

func (a snapshot) diff(b snapshot) string {
	for v, x := range a {
		y := b[v]
		if x.Size != y.Size {
			return fmt.Sprintf("%+v: size %d, want %d", v, y.Size, x.Size)
		}
		if len(x.Entries) != len(y.Entries) {
			return fmt.Sprintf("%+v: %d entries, want %d", v, len(y.Entries), len(x.Entries))
		}
		for i := range x.Entries {
			if !reflect.DeepEqual(x.Entries[i], y.Entries[i]) {
				return fmt.Sprintf("%+v: row %d is %+v, want %+v", v, i, y.Entries[i], x.Entries[i])
			}
		}
	}
	return ""
}

// boardSpecs are boards of every mode with ties, windows, names and metadata.
func boardSpecs(id string) []leaderboard.Board {
	return []leaderboard.Board{
		{ID: id + "-best", Mode: leaderboard.Best, Windows: []leaderboard.Window{leaderboard.AllTime, leaderboard.Daily}},
		{ID: id + "-sum", Mode: leaderboard.Sum, Windows: []leaderboard.Window{leaderboard.AllTime, leaderboard.Weekly}},
		{ID: id + "-latest", Mode: leaderboard.Latest, Order: leaderboard.Asc, Windows: []leaderboard.Window{leaderboard.Monthly}},
		{ID: id + "-tail", Mode: leaderboard.Best, ExactTop: 20},
	}
}

// feed submits n scores to the board from several goroutines: small integer scores (many ties), some with
// eventIds (and their retries), names and metadata. It returns the acknowledged submissions.
func feed(ctx context.Context, t *testing.T, s *leaderboard.Store, board string, n, players int) {
	t.Helper()
	feedFrom(ctx, t, []*leaderboard.Store{s}, board, n, players)
}

// testSubmission is the i-th submission of a feed: a random player of players and a small integer score (many
// ties); every 3rd has an eventId, every 5th a name, every 7th metadata.
func testSubmission(board string, i int, r *rand.Rand, players int) leaderboard.Submission {
	sub := leaderboard.Submission{Board: board, Player: fmt.Sprintf("p%03d", r.IntN(players)), Score: float64(r.IntN(20))}
	if i%3 == 0 {
		sub.EventID = fmt.Sprintf("e%d", i)
	}
	if i%5 == 0 {
		name := fmt.Sprintf("Name %d", i)
		sub.DisplayName = &name
	}
	if i%7 == 0 {
		sub.Metadata = json.RawMessage(fmt.Sprintf(`{"level":%d}`, i))
	}
	return sub
}

// feedFrom is feed from several stores (processes) at once: goroutine g writes through stores[g % len(stores)].
func feedFrom(ctx context.Context, t *testing.T, stores []*leaderboard.Store, board string, n, players int) {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed []error
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 7))
			for i := g; i < n; i += 8 {
				sub := testSubmission(board, i, r, players)
				subs := []leaderboard.Submission{sub}
				if i%11 == 0 && sub.EventID != "" {
					subs = append(subs, sub) // a retry in the same call
				}
				outs, err := stores[g%len(stores)].SubmitMany(ctx, subs)
				if err == nil {
					for _, o := range outs {
						if o.Err != nil && !leaderboard.IsRefusal(o.Err) {
							err = o.Err
						}
					}
				}
				if err != nil {
					mu.Lock()
					failed = append(failed, err)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if len(failed) > 0 {
		t.Fatalf("%d submissions failed, the first: %v", len(failed), failed[0])
	}
}

// TestRestoreAfterFlush: every board Redis loses is restored from the ledger exactly as the live writes made it
// (every entry's every field, tie order, sizes, every window), and until then its reads answer UNAVAILABLE,
// never NOT_FOUND or an empty or partial list.
func TestRestoreAfterFlush(t *testing.T) {
	pg := pgtest.Shared(t)
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			ctx := ctxT(t, 3*time.Minute)
			rdb := tg.rdb(t)
			l := openLedger(t, pg.Database(t))
			c := newClock()
			s := newStore(rdb, l, c)
			var all []leaderboard.View
			for _, b := range boardSpecs("r") {
				if _, err := s.CreateBoard(ctx, b); err != nil {
					t.Fatal(err)
				}
				feed(ctx, t, s, b.ID, 400, 60)
				all = append(all, views(ctx, t, s, b.ID)...)
			}
			if _, err := s.RemovePlayer(ctx, "r-best", "p001"); err != nil {
				t.Fatal(err)
			}
			before := snap(ctx, t, s, all)

			flushAll(ctx, t, rdb)
			// A fresh store (another process, or this one after a restart) finds the boards gone.
			s2 := newStore(rdb, l, c)
			for _, v := range all {
				_, err := s2.Top(ctx, v, 0, 10)
				if code := leaderboard.ErrorCode(err); code != leaderboard.Unavailable {
					t.Fatalf("%+v right after the loss: %v (code %q), want UNAVAILABLE", v, err, code)
				}
			}
			waitRestored(ctx, t, s2, all)
			if d := before.diff(snap(ctx, t, s2, all)); d != "" {
				t.Fatalf("restored board differs from what the live writes made: %s", d)
			}
			// Writes go on after the restore, with eventIds the ledger still knows.
			outs, err := s2.SubmitMany(ctx, []leaderboard.Submission{{Board: "r-best", Player: "late", Score: 99, EventID: "e3"}})
			if err != nil || outs[0].Err == nil {
				t.Fatalf("eventId e3 (another submission's) after the restore: %+v %v, want CONFLICT", outs, err)
			}
		})
	}
}

// TestRestoreAppliesEachEventAtItsClock: a restore applies many events in one script call, each with the clock
// it was recorded with, not the call's: a submission limit counts in each event's own minute, and a score without
// achievedAt lands in the day its event was recorded in. Checked against what the live writes made (every field of
// every entry); it fails when the items of a call share its first event's clock (the minute-1 scores then count
// in minute 0, past the limit, and the second day's score lands on the first day).
func TestRestoreAppliesEachEventAtItsClock(t *testing.T) {
	rdb := redistest.Standalone(t).Client(t)
	l := openLedger(t, pgtest.Shared(t).Database(t))
	for _, shards := range []int{1, 3} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) { restoreAtClocks(t, rdb, l, shards) })
	}
}

func restoreAtClocks(t *testing.T, rdb redis.UniversalClient, l *ledger.Ledger, shards int) {
	ctx := ctxT(t, time.Minute)
	c := newClock()
	set := func(at time.Time) {
		c.mu.Lock()
		c.now = at
		c.mu.Unlock()
	}
	s := newStore(rdb, l, c)
	id := fmt.Sprintf("clocks-%d", shards)
	if _, err := s.CreateBoard(ctx, leaderboard.Board{ID: id, Mode: leaderboard.Sum, MaxSubmitsPerMinute: 2, Shards: shards,
		Windows: []leaderboard.Window{leaderboard.AllTime, leaderboard.Daily}}); err != nil {
		t.Fatal(err)
	}
	day := c.Now().Truncate(24 * time.Hour).Add(24*time.Hour - 2*time.Minute) // two minutes before a day ends
	submit := func(at time.Time, player string, score float64) error {
		set(at)
		outs, err := s.SubmitMany(ctx, []leaderboard.Submission{{Board: id, Player: player, Score: score}})
		if err != nil {
			t.Fatal(err)
		}
		return outs[0].Err
	}
	for _, sub := range []struct {
		at      time.Duration // from day
		player  string
		score   float64
		limited bool
	}{
		{1 * time.Second, "p", 1, false}, {2 * time.Second, "p", 2, false}, // minute 0: the limit reached
		{61 * time.Second, "p", 4, false}, {62 * time.Second, "p", 8, false}, // minute 1: a new count
		{63 * time.Second, "p", 16, true},                                      // minute 1: past the limit
		{119 * time.Second, "q", 1, false}, {121 * time.Second, "q", 2, false}, // the first day's end, the next day
	} {
		err := submit(day.Add(sub.at), sub.player, sub.score)
		if got := leaderboard.ErrorCode(err) == leaderboard.RateLimited; got != sub.limited || (err != nil && !got) {
			t.Fatalf("%s's %g at +%v: %v, want rate limited %t", sub.player, sub.score, sub.at, err, sub.limited)
		}
	}
	set(day.Add(3 * time.Minute)) // the next day
	vs := []leaderboard.View{{Board: id, Window: leaderboard.AllTime, Period: leaderboard.AllPeriod}}
	for _, d := range []time.Time{day, day.Add(3 * time.Minute)} {
		vs = append(vs, leaderboard.View{Board: id, Window: leaderboard.Daily, Period: d.Format("2006-01-02")})
	}
	before := snap(ctx, t, s, vs)
	if e := before[vs[0]].Entries; len(e) != 2 || e[0].Score != 15 || e[1].Score != 3 {
		t.Fatalf("all time before the rebuild: %+v, want p 15 and q 3", e)
	}
	if e := before[vs[2]].Entries; len(e) != 1 || e[0].PlayerID != "q" || e[0].Score != 2 {
		t.Fatalf("the second day before the rebuild: %+v, want q 2", e)
	}
	if err := s.Rebuild(ctx, id); err != nil {
		t.Fatal(err)
	}
	if d := before.diff(snap(ctx, t, s, vs)); d != "" {
		t.Fatalf("rebuilt board differs from what the live writes made: %s", d)
	}
}

// waitRestored reads every view until it answers; each answer until then must be UNAVAILABLE.
func waitRestored(ctx context.Context, t *testing.T, s *leaderboard.Store, vs []leaderboard.View) {
	t.Helper()
	for _, v := range vs {
		for {
			_, err := s.Top(ctx, v, 0, 10)
			if err == nil {
				break
			}
			if code := leaderboard.ErrorCode(err); code != leaderboard.Unavailable {
				t.Fatalf("%+v during the restore: %v (code %q), want UNAVAILABLE", v, err, code)
			}
			if ctx.Err() != nil {
				t.Fatalf("%+v not restored in time: %v", v, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func flushAll(ctx context.Context, t *testing.T, rdb redis.UniversalClient) {
	t.Helper()
	var err error
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return c.FlushAll(ctx).Err() })
	} else {
		err = rdb.FlushAll(ctx).Err()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestRefusedStaysRefused: a submission the index refused (here past the board's submission limit) never counts
// later. The ledger marks it (scoreEvents shows it voided, the refusal its reason), so a void's rebuild, which
// replays the board without the voided event before it (the limit then not reached), refuses it again, and voiding
// it answers 0. Checked against a model of what the clients were told, on 1 and 3 shards; without the mark the
// rebuilt board counted the refused 100.
func TestRefusedStaysRefused(t *testing.T) {
	rdb := redistest.Standalone(t).Client(t)
	l := openLedger(t, pgtest.Shared(t).Database(t))
	for _, shards := range []int{1, 3} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) {
			ctx := ctxT(t, time.Minute)
			s := newStore(rdb, l, newClock())
			id := fmt.Sprintf("refused-%d", shards)
			if _, err := s.CreateBoard(ctx, leaderboard.Board{ID: id, Mode: leaderboard.Sum, MaxSubmitsPerMinute: 1,
				Shards: shards}); err != nil {
				t.Fatal(err)
			}
			for _, sub := range []struct {
				player, event string
				score         float64
				code          leaderboard.Code
			}{{"p", "a", 1, ""}, {"p", "b", 100, leaderboard.RateLimited}, {"q", "c", 5, ""}} {
				outs, err := s.SubmitMany(ctx, []leaderboard.Submission{{Board: id, Player: sub.player,
					Score: sub.score, EventID: sub.event}})
				if err != nil {
					t.Fatal(err)
				}
				if got := leaderboard.ErrorCode(outs[0].Err); got != sub.code {
					t.Fatalf("event %s: %v, want code %q", sub.event, outs[0].Err, sub.code)
				}
			}
			evs, _, err := s.ScoreEvents(ctx, id, "p", 10, "")
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) != 2 || evs[0].Voided || !evs[1].Voided ||
				!strings.HasPrefix(evs[1].VoidReason, "refused (RATE_LIMITED): ") {
				t.Fatalf("p's events: %+v, want a counting and b voided as refused (RATE_LIMITED)", evs)
			}
			if n, err := s.VoidScoreEvents(ctx, id, []string{"a"}, "fraud"); err != nil || n != 1 {
				t.Fatalf("void of a: %d, %v; want 1", n, err)
			}
			if n, err := s.VoidScoreEvents(ctx, id, []string{"b"}, "fraud"); err != nil || n != 0 {
				t.Fatalf("void of the refused b: %d, %v; want 0", n, err)
			}
			p, err := s.Top(ctx, leaderboard.View{Board: id, Window: leaderboard.AllTime, Period: leaderboard.AllPeriod}, 0, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Entries) != 1 || p.Entries[0].PlayerID != "q" || p.Entries[0].Score != 5 || p.Size != 1 {
				t.Fatalf("after the void of a: %+v (size %d), want q 5 alone", p.Entries, p.Size)
			}
		})
	}
}

// TestLedgerDown: while the database is unreachable, writes answer UNAVAILABLE and change nothing in Redis,
// reads go on; once it is back, writes succeed again.
func TestLedgerDown(t *testing.T) {
	pg := pgtest.Start(t)
	ctx := ctxT(t, 2*time.Minute)
	rdb := redistest.Standalone(t).Client(t)
	l := openLedger(t, pg.Database(t))
	c := newClock()
	s := newStore(rdb, l, c)
	if _, err := s.CreateBoard(ctx, leaderboard.Board{ID: "down"}); err != nil {
		t.Fatal(err)
	}
	feed(ctx, t, s, "down", 50, 10)
	vs := views(ctx, t, s, "down")
	before := snap(ctx, t, s, vs)
	pg.Kill()
	for i := range 5 {
		wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		outs, err := s.SubmitMany(wctx, []leaderboard.Submission{{Board: "down", Player: fmt.Sprintf("x%d", i), Score: 1000}})
		cancel()
		if err == nil {
			err = outs[0].Err
		}
		if code := leaderboard.ErrorCode(err); code != leaderboard.Unavailable {
			t.Fatalf("submit with the database down: %v (code %q), want UNAVAILABLE", err, code)
		}
	}
	if d := before.diff(snap(ctx, t, s, vs)); d != "" {
		t.Fatalf("a write the ledger did not record changed Redis: %s", d)
	}
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		outs, err := s.SubmitMany(ctx, []leaderboard.Submission{{Board: "down", Player: "back", Score: 1}})
		if err == nil {
			err = outs[0].Err
		}
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("writes still fail 30 s after the database came back: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestVoidRecomputes: a voided submission stops counting in every window (a SUM total drops by exactly its
// delta, a BEST score falls back to the best that remains) and voiding it again changes nothing.
func TestVoidRecomputes(t *testing.T) {
	pg := pgtest.Shared(t)
	ctx := ctxT(t, 2*time.Minute)
	rdb := redistest.Standalone(t).Client(t)
	l := openLedger(t, pg.Database(t))
	c := newClock()
	s := newStore(rdb, l, c)
	for _, b := range []leaderboard.Board{{ID: "vsum", Mode: leaderboard.Sum}, {ID: "vbest"}} {
		if _, err := s.CreateBoard(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	submit := func(board, player string, score float64, id string) {
		t.Helper()
		outs, err := s.SubmitMany(ctx, []leaderboard.Submission{{Board: board, Player: player, Score: score, EventID: id}})
		if err != nil || outs[0].Err != nil {
			t.Fatal(err, outs[0].Err)
		}
	}
	submit("vsum", "a", 10, "s1")
	submit("vsum", "a", 5, "")
	submit("vsum", "a", 100, "cheat")
	submit("vsum", "b", 50, "s4")
	submit("vbest", "a", 10, "b1")
	submit("vbest", "a", 100, "cheat")
	submit("vbest", "b", 50, "b3")
	n, err := s.VoidScoreEvents(ctx, "vsum", []string{"cheat"}, "speed hack")
	if err != nil || n != 1 {
		t.Fatalf("void: %d %v, want 1", n, err)
	}
	n, err = s.VoidScoreEvents(ctx, "vbest", []string{"cheat"}, "speed hack")
	if err != nil || n != 1 {
		t.Fatalf("void: %d %v, want 1", n, err)
	}
	want := map[string][]string{"vsum": {"b 50", "a 15"}, "vbest": {"b 50", "a 10"}}
	for board, rows := range want {
		p, err := s.Top(ctx, leaderboard.View{Board: board}, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range p.Entries {
			got = append(got, fmt.Sprintf("%s %g", e.PlayerID, e.Score))
		}
		if !slices.Equal(got, rows) {
			t.Fatalf("%s after the void: %v, want %v", board, got, rows)
		}
	}
	n, err = s.VoidScoreEvents(ctx, "vsum", []string{"cheat"}, "again")
	if err != nil || n != 0 {
		t.Fatalf("voiding again: %d %v, want 0", n, err)
	}
	evs, _, err := s.ScoreEvents(ctx, "vsum", "a", 10, "")
	if err != nil || len(evs) != 3 {
		t.Fatalf("scoreEvents: %+v %v", evs, err)
	}
	if !evs[2].Voided || evs[2].VoidReason != "speed hack" || evs[0].Voided || evs[1].EventName() == "" ||
		evs[1].EventID != "" {
		t.Fatalf("scoreEvents after the void: %+v", evs)
	}
}

func getenv(k string) string { return os.Getenv(k) }

// TestLaggingReplica: Redis fails over to a replica that had not copied the last writes. The board is still
// there, behind the ledger: the check finds it behind and applies what it lacks, and it ends up as the primary
// had it (the oracle: the primary's own reads).
func TestLaggingReplica(t *testing.T) {
	pg := pgtest.Shared(t)
	ctx := ctxT(t, 2*time.Minute)
	primary := redistest.Standalone(t)
	replica := redistest.Standalone(t)
	prdb, rrdb := primary.Client(t), replica.Client(t)
	host, port, _ := strings.Cut(primary.Addr, ":")
	if err := rrdb.SlaveOf(ctx, host, port).Err(); err != nil {
		t.Fatal(err)
	}
	l := openLedger(t, pg.Database(t))
	c := newClock()
	s := newStore(prdb, l, c)
	for _, b := range boardSpecs("lag") {
		if _, err := s.CreateBoard(ctx, b); err != nil {
			t.Fatal(err)
		}
		feed(ctx, t, s, b.ID, 200, 40)
	}
	// The replica has copied everything so far; then it stops copying (it is promoted early, as a failover
	// to a lagging replica leaves it).
	if n, err := prdb.Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT: %d %v", n, err)
	}
	if err := rrdb.SlaveOf(ctx, "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	var all []leaderboard.View
	for _, b := range boardSpecs("lag") {
		feed(ctx, t, s, b.ID, 200, 60) // only the old primary has these
		all = append(all, views(ctx, t, s, b.ID)...)
	}
	want := snap(ctx, t, s, all)

	var mu sync.Mutex
	var reports []leaderboard.RestoreReport
	s2 := leaderboard.New(rrdb, leaderboard.Config{Prefix: "lt", Clock: c.Now, Ledger: l,
		PublishCommand: leaderboard.PublishNone, OnRestore: func(r leaderboard.RestoreReport) {
			mu.Lock()
			reports = append(reports, r)
			mu.Unlock()
		}})
	if d := want.diff(snap(ctx, t, s2, all)); d == "" {
		t.Fatal("the replica has every write: the test lost its lag")
	}
	if n, err := s2.CheckLedger(ctx); err != nil || n != len(boardSpecs("lag")) {
		t.Fatalf("CheckLedger: %d boards behind, %v; want %d", n, err, len(boardSpecs("lag")))
	}
	untilWhole(ctx, t, s2)
	if d := want.diff(snap(ctx, t, s2, all)); d != "" {
		t.Fatalf("caught-up replica differs from the primary: %s", d)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, r := range reports {
		if !r.CatchUp || r.Err != nil {
			t.Fatalf("a lagging board is caught up where it stands, not restored: %+v", r)
		}
	}
}

// TestRestoredOnce: several processes that find the same board lost restore it once between them.
func TestRestoredOnce(t *testing.T) {
	pg := pgtest.Shared(t)
	ctx := ctxT(t, 2*time.Minute)
	rdb := redistest.Standalone(t).Client(t)
	l := openLedger(t, pg.Database(t))
	c := newClock()
	s := newStore(rdb, l, c)
	if _, err := s.CreateBoard(ctx, leaderboard.Board{ID: "once"}); err != nil {
		t.Fatal(err)
	}
	feed(ctx, t, s, "once", 3000, 1000)
	vs := views(ctx, t, s, "once")
	want := snap(ctx, t, s, vs)
	flushAll(ctx, t, rdb)
	var mu sync.Mutex
	restored := 0
	stores := make([]*leaderboard.Store, 4)
	for i := range stores {
		stores[i] = leaderboard.New(rdb, leaderboard.Config{Prefix: "lt", Clock: c.Now, Ledger: l,
			PublishCommand: leaderboard.PublishNone, OnRestore: func(r leaderboard.RestoreReport) {
				if r.Restored {
					mu.Lock()
					restored++
					mu.Unlock()
				}
			}})
	}
	var wg sync.WaitGroup
	for _, st := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			waitRestored(ctx, t, st, vs)
		}()
	}
	wg.Wait()
	if d := want.diff(snap(ctx, t, stores[0], vs)); d != "" {
		t.Fatal(d)
	}
	mu.Lock()
	defer mu.Unlock()
	if restored != 1 {
		t.Fatalf("%d restores of one board by 4 processes, want 1", restored)
	}
}

// TestRedisLostUnderWrites: Redis (no persistence) dies while 8 writers submit about 500 deltas a second to a SUM
// board, each retrying a failed write with its eventId until it is acknowledged. After the restore every
// acknowledged delta counts exactly once (the model: per player, the sum of its acknowledged deltas), the tie
// order is the ledger's (equal totals rank by the seq of the event that last changed them, read from the
// ledger's own table), and every read meanwhile was exact or UNAVAILABLE.
func TestRedisLostUnderWrites(t *testing.T) {
	pg := pgtest.Shared(t)
	ctx := ctxT(t, 3*time.Minute)
	srv := redistest.Standalone(t)
	rdb := srv.Client(t)
	l := openLedger(t, pg.Database(t))
	c := newClock()
	var restores atomic.Int64
	s := leaderboard.New(rdb, leaderboard.Config{Prefix: "lt", Clock: c.Now, Ledger: l,
		PublishCommand: leaderboard.PublishNone, OnRestore: func(r leaderboard.RestoreReport) {
			if r.Restored {
				restores.Add(1)
			}
		}})
	if _, err := s.CreateBoard(ctx, leaderboard.Board{ID: "kill", Mode: leaderboard.Sum}); err != nil {
		t.Fatal(err)
	}
	const writers, perWriter, players = 8, 250, 40
	var mu sync.Mutex
	model := map[string]float64{}
	var readErrs []error
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(16 * time.Millisecond) // 8 writers: ~500 writes/s
			defer tick.Stop()
			for i := range perWriter {
				<-tick.C
				p := fmt.Sprintf("p%02d", (g*perWriter+i)%players)
				sub := leaderboard.Submission{Board: "kill", Player: p, Score: float64(1 + (i % 3)),
					EventID: fmt.Sprintf("w%d-%d", g, i)}
				for attempt := 0; ; attempt++ {
					outs, err := s.SubmitMany(ctx, []leaderboard.Submission{sub})
					if err == nil {
						err = outs[0].Err
					}
					if err == nil {
						mu.Lock()
						model[p] += sub.Score
						mu.Unlock()
						break
					}
					if leaderboard.ErrorCode(err) != leaderboard.Unavailable || attempt > 400 {
						mu.Lock()
						readErrs = append(readErrs, fmt.Errorf("write %s: %w", sub.EventID, err))
						mu.Unlock()
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
		}()
	}
	// A reader: every answer is a whole board or UNAVAILABLE.
	var rwg sync.WaitGroup
	rwg.Add(1)
	go func() {
		defer rwg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			p, err := s.Top(ctx, leaderboard.View{Board: "kill"}, 0, 100)
			if err != nil && leaderboard.ErrorCode(err) != leaderboard.Unavailable {
				mu.Lock()
				readErrs = append(readErrs, fmt.Errorf("read: %w", err))
				mu.Unlock()
			}
			if err == nil && int64(len(p.Entries)) != min(p.Size, 100) {
				mu.Lock()
				readErrs = append(readErrs, fmt.Errorf("read: %d entries of %d", len(p.Entries), p.Size))
				mu.Unlock()
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	time.Sleep(1500 * time.Millisecond)
	srv.Stop() // no persistence: everything Redis held is gone, as after kill -9
	time.Sleep(200 * time.Millisecond)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(stop)
	rwg.Wait()
	if len(readErrs) > 0 {
		t.Fatalf("%d errors, the first: %v", len(readErrs), readErrs[0])
	}
	if restores.Load() != 1 {
		t.Fatalf("%d restores of the lost board, want 1", restores.Load())
	}
	// The model: every acknowledged delta once.
	v := leaderboard.View{Board: "kill"}
	waitRestored(ctx, t, s, []leaderboard.View{v})
	entries, size, err := standings(ctx, t, s, v)
	if err != nil {
		t.Fatal(err)
	}
	if size != int64(len(model)) {
		t.Fatalf("%d players, the model has %d", size, len(model))
	}
	for _, e := range entries {
		if e.Score != model[e.PlayerID] {
			t.Fatalf("%s has %g, the acknowledged deltas sum to %g", e.PlayerID, e.Score, model[e.PlayerID])
		}
	}
	// Tie order: equal totals rank by the seq of the event that last changed them.
	last := map[string]int64{}
	rows, err := l.Pool().Query(ctx, `SELECT convert_from(player, 'UTF8'), max(seq) FROM events e
		JOIN boards b USING (board_key) WHERE b.id = $1 AND e.kind = 1 GROUP BY player`, []byte("kill"))
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var p string
		var seq int64
		if err := rows.Scan(&p, &seq); err != nil {
			t.Fatal(err)
		}
		last[p] = seq
	}
	rows.Close()
	for i := 1; i < len(entries); i++ {
		a, b := entries[i-1], entries[i]
		if a.Score == b.Score && last[a.PlayerID] > last[b.PlayerID] {
			t.Fatalf("tie order: %s (last change seq %d) ranks before %s (seq %d) at %g", a.PlayerID,
				last[a.PlayerID], b.PlayerID, last[b.PlayerID], a.Score)
		}
	}
}

// TestRestoreKeepsTheFence: a close is an event of the ledger, so a board restored after a loss has its closed
// periods closed again at the same place in its history: a late score the fence refused stays refused, and a
// new one is refused too.
func TestRestoreKeepsTheFence(t *testing.T) {
	pg := pgtest.Shared(t)
	ctx := ctxT(t, 2*time.Minute)
	rdb := redistest.Standalone(t).Client(t)
	l := openLedger(t, pg.Database(t))
	c := newClock()
	s := newStore(rdb, l, c)
	if _, err := s.CreateBoard(ctx, leaderboard.Board{ID: "fenced", Windows: []leaderboard.Window{leaderboard.Daily}}); err != nil {
		t.Fatal(err)
	}
	feed(ctx, t, s, "fenced", 100, 20)
	vs := views(ctx, t, s, "fenced")
	day := vs[0].Period
	if _, _, err := s.RecordClose(ctx, "fenced", leaderboard.Daily, day, c.Now()); err != nil {
		t.Fatal(err)
	}
	want := snap(ctx, t, s, vs)
	late := func(st *leaderboard.Store, player string) error {
		outs, err := st.SubmitMany(ctx, []leaderboard.Submission{{Board: "fenced", Player: player, Score: 1e6}})
		if err != nil {
			return err
		}
		return outs[0].Err
	}
	if err := late(s, "late1"); leaderboard.ErrorCode(err) != leaderboard.PeriodClosed {
		t.Fatalf("a score after the close: %v, want PERIOD_CLOSED", err)
	}
	flushAll(ctx, t, rdb)
	s2 := newStore(rdb, l, c)
	waitRestored(ctx, t, s2, vs)
	if d := want.diff(snap(ctx, t, s2, vs)); d != "" {
		t.Fatalf("the restored closed period differs from what its close froze: %s", d)
	}
	if err := late(s2, "late2"); leaderboard.ErrorCode(err) != leaderboard.PeriodClosed {
		t.Fatalf("a score after the restore of a closed period: %v, want PERIOD_CLOSED", err)
	}
}

// TestRestoreRests: a restore works Config.RestoreShare of its time in script calls and rests the rest (README
// LEDGER_RESTORE_SHARE), and applies at most Config.RestoreRate events a second (LEDGER_RESTORE_RATE), so other
// boards' writes keep their turns; with a share of 1 and no rate it never rests. The board it restores is the one
// it lost either way.
func TestRestoreRests(t *testing.T) {
	pg := pgtest.Shared(t)
	rdb := redistest.Standalone(t).Client(t)
	l := openLedger(t, pg.Database(t))
	c := newClock()
	const events = 3000
	for _, tc := range []struct{ share, rate float64 }{{0.25, -1}, {1, -1}, {1, 5000}} {
		t.Run(fmt.Sprintf("share=%v,rate=%v", tc.share, tc.rate), func(t *testing.T) {
			ctx := ctxT(t, 2*time.Minute)
			reports := make(chan leaderboard.RestoreReport, 1)
			s := leaderboard.New(rdb, leaderboard.Config{Prefix: "lr", Clock: c.Now, Ledger: l, RestoreShare: tc.share,
				RestoreRate: tc.rate, PublishCommand: leaderboard.PublishNone,
				OnRestore: func(r leaderboard.RestoreReport) { reports <- r }})
			id := fmt.Sprintf("rests-%v-%v", tc.share, tc.rate)
			if _, err := s.CreateBoard(ctx, leaderboard.Board{ID: id}); err != nil {
				t.Fatal(err)
			}
			// Requests of 1000 items: each is recorded at one moment, so the restore applies it in calls of 128
			// events, long enough that a timer's lateness cannot pass for a rest.
			for i := 0; i < events; i += 1000 {
				subs := make([]leaderboard.Submission, 1000)
				for k := range subs {
					subs[k] = leaderboard.Submission{Board: id, Player: fmt.Sprintf("p%04d", (i+k)%2500),
						Score: float64((i + k) % 97)}
				}
				submitAll(ctx, t, s, subs)
			}
			vs := views(ctx, t, s, id)
			before := snap(ctx, t, s, vs)
			if err := s.Rebuild(ctx, id); err != nil {
				t.Fatal(err)
			}
			r := <-reports
			if !r.Restored || r.Events < events || r.Applying <= 0 {
				t.Fatalf("report %+v: want a restore of the board's %d+ events", r, events)
			}
			// Each rest is a timer of at least (1-share)/share of the call before it, and lasts until the events
			// applied so far are due at the rate: every call and its rest together take at least its events' time.
			want := time.Duration(float64(r.Applying) * (1 - tc.share) / tc.share)
			if tc.rate > 0 {
				want = time.Duration(events*float64(time.Second)/tc.rate) - r.Applying
			}
			if r.Resting < want-time.Millisecond || (want <= 0 && r.Resting != 0) {
				t.Fatalf("share %v, rate %v: applied %v, rested %v; want a rest of at least %v", tc.share, tc.rate,
					r.Applying, r.Resting, want)
			}
			if d := before.diff(snap(ctx, t, s, vs)); d != "" {
				t.Fatalf("rebuilt board differs: %s", d)
			}
		})
	}
}

// submitAll submits subs in one SubmitMany and fails tb unless every item is applied.
func submitAll(ctx context.Context, tb testing.TB, s *leaderboard.Store, subs []leaderboard.Submission) {
	tb.Helper()
	outs, err := s.SubmitMany(ctx, subs)
	if err != nil {
		tb.Fatal(err)
	}
	for _, o := range outs {
		if o.Err != nil {
			tb.Fatal(o.Err)
		}
	}
}

// TestAppendNumbersInOrder: batches with and without eventIds, of several boards in one call, get the seqs that
// reading the board's events back shows (1, 2, 3, … without gaps, each event where it was sent), a repeated
// eventId the seq of its first, and the board's head the last seq.
func TestAppendNumbersInOrder(t *testing.T) {
	ctx := ctxT(t, time.Minute)
	l := openLedger(t, pgtest.Shared(t).Database(t))
	s := newStore(redistest.Standalone(t).Client(t), l, newClock())
	for _, id := range []string{"num-a", "num-b"} {
		if _, err := s.CreateBoard(ctx, leaderboard.Board{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	sub := func(player, eventID string) leaderboard.LedgerEvent {
		return leaderboard.LedgerEvent{Kind: leaderboard.EventSubmit, Player: player, Score: 1, EventID: eventID,
			Fingerprint: "fp-" + player}
	}
	now := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	calls := [][]leaderboard.AppendBatch{
		{{Board: "num-a", RecordedAt: now, Events: []leaderboard.LedgerEvent{sub("a1", ""), sub("a2", ""), sub("a3", "")}},
			{Board: "num-b", RecordedAt: now, Events: []leaderboard.LedgerEvent{sub("b1", "x"), sub("b2", ""), sub("b3", "x")}}},
		{{Board: "num-b", RecordedAt: now, Events: []leaderboard.LedgerEvent{sub("b4", ""), sub("b5", "")}},
			{Board: "num-a", RecordedAt: now, Events: []leaderboard.LedgerEvent{sub("a4", "y"), sub("a5", "")}}},
	}
	// What each event must get: the seq reading back shows, or for a repeated eventId its first event's.
	want := map[string]int64{"a1": 2, "a2": 3, "a3": 4, "a4": 5, "a5": 6, "b1": 2, "b2": 3, "b3": 2, "b4": 4, "b5": 5}
	for _, call := range calls {
		res, err := l.Append(ctx, call)
		if err != nil {
			t.Fatal(err)
		}
		for i, b := range call {
			for k, e := range b.Events {
				got := res[i][k]
				if got.Seq != want[e.Player] || got.Duplicate != (e.Player == "b3") {
					t.Fatalf("%s: %+v, want seq %d (duplicate: %v)", e.Player, got, want[e.Player], e.Player == "b3")
				}
			}
		}
	}
	for id, players := range map[string][]string{"num-a": {"a1", "a2", "a3", "a4", "a5"}, "num-b": {"b1", "b2", "b4", "b5"}} {
		lb, ok, err := l.Board(ctx, id)
		if err != nil || !ok {
			t.Fatalf("board %s: %v %v", id, ok, err)
		}
		evs, err := l.Events(ctx, lb.Key, 1, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != len(players) || lb.Head != int64(len(players)+1) {
			t.Fatalf("%s: %d events after the create, head %d; want %d, %d", id, len(evs), lb.Head, len(players),
				len(players)+1)
		}
		for k, e := range evs {
			if e.Seq != int64(k+2) || e.Player != players[k] || e.Fingerprint != "fp-"+players[k] || want[e.Player] != e.Seq {
				t.Fatalf("%s event %d: seq %d player %q fingerprint %q", id, k, e.Seq, e.Player, e.Fingerprint)
			}
		}
	}
}

// untilWhole runs the ledger check until it finds no board behind (the restores it starts run in the background),
// for a minute at most.
func untilWhole(ctx context.Context, t *testing.T, s *leaderboard.Store) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		n, err := s.CheckLedger(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d boards still behind after a minute", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestLedgerDownAndRedisLost: a board Redis lost while the database is unreachable is UNAVAILABLE, never NOT_FOUND
// (nobody can tell whether it exists: a live subscription would end on NOT_FOUND, a client would create it
// again); once the database is back, the board is restored with its scores. An id that never existed is still
// NOT_FOUND then.
func TestLedgerDownAndRedisLost(t *testing.T) {
	pg := pgtest.Start(t)
	ctx := ctxT(t, 2*time.Minute)
	rdb := redistest.Standalone(t).Client(t)
	l := openLedger(t, pg.Database(t))
	c := newClock()
	if _, err := newStore(rdb, l, c).CreateBoard(ctx, leaderboard.Board{ID: "lost"}); err != nil {
		t.Fatal(err)
	}
	feed(ctx, t, newStore(rdb, l, c), "lost", 50, 10)
	view := leaderboard.View{Board: "lost", Window: leaderboard.AllTime, Period: leaderboard.AllPeriod}
	before, err := newStore(rdb, l, c).Top(ctx, view, 0, 10)
	if err != nil || before.Size != 10 {
		t.Fatalf("top before the loss: %+v, %v; want 10 players", before, err)
	}
	pg.Kill()
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	s := newStore(rdb, l, c) // another process: nothing of the board cached
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = s.Top(rctx, view, 0, 10)
	cancel()
	if code := leaderboard.ErrorCode(err); code != leaderboard.Unavailable {
		t.Fatalf("top of a board Redis lost, the database down: %v (code %q), want UNAVAILABLE", err, code)
	}
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, err := s.Top(ctx, view, 0, 10)
		if err == nil && p.Size == before.Size && reflect.DeepEqual(p.Entries, before.Entries) {
			break
		}
		if code := leaderboard.ErrorCode(err); err != nil && code != leaderboard.Unavailable {
			t.Fatalf("top after the database came back: %v (code %q), want the board or UNAVAILABLE", err, code)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the board is not back 30 s after the database: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := s.Top(ctx, leaderboard.View{Board: "never"}, 0, 10); leaderboard.ErrorCode(err) != leaderboard.NotFound {
		t.Fatalf("top of a board that never existed: %v, want NOT_FOUND", err)
	}
}
