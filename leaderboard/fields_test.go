package leaderboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/redistest"
	lb "github.com/leaderboard/leaderboard/leaderboard"
	"github.com/redis/go-redis/v9"
)

// fieldsBoard makes board "f" on a Redis of the test's own (so that its INFO commandstats counts the test's
// commands alone) with players p0..p(n-1) in ties of three, every named-th of them with a name and metadata.
func fieldsBoard(t *testing.T, n, named int) (*lb.Store, *redis.Client) {
	srv := redistest.Standalone(t)
	rdb := srv.Client(t).(*redis.Client)
	s := lb.New(rdb, lb.Config{Prefix: "fields"})
	mustBoard(t, s, lb.Board{ID: "f"})
	name := "Ann"
	for i := range n {
		sub := lb.Submission{Board: "f", Player: fmt.Sprint("p", i), Score: float64(i / 3)}
		if i%named == 0 {
			sub.DisplayName, sub.Metadata = &name, json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))
		}
		mustSubmit(t, s, sub)
	}
	return s, rdb
}

// Reads fill the parts of entries they are asked for (Only), and those parts equal a full read's; the others are
// zero, and Redis does not do their work: no ZCOUNT without tie ranks, no names lookup without metadata, no
// record lookup per row of an aroundMe list without updatedAt, one score lookup for all of a friends list
// (commands counted by INFO commandstats on a Redis of the test's own).
func TestReadFields(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, rdb := fieldsBoard(t, 30, 4)
	v := lb.View{Board: "f"}
	full := map[string]lb.Entry{}
	for i := range 30 {
		e, err := s.Rank(ctx, v, fmt.Sprint("p", i))
		if err != nil || e == nil {
			t.Fatal(e, err)
		}
		full[e.PlayerID] = *e
	}
	friends := []string{"p1", "p5", "p8", "p12", "p29", "nobody"}
	// The friends read without a script reads the period's record layout once, then remembers it.
	if _, err := s.Friends(ctx, v, "p3", friends, lb.Only(0)); err != nil {
		t.Fatal(err)
	}
	calls := map[lb.Fields]map[string]int{}
	for _, f := range []lb.Fields{0, lb.FieldUpdatedAt, lb.FieldTieRank, lb.FieldMeta, lb.AllFields} {
		want := func(e lb.Entry) lb.Entry {
			w := full[e.PlayerID]
			if f&lb.FieldUpdatedAt == 0 {
				w.UpdatedAt = time.Time{}
			}
			if f&lb.FieldTieRank == 0 {
				w.TieRank = 0
			}
			if f&lb.FieldMeta == 0 {
				w.DisplayName, w.Metadata = nil, nil
			}
			return w
		}
		check := func(what string, got []lb.Entry, n int) {
			t.Helper()
			if len(got) != n {
				t.Fatalf("fields %b, %s: %d entries, want %d", f, what, len(got), n)
			}
			for _, e := range got {
				if w := want(e); !reflect.DeepEqual(e, w) {
					t.Fatalf("fields %b, %s: %+v, want %+v", f, what, e, w)
				}
			}
		}
		before := commandCalls(t, rdb)
		calls[f] = map[string]int{}
		e, err := s.Rank(ctx, v, "p13", lb.Only(f))
		if err != nil || e == nil {
			t.Fatal(e, err)
		}
		check("rank", []lb.Entry{*e}, 1)
		around, err := s.Around(ctx, v, "p13", 3, lb.Only(f))
		if err != nil {
			t.Fatal(err)
		}
		check("aroundMe", around, 7)
		es, err := s.Friends(ctx, v, "p3", friends, lb.Only(f))
		if err != nil {
			t.Fatal(err)
		}
		check("friends", es, 6)
		after := commandCalls(t, rdb)
		for _, cmd := range []string{"zcount", "hget", "hmget", "zscore", "zmscore"} {
			calls[f][cmd] = after[cmd] - before[cmd]
		}
	}
	// What each part costs Redis, against reading none of them: tie ranks ZCOUNTs (none without), metadata one
	// HMGET for each read, updatedAt one record HGET for each of aroundMe's 7 rows, and for the rank's player and
	// each of the 6 friends found (the reads without a script read their records again in their snapshots).
	none := calls[0]
	// Scores: one ZMSCORE for all of a friends list's (and a rank's) exact players, not a ZSCORE each; aroundMe
	// looks up its one player with ZSCORE.
	for f, c := range calls {
		if c["zmscore"] != 2 || c["zscore"] != 1 {
			t.Errorf("fields %b: ZMSCORE %d, ZSCORE %d (want 2 and 1: rank and friends one ZMSCORE each, aroundMe one ZSCORE)",
				f, c["zmscore"], c["zscore"])
		}
	}
	if none["zcount"] != 0 || calls[lb.FieldTieRank]["zcount"] == 0 {
		t.Errorf("ZCOUNTs without tie ranks %d, with %d", none["zcount"], calls[lb.FieldTieRank]["zcount"])
	}
	if m := calls[lb.FieldMeta]; m["hget"] != none["hget"] || m["hmget"] != none["hmget"]+3 {
		t.Errorf("with metadata %v, without %v", m, none)
	}
	if u := calls[lb.FieldUpdatedAt]; u["hget"] != none["hget"]+7+1+6 || u["hmget"] != none["hmget"] {
		t.Errorf("with updatedAt %v, without %v", u, none)
	}
}

