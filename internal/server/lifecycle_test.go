package server

import (
	"context"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// createLeaderboard takes graceSeconds and retention, the board shows them (also as read back from Redis by
// another store), defaults are 300 s and 3 periods, 0 s means no grace, and out-of-range values are refused with
// nothing created.
func TestBoardGraceAndRetention(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t))
	for _, c := range []struct {
		id        string
		in        map[string]any
		grace     int
		retention int
	}{
		{"defaults", map[string]any{}, 300, 3},
		{"set", map[string]any{"graceSeconds": 3600, "retention": 5}, 3600, 5},
		{"no-grace", map[string]any{"graceSeconds": 0, "retention": 1}, 0, 1},
		{"max", map[string]any{"graceSeconds": 604800, "retention": 1000}, 604800, 1000},
	} {
		in := map[string]any{"id": c.id, "windows": []string{"DAILY"}}
		for k, v := range c.in {
			in[k] = v
		}
		s.create(t, in)
		var out struct {
			Leaderboard struct{ GraceSeconds, Retention int }
		}
		s.must(t, "", `query($id: ID!) { leaderboard(id: $id) { graceSeconds retention } }`, map[string]any{"id": c.id}, &out)
		if out.Leaderboard.GraceSeconds != c.grace || out.Leaderboard.Retention != c.retention {
			t.Errorf("%s: %+v, want grace %d retention %d", c.id, out.Leaderboard, c.grace, c.retention)
		}
		b, err := s.Store.Board(context.Background(), c.id) // an independent store: the stored definition
		if err != nil || b.Grace != time.Duration(c.grace)*time.Second || b.Retention != c.retention {
			t.Errorf("%s as stored: %+v %v", c.id, b, err)
		}
	}
	for _, bad := range []map[string]any{{"graceSeconds": -1}, {"graceSeconds": 604801}, {"retention": 0},
		{"retention": 1001}} {
		in := map[string]any{"id": "bad"}
		for k, v := range bad {
			in[k] = v
		}
		s.wantCode(t, testAdminKey, string(leaderboard.Invalid), createMutation, map[string]any{"in": in})
	}
	if r := s.do(t, "", `{ leaderboard(id: "bad") { id } }`, nil); string(r.Data) != `{"leaderboard":null}` {
		t.Errorf("a refused board exists: %s", r.Data)
	}
}
