package pubsub

import (
	"testing"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// eventAt's table: where an event stands after the last event taken (or read with everything) and the event that
// arrived before it on its channel. The last rows are a failover to a replica that lagged: the epoch stays and the
// version goes back, which only the event before it on the channel can tell.
func TestEventAt(t *testing.T) {
	cases := []struct {
		name    string
		epoch   string
		ver     int64
		arrived eventMark
		ev      leaderboard.Event
		want    int
	}{
		{"the first event of a board never read", "", 0, eventMark{}, leaderboard.Event{Epoch: "e1", Version: 1}, eventNext},
		{"the next version", "e1", 4, eventMark{"e1", 4}, leaderboard.Event{Epoch: "e1", Version: 5}, eventNext},
		{"published before the last full read", "e1", 9, eventMark{"e1", 4}, leaderboard.Event{Epoch: "e1", Version: 5}, eventRead},
		{"the first after a full read", "e1", 9, eventMark{}, leaderboard.Event{Epoch: "e1", Version: 7}, eventRead},
		{"a version skipped", "e1", 4, eventMark{"e1", 4}, leaderboard.Event{Epoch: "e1", Version: 6}, eventGap},
		{"a new epoch (the counter lost)", "e1", 4, eventMark{"e1", 4}, leaderboard.Event{Epoch: "e2", Version: 1}, eventGap},
		{"the counter went back: the next lost version again", "e1", 9, eventMark{"e1", 9}, leaderboard.Event{Epoch: "e1", Version: 6}, eventGap},
		{"the counter went back: the same version again", "e1", 9, eventMark{"e1", 9}, leaderboard.Event{Epoch: "e1", Version: 9}, eventGap},
		{"the counter went back after a full read while Redis lagged", "e1", 5, eventMark{"e1", 9}, leaderboard.Event{Epoch: "e1", Version: 6}, eventGap},
		{"a restore's new epoch after the old one's events", "e1", 9, eventMark{"e1", 9}, leaderboard.Event{Epoch: "e2", Version: 1}, eventGap},
	}
	names := map[int]string{eventNext: "next", eventRead: "read", eventGap: "gap"}
	for _, c := range cases {
		if got := eventAt(c.epoch, c.ver, c.arrived, &c.ev); got != c.want {
			t.Errorf("%s: eventAt(%q, %d, %+v, %+v) = %s, want %s", c.name, c.epoch, c.ver, c.arrived, c.ev, names[got], names[c.want])
		}
	}
}