// A submission fills the parts of its result's entry it is asked for (Only), equal to a full read right after it,
// and leaves the others zero without Redis doing their work: no ZCOUNT without the tie rank, no names lookup
// without metadata. One with an eventId fills them all (its result is stored, and a retry may ask for more), and a
// retry asking for every part gets them back as the first result had them.
func TestSubmitFields(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, rdb := fieldsBoard(t, 12, 2)
	v := lb.View{Board: "f"}
	var baseHGets int
	for k, f := range []lb.Fields{0, lb.FieldUpdatedAt, lb.FieldTieRank, lb.FieldMeta, lb.AllFields} {
		for _, eventID := range []string{"", fmt.Sprint("ev", k)} {
			player := fmt.Sprint("p", 2*k) // has a name and metadata
			sub := lb.Submission{Board: "f", Player: player, Score: float64(k + 1), EventID: eventID}
			if eventID != "" {
				sub.Score += 0.5 // a change too, so both publish an event (its counters take HGETs of their own)
			}
			before := commandCalls(t, rdb)
			r, err := s.Submit(ctx, sub, lb.Only(f))
			if err != nil {
				t.Fatal(err)
			}
			after := commandCalls(t, rdb)
			full, err := s.Rank(ctx, v, player)
			if err != nil || full == nil {
				t.Fatal(full, err)
			}
			want := *full
			filled := f | lb.FieldUpdatedAt // updatedAt comes with the write
			if eventID != "" {
				filled = lb.AllFields
			}
			if filled&lb.FieldTieRank == 0 {
				want.TieRank = 0
			}
			if filled&lb.FieldMeta == 0 {
				want.DisplayName, want.Metadata = nil, nil
			}
			if !reflect.DeepEqual(r.Entry, want) {
				t.Fatalf("fields %b, eventId %q: entry %+v, a full read right after has %+v", f, eventID, r.Entry, want)
			}
			zcounts, hgets := after["zcount"]-before["zcount"], after["hget"]-before["hget"]
			if (zcounts > 0) != (filled&lb.FieldTieRank != 0) {
				t.Errorf("fields %b, eventId %q: %d ZCOUNTs", f, eventID, zcounts)
			}
			// HGETs: the same as without any part, and one more (the player's names) with metadata.
			if k == 0 && eventID == "" {
				baseHGets = hgets
			}
			if wantHGets := baseHGets + int(filled&lb.FieldMeta/lb.FieldMeta); hgets != wantHGets {
				t.Errorf("fields %b, eventId %q: %d HGETs, want %d", f, eventID, hgets, wantHGets)
			}
			if eventID != "" {
				retry, err := s.Submit(ctx, sub, lb.Only(lb.AllFields))
				if err != nil || !retry.Duplicate || !reflect.DeepEqual(retry.Entry, r.Entry) {
					t.Fatalf("retry of %q: %+v (%v), want the first result's entry %+v", eventID, retry, err, r.Entry)
				}
			}
		}
	}

	// Concurrent submissions that ask for different parts, through the batcher that merges calls with the same
	// header into one script call: each gets what it asked for (the fields are part of the header).
	merged := lb.New(rdb, lb.Config{Prefix: "fields", BatchLanes: 2})
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f := lb.Fields(0)
			if g%2 == 1 {
				f = lb.AllFields
			}
			r, err := merged.Submit(ctx, lb.Submission{Board: "f", Player: fmt.Sprint("p", g%12), Score: 0}, lb.Only(f))
			if err == nil && (r.Entry.TieRank != 0) != (f != 0) {
				err = fmt.Errorf("fields %b: tieRank %d", f, r.Entry.TieRank)
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	// A submission that changes nothing (not a new best) takes its rank from the one read to plan it: one ZRANK.
	before := commandCalls(t, rdb)
	r, err := s.Submit(ctx, lb.Submission{Board: "f", Player: "p11", Score: -1}, lb.Only(lb.AllFields))
	if err != nil {
		t.Fatal(err)
	}
	zranks := commandCalls(t, rdb)["zrank"] - before["zrank"]
	full, err := s.Rank(ctx, v, "p11")
	if err != nil || full == nil || r.Updated || !reflect.DeepEqual(r.Entry, *full) || zranks != 1 {
		t.Fatalf("a worse score: %+v (%v), %d ZRANKs; a full read has %+v", r, err, zranks, full)
	}
}
