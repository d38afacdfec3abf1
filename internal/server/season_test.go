package server

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/wstest"
)

const seasonFields = `id startedAt endsAt running readableUntil`

type seasonJSON struct {
	ID            string    `json:"id"`
	StartedAt     time.Time `json:"startedAt"`
	EndsAt        time.Time `json:"endsAt"`
	Running       bool      `json:"running"`
	ReadableUntil time.Time `json:"readableUntil"`
}

type seasonChangeJSON struct {
	Season  seasonJSON  `json:"season"`
	Changed bool        `json:"changed"`
	Closed  *seasonJSON `json:"closed"`
}

// README ("Seasons"): startSeason / endSeason over GraphQL (admin only, errors with codes that change nothing),
// currentPeriod / nextReset / season of the SEASON window, and a topUpdates subscription that follows the SEASON
// window on another server process sees a snapshot of the new season when it starts, and of the final standings
// when it ends.
func TestSeasonsOverGraphQL(t *testing.T) {
	cfg := testConfig(t)
	a, b := startServer(t, cfg), startServer(t, cfg)
	a.create(t, map[string]any{"id": "league", "windows": []string{"SEASON", "ALL_TIME"}, "graceSeconds": 60,
		"retention": 2})
	const start = `mutation($b: ID!, $id: String!, $e: Time!) { startSeason(board: $b, id: $id, endsAt: $e) {
		season { ` + seasonFields + ` } changed closed { ` + seasonFields + ` } } }`
	const end = `mutation($b: ID!) { endSeason(board: $b) { season { ` + seasonFields + ` } changed closed { id } } }`
	const info = `query($b: ID!) { leaderboard(id: $b) { currentPeriod(window: SEASON) nextReset(window: SEASON)
		season { ` + seasonFields + ` } } }`

	// Before the first season.
	a.wantCode(t, testAdminKey, "NOT_FOUND", end, map[string]any{"b": "league"})
	var none struct {
		Leaderboard struct {
			CurrentPeriod *string     `json:"currentPeriod"`
			NextReset     *time.Time  `json:"nextReset"`
			Season        *seasonJSON `json:"season"`
		} `json:"leaderboard"`
	}
	a.must(t, "", info, map[string]any{"b": "league"}, &none)
	if l := none.Leaderboard; l.CurrentPeriod == nil || *l.CurrentPeriod != "" || l.NextReset != nil || l.Season != nil {
		t.Fatalf("before the first season: %+v", l)
	}

	ends1 := time.Now().UTC().Add(6 * 7 * 24 * time.Hour).Truncate(time.Second)
	vars1 := map[string]any{"b": "league", "id": "spring", "e": ends1.Format(time.RFC3339)}
	a.wantCode(t, testSubmitKey, "FORBIDDEN", start, vars1)
	var got struct {
		StartSeason seasonChangeJSON `json:"startSeason"`
	}
	before := time.Now().Truncate(time.Second)
	a.must(t, testAdminKey, start, vars1, &got)
	c := got.StartSeason
	if !c.Changed || c.Closed != nil || c.Season.ID != "spring" || !c.Season.EndsAt.Equal(ends1) || !c.Season.Running ||
		c.Season.StartedAt.Before(before) || c.Season.StartedAt.After(time.Now()) ||
		!c.Season.ReadableUntil.Equal(ends1.Add(time.Minute+2*ends1.Sub(c.Season.StartedAt))) {
		t.Fatalf("startSeason: %+v", c)
	}
	spring := c.Season
	a.must(t, testAdminKey, start, vars1, &got) // a retry
	if got.StartSeason.Changed || got.StartSeason.Season != spring {
		t.Fatalf("retried startSeason: %+v", got.StartSeason)
	}
	for _, bad := range []struct{ id, e, code string }{
		{"spring", ends1.Add(time.Hour).Format(time.RFC3339), "CONFLICT"},
		{"all", ends1.Format(time.RFC3339), "BAD_USER_INPUT"},
		{"2026-W48", ends1.Format(time.RFC3339), "BAD_USER_INPUT"},
		{"summer", time.Now().Add(-time.Hour).Format(time.RFC3339), "BAD_USER_INPUT"},
	} {
		a.wantCode(t, testAdminKey, bad.code, start, map[string]any{"b": "league", "id": bad.id, "e": bad.e})
	}
	var lb struct {
		Leaderboard struct {
			CurrentPeriod string      `json:"currentPeriod"`
			NextReset     *time.Time  `json:"nextReset"`
			Season        *seasonJSON `json:"season"`
		} `json:"leaderboard"`
	}
	b.must(t, "", info, map[string]any{"b": "league"}, &lb)
	if lb.Leaderboard.CurrentPeriod != "spring" || lb.Leaderboard.NextReset == nil ||
		!lb.Leaderboard.NextReset.Equal(ends1) || lb.Leaderboard.Season == nil || *lb.Leaderboard.Season != spring {
		t.Fatalf("leaderboard after the start: %+v", lb.Leaderboard)
	}

	// A subscription on server b follows the SEASON window.
	conn := wstest.Dial(t, b.WSURL, wstest.TransportWS, nil)
	const sub = `subscription($b: ID!) { topUpdates(board: $b, first: 10, window: SEASON) {
		window period version snapshot size entries { playerId rank score } } }`
	if err := conn.Subscribe("s", sub, map[string]any{"b": "league"}); err != nil {
		t.Fatal(err)
	}
	type update struct {
		TopUpdates struct {
			Window   string `json:"window"`
			Period   string `json:"period"`
			Version  int    `json:"version"`
			Snapshot bool   `json:"snapshot"`
			Size     int    `json:"size"`
			Entries  []struct {
				PlayerID string  `json:"playerId"`
				Rank     int     `json:"rank"`
				Score    float64 `json:"score"`
			} `json:"entries"`
		} `json:"topUpdates"`
	}
	next := func() update {
		var u update
		conn.NextData(t, ctxT(t, 10*time.Second), "s", &u)
		return u
	}
	u := next()
	if !u.TopUpdates.Snapshot || u.TopUpdates.Window != "SEASON" || u.TopUpdates.Period != "spring" {
		t.Fatalf("first update %+v", u)
	}
	res := a.submit(t, map[string]any{"board": "league", "playerId": "ann", "score": 7})
	if res.Entry.Rank != 1 || res.Entry.Score != 7 {
		t.Fatalf("submit: %+v", res)
	}
	for len(u.TopUpdates.Entries) == 0 {
		u = next()
	}
	if e := u.TopUpdates.Entries[0]; u.TopUpdates.Period != "spring" || e.PlayerID != "ann" || e.Score != 7 || e.Rank != 1 {
		t.Fatalf("update %+v", u)
	}

	// summer starts through server a: b's subscriber gets an empty snapshot of summer.
	ends2 := ends1.Add(7 * 24 * time.Hour)
	a.must(t, testAdminKey, start, map[string]any{"b": "league", "id": "summer", "e": ends2.Format(time.RFC3339)}, &got)
	if c := got.StartSeason; !c.Changed || c.Season.ID != "summer" || c.Closed == nil || c.Closed.ID != "spring" ||
		c.Closed.Running || !c.Closed.EndsAt.Equal(c.Season.StartedAt) {
		t.Fatalf("start of summer: %+v", c)
	}
	v := u.TopUpdates.Version
	u = next()
	if !u.TopUpdates.Snapshot || u.TopUpdates.Period != "summer" || len(u.TopUpdates.Entries) != 0 ||
		u.TopUpdates.Size != 0 || u.TopUpdates.Version != v+1 {
		t.Fatalf("after the start of summer: %+v, want an empty snapshot of summer, version %d", u, v+1)
	}
	// spring stays readable by its id, and both are listed.
	var listed struct {
		Leaderboard struct {
			Seasons []seasonJSON `json:"seasons"`
		} `json:"leaderboard"`
	}
	b.must(t, "", `{ leaderboard(id: "league") { seasons { `+seasonFields+` } } }`, nil, &listed)
	closedSpring := *got.StartSeason.Closed
	if l := listed.Leaderboard.Seasons; len(l) != 2 || l[0] != closedSpring || l[1] != got.StartSeason.Season {
		t.Fatalf("seasons %+v, want %+v and %+v", l, closedSpring, got.StartSeason.Season)
	}
	var top struct {
		Top []entry `json:"top"`
	}
	b.must(t, "", `{ top(board: "league", window: SEASON, period: "spring") { playerId rank score } }`, nil, &top)
	if len(top.Top) != 1 || top.Top[0].PlayerID != "ann" || top.Top[0].Score != 7 {
		t.Fatalf("spring after it closed: %+v", top.Top)
	}

	// endSeason: the subscriber gets summer's final standings; a second endSeason changes nothing.
	a.submit(t, map[string]any{"board": "league", "playerId": "bob", "score": 3})
	for len(u.TopUpdates.Entries) == 0 {
		u = next()
	}
	var ended struct {
		EndSeason struct {
			Season  seasonJSON `json:"season"`
			Changed bool       `json:"changed"`
			Closed  *struct {
				ID string `json:"id"`
			} `json:"closed"`
		} `json:"endSeason"`
	}
	a.must(t, testAdminKey, end, map[string]any{"b": "league"}, &ended)
	if e := ended.EndSeason; !e.Changed || e.Season.ID != "summer" || e.Season.Running || e.Closed == nil ||
		e.Closed.ID != "summer" {
		t.Fatalf("endSeason: %+v", e)
	}
	v = u.TopUpdates.Version
	u = next()
	if !u.TopUpdates.Snapshot || u.TopUpdates.Period != "summer" || len(u.TopUpdates.Entries) != 1 ||
		u.TopUpdates.Entries[0].PlayerID != "bob" || u.TopUpdates.Version != v+1 {
		t.Fatalf("after endSeason: %+v, want a snapshot of summer's final standings", u)
	}
	a.must(t, testAdminKey, end, map[string]any{"b": "league"}, &ended)
	if ended.EndSeason.Changed || ended.EndSeason.Closed != nil {
		t.Fatalf("second endSeason: %+v", ended.EndSeason)
	}
	b.must(t, "", info, map[string]any{"b": "league"}, &lb)
	if lb.Leaderboard.CurrentPeriod != "summer" || lb.Leaderboard.NextReset != nil || lb.Leaderboard.Season.Running {
		t.Fatalf("leaderboard after the end: %+v", lb.Leaderboard)
	}
	// Between seasons a score counts for ALL_TIME only; the result reports that window.
	var sr struct {
		SubmitScore struct {
			Entry entry `json:"entry"`
		} `json:"submitScore"`
	}
	a.must(t, testSubmitKey, `mutation { submitScore(input: {board: "league", playerId: "cy", score: 1}) { entry { playerId rank score } } }`, nil, &sr)
	b.must(t, "", `{ top(board: "league", window: SEASON) { playerId rank score } }`, nil, &top)
	if len(top.Top) != 1 || top.Top[0].PlayerID != "bob" {
		t.Fatalf("summer after a score between seasons: %+v", top.Top)
	}
	raw, _ := json.Marshal(sr)
	if sr.SubmitScore.Entry.PlayerID != "cy" || sr.SubmitScore.Entry.Rank != 3 {
		t.Fatalf("a score between seasons: %s", raw)
	}
}
