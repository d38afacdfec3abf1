package leaderboard

import (
	"encoding/json"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzSubmissionArgs feeds arbitrary client input to the validation of a submission, on an ALL_TIME-only board
// (where any past achievedAt is accepted) and on a board of calendar windows in a zone with 45-minute offsets: it
// never panics, and what it accepts is within the limits the scripts rely on (ids, metadata, achievedAt from
// MinAchievedAt to now plus the skew, period keys that parse, expiries after now).
func FuzzSubmissionArgs(f *testing.F) {
	f.Add("p1", 12.5, "ev", "Ada", []byte(`{"a":1}`), int64(0), false)
	f.Add("", 0.0, "", "", []byte(`[]`), int64(-1), true)
	f.Add("{x}:🎮", -1e300, "e{}", "\xff", []byte(`{"k":"`+string(make([]byte, 1030))+`"}`), int64(1<<40), false)
	f.Add("old", 1.0, "", "", []byte(nil), int64(-2208988800), false) // 1900
	f.Add("y2k", 1.0, "", "", []byte(nil), int64(946684800), true)    // MinAchievedAt
	f.Add("late", 1.0, "", "", []byte(nil), int64(1795953600-600), true)
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	s := New(nil, Config{Clock: func() time.Time { return now }})
	boards := map[bool]*Board{
		false: {ID: "all", Windows: []Window{AllTime}},
		true:  {ID: "cal", Windows: []Window{AllTime, Daily, Weekly, Monthly}, TimeZone: "Pacific/Chatham", Grace: time.Hour},
	}
	for _, b := range boards {
		if err := b.normalize(); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, player string, score float64, event, name string, meta []byte, at int64, calendar bool) {
		b := boards[calendar]
		sub := Submission{Board: b.ID, Player: player, Score: score, EventID: event, DisplayName: &name,
			Metadata: json.RawMessage(meta)}
		if at != 0 {
			sub.AchievedAt = time.Unix(at%(1<<36), 0)
		}
		// Appended after arguments already there, which a refusal leaves as they were.
		args, period, err := s.appendItem([]any{"before"}, b, sub, now, "")
		if len(args) == 0 || args[0] != "before" {
			t.Fatalf("arguments before the item changed: %v", args)
		}
		if err != nil {
			if len(args) != 1 {
				t.Fatalf("refused item left arguments: %v", args)
			}
			if ErrorCode(err) == Internal {
				t.Fatalf("validation error without a client code: %v", err)
			}
			return
		}
		args = args[1:]
		if len(player) == 0 || len(player) > MaxIDBytes || !utf8.ValidString(player) || checkScore(score) != nil {
			t.Fatalf("accepted player %q score %v", player, score)
		}
		if m := args[7].(string); args[6] == "1" && (len(m) > MaxMetadataBytes || !json.Valid([]byte(m))) || args[6] != "1" && m != "" {
			t.Fatalf("accepted metadata %q", m)
		}
		ts := args[8].(int64)
		if ts < MinAchievedAt.Unix() || ts > now.Add(s.cfg.ClockSkew).Unix() {
			t.Fatalf("accepted updatedAt %v", time.Unix(ts, 0).UTC())
		}
		if len(args) != submitItemArgs+2*len(b.Windows) || period != AllPeriod || args[submitArrivalItemArg] != "" {
			t.Fatalf("args %v period %q", args, period)
		}
		for i, w := range b.Windows {
			p, exp := args[submitItemArgs+2*i].(string), args[submitItemArgs+1+2*i].(int64)
			if _, err := ParsePeriod(w, p, b.Location()); err != nil {
				t.Fatalf("%s period %q does not parse: %v", w, p, err)
			}
			if (w == AllTime) != (exp == 0) || (exp != 0 && exp <= now.Unix()) {
				t.Fatalf("%s period %q expires at %d (now %d)", w, p, exp, now.Unix())
			}
		}
	})
}
