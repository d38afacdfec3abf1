package server

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/livelist"
	"github.com/leaderboard/leaderboard/internal/wstest"
	"github.com/leaderboard/leaderboard/leaderboard"
)

const topUpdatesSub = `subscription($b: ID!, $n: Int) { topUpdates(board: $b, first: $n) {
	board window period version snapshot size removed entries { ` + entryFields + ` } } }`

const rankUpdatesSub = `subscription($b: ID!, $p: ID!) { rankUpdates(board: $b, playerId: $p) { playerId rank score } }`

// liveList is a client-side list rebuilt from one topUpdates subscription with livelist.Apply (the same rule the
// dashboard uses), with the latest size, and a check that versions have no gaps.
type liveList struct {
	first int
	mu    sync.Mutex
	list  []leaderboard.Entry
	size  int64
	// board, window and period of the updates (all updates of a subscription must agree)
	board, window, period string
	ver                   int
	snaps                 int
	err                   error
}

type wireUpdate struct {
	Board    string   `json:"board"`
	Window   string   `json:"window"`
	Period   string   `json:"period"`
	Version  int      `json:"version"`
	Snapshot bool     `json:"snapshot"`
	Size     int64    `json:"size"`
	Removed  []string `json:"removed"`
	Entries  []entry  `json:"entries"`
}

func (l *liveList) apply(payload json.RawMessage) {
	var r struct {
		Data struct {
			TopUpdates wireUpdate `json:"topUpdates"`
		} `json:"data"`
		Errors []any `json:"errors"`
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	fail := func(format string, args ...any) {
		if l.err == nil {
			l.err = fmt.Errorf(format, args...)
		}
	}
	if err := json.Unmarshal(payload, &r); err != nil || len(r.Errors) > 0 {
		fail("bad update %s (%v)", payload, err)
		return
	}
	u := r.Data.TopUpdates
	if u.Version != l.ver+1 {
		fail("version %d after %d: %s", u.Version, l.ver, payload)
	}
	if l.ver == 0 && !u.Snapshot {
		fail("the first update is not a snapshot")
	}
	if l.ver > 0 && (u.Board != l.board || u.Window != l.window || u.Period != l.period) {
		fail("update for %s/%s/%s after %s/%s/%s", u.Board, u.Window, u.Period, l.board, l.window, l.period)
	}
	l.board, l.window, l.period = u.Board, u.Window, u.Period
	l.ver = u.Version
	l.size = u.Size
	if u.Snapshot {
		l.snaps++
	}
	es := make([]leaderboard.Entry, len(u.Entries))
	for i, e := range u.Entries {
		// A row that is sent was read with the size it comes with.
		if want := topPercent(int64(e.Rank), u.Size); e.TopPercent != want {
			fail("version %d: %s has topPercent %v, want 100 * rank %d / size %d = %v", u.Version, e.PlayerID,
				e.TopPercent, e.Rank, u.Size, want)
		}
		es[i] = leaderboard.Entry{PlayerID: e.PlayerID, DisplayName: e.DisplayName, Rank: int64(e.Rank),
			TieRank: int64(e.TieRank), Approximate: e.Approximate, Score: e.Score, TopPercent: e.TopPercent, UpdatedAt: e.UpdatedAt,
			Metadata: e.Metadata}
	}
	l.list = livelist.Apply(l.list, u.Snapshot, es, u.Removed, l.first)
}

// topPercent is 100 * rank / size, as the store computes it (0 for an empty ranking).
func topPercent(rank, size int64) float64 {
	if size <= 0 {
		return 0
	}
	return 100 * float64(rank) / float64(size)
}

// rows renders the rebuilt list the way liveRows does, with the topPercent a client derives from each row's rank
// and the latest size (rows that did not move are not resent when only the size changed).
func (l *liveList) rows() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return liveRows(l.board, l.window, l.period, l.size, l.list, func(e leaderboard.Entry) float64 {
		return topPercent(e.Rank, l.size)
	})
}

// liveRows renders every field a subscriber sees: the view, the size and, per row, the id, display name, rank,
// tieRank, approximate, score, updatedAt, metadata (canonical JSON) and the topPercent pct gives.
func liveRows(board, window, period string, size int64, es []leaderboard.Entry,
	pct func(leaderboard.Entry) float64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%s/%s size=%d:", board, window, period, size)
	for _, e := range es {
		name := "<none>"
		if e.DisplayName != nil {
			name = strconv.Quote(*e.DisplayName)
		}
		fmt.Fprintf(&b, "\n  %s name=%s rank=%d tie=%d approx=%v score=%v at=%s meta=%s pct=%v", e.PlayerID, name,
			e.Rank, e.TieRank, e.Approximate, e.Score, e.UpdatedAt.UTC().Format(time.RFC3339Nano), canonicalJSON(e.Metadata), pct(e))
	}
	return b.String()
}

// canonicalJSON re-encodes a JSON value with sorted keys; absent and null are "null".
func canonicalJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "null"
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "invalid:" + string(raw)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// pump reads a connection and hands each data message to the list of its operation id.
func pump(t testing.TB, c *wstest.Conn, lists map[string]*liveList) {
	go func() {
		for {
			m, err := c.Next(context.Background())
			if err != nil {
				return
			}
			if l := lists[m.ID]; l != nil && m.IsData() {
				l.apply(m.Payload)
			} else if m.Type == "error" {
				t.Errorf("subscription %s failed: %s", m.ID, m.Payload)
			}
		}
	}()
}

// subscribeLive opens a websocket to s with one topUpdates subscription of board's top first, rebuilt in the
// returned list as its updates come.
func subscribeLive(t testing.TB, s *testServer, board string, first int) *liveList {
	t.Helper()
	conn := wstest.Dial(t, s.WSURL, wstest.TransportWS, nil)
	l := &liveList{first: first}
	pump(t, conn, map[string]*liveList{"live": l})
	if err := conn.Subscribe("live", topUpdatesSub, map[string]any{"b": board, "n": first}); err != nil {
		t.Fatal(err)
	}
	return l
}

// waitLive waits until the rebuilt list equals the top list that s.Store (the test's own Store over the server's
// Redis, not the server's hub or cache) reads: every field of every row, the size, and the topPercent a client
// derives, which must be the store's; the store's topPercent must itself be 100 * rank / size.
func waitLive(t testing.TB, s *testServer, l *liveList, board string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		want, readErr := "", error(nil)
		p, err := s.Store.Top(context.Background(), leaderboard.View{Board: board}, 0, l.first)
		if err != nil {
			readErr = err // Redis may be coming back (TestLiveRedisRestart)
		} else {
			for _, e := range p.Entries {
				if w := topPercent(e.Rank, p.Size); e.TopPercent != w {
					t.Fatalf("store entry %s: topPercent %v is not 100 * rank %d / size %d = %v", e.PlayerID,
						e.TopPercent, e.Rank, p.Size, w)
				}
			}
			want = liveRows(p.Board, string(p.Window), p.Period, p.Size, p.Entries,
				func(e leaderboard.Entry) float64 { return e.TopPercent })
		}
		got := l.rows()
		l.mu.Lock()
		lerr, ver := l.err, l.ver
		l.mu.Unlock()
		if lerr != nil {
			t.Fatal(lerr)
		}
		if readErr == nil && got == want && ver > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("board %s: rebuilt list (version %d) did not converge (store read error: %v)\n got  %s\n want %s",
				board, ver, readErr, got, want)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// waitMetric waits until a sample of /metrics has the value want.
func waitMetric(t testing.TB, s *testServer, sample string, want float64, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := s.metric(t, sample)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is %v after %v, want %v", sample, got, within, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
