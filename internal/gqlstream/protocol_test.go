package gqlstream

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/leaderboard/leaderboard/graph"
)

func TestParseClientMessage(t *testing.T) {
	for msg, want := range map[string]clientMessage{
		`{"type":"connection_init"}`:                                   {typ: "connection_init"},
		` {"type":"connection_init","payload":{"a":1}} `:               {typ: "connection_init", payload: json.RawMessage(`{"a":1}`)},
		`{"type":"ping","payload":null}`:                               {typ: "ping"},
		`{"type":"pong","payload":{}}`:                                 {typ: "pong", payload: json.RawMessage(`{}`)},
		`{"type":"subscribe","id":"\u00e9","payload":{"query":"x"}}`:   {typ: "subscribe", id: "é", payload: json.RawMessage(`{"query":"x"}`)},
		`{"type":"complete","id":"a","payload":5}`:                     {typ: "complete", id: "a"},
		`{"type":"complete","type":"subscribe","id":"a","payload":{}}`: {typ: "subscribe", id: "a", payload: json.RawMessage(`{}`)},
	} {
		got, problem := parseClientMessage([]byte(msg))
		if problem != "" || got.typ != want.typ || got.id != want.id || string(got.payload) != string(want.payload) {
			t.Errorf("%s: got %+v %q, want %+v", msg, got, problem, want)
		}
	}
}

