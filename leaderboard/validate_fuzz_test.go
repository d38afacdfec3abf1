package leaderboard

import (
	"encoding/json"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzSubmissionArgs feeds arbitrary client input to the validation of a submission: it never panics, and what it
// accepts is within the limits the scripts rely on.
func FuzzSubmissionArgs(f *testing.F) {
	f.Add("p1", 12.5, "ev", "Ada", []byte(`{"a":1}`), int64(0))
	f.Add("", 0.0, "", "", []byte(`[]`), int64(-1))
	f.Add("{x}:🎮", -1e300, "e{}", "\xff", []byte(`{"k":"`+string(make([]byte, 1030))+`"}`), int64(1<<40))
	s := New(nil, Config{Clock: func() time.Time { return time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC) }})
	b := &Board{ID: "b", Windows: []Window{AllTime, Daily, Weekly}, TimeZone: "Pacific/Chatham"}
	if err := b.normalize(); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, player string, score float64, event, name string, meta []byte, at int64) {
		sub := Submission{Board: "b", Player: player, Score: score, EventID: event, DisplayName: &name,
			Metadata: json.RawMessage(meta)}
		if at != 0 {
			sub.AchievedAt = time.Unix(at%(1<<34), 0)
		}
		args, period, err := s.itemArgs(b, sub, s.Now())
		if err != nil {
			if ErrorCode(err) == Internal {
				t.Fatalf("validation error without a client code: %v", err)
			}
			return
		}
		if len(player) == 0 || len(player) > MaxIDBytes || !utf8.ValidString(player) || checkScore(score) != nil {
			t.Fatalf("accepted player %q score %v", player, score)
		}
		if m := args[7].(string); len(m) > MaxMetadataBytes || !json.Valid([]byte(m)) {
			t.Fatalf("accepted metadata %q", m)
		}
		if len(args) != 9+2*len(b.Windows) || period != AllPeriod {
			t.Fatalf("args %v period %q", args, period)
		}
	})
}
