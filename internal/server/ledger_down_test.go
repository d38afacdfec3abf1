package server

import (
	"strings"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/pgtest"
)

// With the database down, every write through the server answers UNAVAILABLE and changes nothing in Redis
// (submitScore, submitScores, removePlayer, createLeaderboard, deleteLeaderboard, startSeason, endSeason,
// voidScoreEvents, rebuildLeaderboard), the admin reads of the ledger answer UNAVAILABLE too, and reads go on
// from Redis, unchanged.
func TestLedgerDownThroughTheServer(t *testing.T) {
	t.Parallel()
	pg := pgtest.Start(t)
	clock := &closeClock{t: ledgerStart}
	cfg := testConfig(t)
	cfg.DatabaseURL = pg.Database(t)
	cfg.Clock = clock.Now
	s := startServer(t, cfg)
	s.create(t, map[string]any{"id": "d", "windows": []string{"SEASON", "ALL_TIME"}})
	const startSeason = `mutation($b: ID!, $id: String!, $e: Time!) { startSeason(board: $b, id: $id, endsAt: $e) { changed } }`
	ends := clock.Now().Add(30 * 24 * time.Hour).Format(time.RFC3339)
	s.must(t, testAdminKey, startSeason, map[string]any{"b": "d", "id": "s1", "e": ends}, nil)
	s.submit(t, map[string]any{"board": "d", "playerId": "p", "score": 5, "eventId": "e1", "displayName": "P"})
	s.submit(t, map[string]any{"board": "d", "playerId": "q", "score": 7, "eventId": "e2"})
	read := `{ season: top(board: "d", window: SEASON) { ` + entryFields + ` } all: top(board: "d", window: ALL_TIME) { ` +
		entryFields + ` } leaderboard(id: "d") { size season { id running } } leaderboards { id } }`
	before := s.do(t, "", read, nil)
	if len(before.Errors) > 0 {
		t.Fatal(before.Errors)
	}
	pg.Kill()
	clock.Set(ledgerStart.Add(time.Minute))
	writes := []struct {
		key, query string
		vars       map[string]any
	}{
		{testSubmitKey, submitMutation, map[string]any{"in": map[string]any{"board": "d", "playerId": "x", "score": 9}}},
		{testSubmitKey, submitMutation, map[string]any{"in": map[string]any{"board": "d", "playerId": "p", "score": 1, "eventId": "e1"}}},
		{testSubmitKey, submitsMutation, map[string]any{"in": []map[string]any{{"board": "d", "playerId": "y", "score": 3}}}},
		{testAdminKey, `mutation { removePlayer(board: "d", playerId: "q") }`, nil},
		{testAdminKey, createMutation, map[string]any{"in": map[string]any{"id": "new"}}},
		{testAdminKey, deleteMutation, map[string]any{"id": "d"}},
		{testAdminKey, startSeason, map[string]any{"b": "d", "id": "s2", "e": ends}},
		{testAdminKey, `mutation { endSeason(board: "d") { changed } }`, nil},
		{testAdminKey, voidMutation, map[string]any{"b": "d", "ids": []string{"e1"}, "r": "x"}},
		{testAdminKey, rebuildMutation, map[string]any{"id": "d"}},
		{testAdminKey, scoreEventsQuery, map[string]any{"b": "d", "p": "p"}},
	}
	for _, w := range writes {
		r := s.do(t, w.key, w.query, w.vars)
		codes := r.Codes()
		if len(codes) == 0 && strings.Contains(w.query, "submitScores") {
			// submitScores answers per item: the item's error is in the errors list too.
			t.Errorf("%s with the database down: %s", w.query, r.Data)
			continue
		}
		if len(codes) != 1 || codes[0] != "UNAVAILABLE" {
			t.Errorf("%.60s with the database down: %s %+v", w.query, r.Data, r.Errors)
		}
		if after := s.do(t, "", read, nil); string(after.Data) != string(before.Data) || len(after.Errors) > 0 {
			t.Fatalf("after %.60s with the database down:\n%s %+v\nbefore:\n%s", w.query, after.Data, after.Errors,
				before.Data)
		}
	}
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		r := s.do(t, testSubmitKey, submitMutation, map[string]any{"in": map[string]any{"board": "d", "playerId": "x", "score": 9}})
		if len(r.Errors) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("writes still fail 30 s after the database came back: %+v", r.Errors)
		}
	}
}