// TestHasLoneSurrogate: websocket messages go through graph.CheckText, the one owner of the rule.
func TestHasLoneSurrogate(t *testing.T) {
	for s, want := range map[string]bool{
		`"\ud800"`: true, `"\uDBFF"`: true, `"\udc00"`: true, `"\ud800\ud800"`: true, `"\ud800\n"`: true,
		`"\ud800"x`: true, `"\ud800\u00e9"`: true, `"\ud83d\ude00\ude00"`: true, `"\ud83d`: true,
		`"\ud83d\ude00"`: false, `"\\ud800"`: false, `"\\\\ud800"`: false, `"\u00e9\n\t\"\\"`: false,
		`"x\\"`: false, `"\u12"`: false, `"\`: false, `"` + "\xed\xa0\x80" + `"`: true, // raw surrogate bytes: invalid UTF-8
	} {
		if got := (graph.CheckText([]byte(s)) != ""); got != want {
			t.Errorf("%s: got %v, want %v", s, got, want)
		}
	}
	// Strings of random characters, escaped as JSON with \u escapes (pairs above U+FFFF), have none; the same
	// with one surrogate escape spliced in at a character boundary has one.
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		var parts []string
		for range rng.IntN(8) {
			r := rune(rng.IntN(0x110000))
			if !utf8.ValidRune(r) {
				r = 'x'
			}
			parts = append(parts, escapeRune(r))
		}
		s := `"` + strings.Join(parts, "") + `"`
		if graph.CheckText([]byte(s)) != "" {
			t.Fatalf("%s: lone surrogate reported", s)
		}
		var decoded string
		if err := json.Unmarshal([]byte(s), &decoded); err != nil || strings.ContainsRune(decoded, utf8.RuneError) &&
			!strings.Contains(s, `\ufffd`) {
			t.Fatalf("%s: escaping is wrong: %q %v", s, decoded, err)
		}
		at := rng.IntN(len(parts) + 1)
		lone := fmt.Sprintf(`\u%04x`, 0xD800+rng.IntN(0x800))
		spliced := `"` + strings.Join(parts[:at], "") + lone + strings.Join(parts[at:], "") + `"`
		if !(graph.CheckText([]byte(spliced)) != "") {
			t.Fatalf("%s: lone surrogate not reported", spliced)
		}
	}
}

// escapeRune writes r as JSON would inside a string, with a \u escape for anything outside printable ASCII.
func escapeRune(r rune) string {
	switch {
	case r == '"' || r == '\\':
		return `\` + string(r)
	case r >= 0x20 && r < 0x7f:
		return string(r)
	case r > 0xFFFF:
		r -= 0x10000
		return fmt.Sprintf(`\u%04x\u%04X`, 0xD800+(r>>10), 0xDC00+(r&0x3FF))
	}
	return fmt.Sprintf(`\u%04x`, r)
}

// TestTransportStateIDs: operations get gqlgen ids of their own; ends are mapped back once.
func TestTransportStateIDs(t *testing.T) {
	s := newTransportState(2)
	in := func(msg string) inbound { return s.inbound([]byte(msg)) }
	gqlID := func(i inbound) string {
		t.Helper()
		var m struct{ ID string }
		if i.forward == nil || json.Unmarshal(i.forward, &m) != nil {
			t.Fatalf("not forwarded: %+v", i)
		}
		return m.ID
	}
	if i := in(`{"type":"subscribe","id":"a","payload":{}}`); i.closeCode != 4401 {
		t.Fatalf("subscribe before ack: %+v", i)
	}
	if i := in(`{"type":"connection_init"}`); !i.initialised {
		t.Fatalf("init: %+v", i)
	}
	s.outbound("connection_ack", "")
	a := gqlID(in(`{"type":"subscribe","id":"a","payload":{}}`))
	aState := s.op(a) // as a stream bound to it holds it (streamSend)
	if !s.streamSend(aState) {
		t.Fatal("stream response of a running operation dropped")
	}
	if i := in(`{"type":"subscribe","id":"a","payload":{}}`); i.closeCode != 4409 {
		t.Fatalf("duplicate: %+v", i)
	}
	if got := gqlID(in(`{"type":"complete","id":"a"}`)); got != a {
		t.Fatalf("complete of a went to %q, want %q", got, a)
	}
	if !s.streamSend(aState) {
		t.Fatal("stream response dropped after the peer's complete, before the id was used again")
	}
	a2 := gqlID(in(`{"type":"subscribe","id":"a","payload":{}}`)) // a is free, the first one still runs
	if a2 == a {
		t.Fatal("an id of gqlgen's was reused")
	}
	if i := in(`{"type":"subscribe","id":"b","payload":{}}`); !strings.Contains(string(i.reply), "RATE_LIMITED") ||
		!strings.Contains(string(i.reply), `"id":"b"`) {
		t.Fatalf("third operation in flight: %+v", i)
	}
	// The first one's messages are dropped: a is the second one's now.
	if s.streamSend(aState) {
		t.Fatal("stream response of the replaced operation sent")
	}
	for _, typ := range []string{"next", "complete", "complete"} {
		if _, send := s.outbound(typ, a); send {
			t.Fatalf("%s of the replaced operation sent", typ)
		}
	}
	b := gqlID(in(`{"type":"subscribe","id":"b","payload":{}}`))
	a2State := s.op(a2)
	if id, send := s.outbound("next", a2); !send || id != "a" {
		t.Fatalf("next of a: %q %v", id, send)
	}
	if id, send := s.outbound("error", a2); !send || id != "a" {
		t.Fatalf("error of a: %q %v", id, send)
	}
	if _, send := s.outbound("complete", a2); send {
		t.Fatal("complete after error sent")
	}
	if s.streamSend(a2State) {
		t.Fatal("stream response after the operation's error sent")
	}
	if i := in(`{"type":"complete","id":"a"}`); i.forward != nil {
		t.Fatalf("complete of an ended operation forwarded: %+v", i)
	}
	// The peer's complete, then the server's: sent (nothing else uses the id).
	in(`{"type":"complete","id":"b"}`)
	if id, send := s.outbound("complete", b); !send || id != "b" {
		t.Fatalf("complete of b: %q %v", id, send)
	}
	if n := s.inFlight(); n != 0 {
		t.Fatalf("%d in flight", n)
	}
	if i := in(`{"type":"connection_init"}`); i.closeCode != 4429 {
		t.Fatalf("second init: %+v", i)
	}
}

// TestStreamWritersLeaveAProcessor: the stream writers take every processor but one (at least one writer), and
// the server's writers are bounded by that count.
func TestStreamWritersLeaveAProcessor(t *testing.T) {
	for procs, want := range map[int]int{1: 1, 2: 1, 3: 2, 8: 7} {
		if got := streamWriterCount(procs); got != want {
			t.Errorf("streamWriterCount(%d) = %d, want %d", procs, got, want)
		}
	}
	var p streamWriters
	p.add(&wsConn{}) // a connection with nothing to write: its turn ends at once
	p.mu.Lock()
	got := p.max
	p.mu.Unlock()
	if want := streamWriterCount(runtime.GOMAXPROCS(0)); got != want {
		t.Errorf("writers at most %d with GOMAXPROCS %d, want %d", got, runtime.GOMAXPROCS(0), want)
	}
}

// TestIsTimeoutOfNilAllocatesNothing: every stream write asks isTimeout of its result, nearly always nil; the
// net.Error that errors.As fills escapes to the heap, and was allocated for nil too.
func TestIsTimeoutOfNilAllocatesNothing(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { isTimeout(nil) }); n != 0 {
		t.Errorf("isTimeout(nil): %v allocations, want 0", n)
	}
	if !isTimeout(os.ErrDeadlineExceeded) || isTimeout(io.EOF) {
		t.Error("isTimeout reads deadline errors wrong")
	}
}

// TestWriteCloseReason: close reasons are cut to 123 bytes on a character boundary.
func TestWriteCloseReason(t *testing.T) {
	for _, s := range []string{strings.Repeat("é", 100), "x" + strings.Repeat("€", 60), strings.Repeat("a", 200)} {
		got := CloseReason(s)
		if len(got) > 123 || len(got) < 120 || !utf8.ValidString(got) || !strings.HasPrefix(s, got) {
			t.Errorf("%q -> %q", s, got)
		}
	}
}
