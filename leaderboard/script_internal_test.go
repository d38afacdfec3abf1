package leaderboard

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/internal/redistest"
)

// The submit script checks expiries itself: a period whose keys would be written already expired is refused
// with PERIOD_CLOSED and nothing is written, even when the caller asks for it.
func TestScriptRefusesExpiredPeriod(t *testing.T) {
	t.Parallel()
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			now := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
			s := New(tg.Client, Config{Prefix: redistest.Prefix(t), Clock: func() time.Time { return now }})
			b, err := s.CreateBoard(ctx, Board{ID: "exp", Windows: []Window{AllTime, Daily}})
			if err != nil {
				t.Fatal(err)
			}
			item, _, err := s.appendItem(nil, b, Submission{Board: b.ID, Player: "p", Score: 1}, now, "")
			if err != nil {
				t.Fatal(err)
			}
			item[len(item)-1] = now.Unix() // the daily period's keys would expire right now
			args := []any{b.sum, "d", "best", 0, "", "", 60, 100, "", s.Channel(b.ID), "a,d", now.Unix(), 1, 0, 7}
			reply, err := submitScript.eval.Run(ctx, s.rdb, declared([]string{s.keyBase(b.ID)}), append(args, item...)...).Slice()
			if err != nil {
				t.Fatal(err)
			}
			row := reply[0].([]any)
			if row[0] != "err" || row[1] != string(PeriodClosed) {
				t.Fatalf("reply %v, want a PERIOD_CLOSED refusal", row)
			}
			keys, err := scanKeys(ctx, tg.Client, s.BoardKeys(b.ID))
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(keys) // the creation's: the definition, and the counters with its creation mark
			if len(keys) != 2 || !strings.HasSuffix(keys[0], ":c") || !strings.HasSuffix(keys[1], ":def") {
				t.Fatalf("a refused submission wrote %v", keys)
			}
			if f, err := tg.Client.HKeys(ctx, keyCounters.of(s.keyBase(b.ID))).Result(); err != nil ||
				len(f) != 1 || f[0] != "born" {
				t.Fatalf("a refused submission wrote counters %v (%v)", f, err)
			}
		})
	}
}

func scanKeys(ctx context.Context, c redis.UniversalClient, pattern string) ([]string, error) {
	var keys []string
	scan := func(ctx context.Context, c *redis.Client) error {
		it := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for it.Next(ctx) {
			keys = append(keys, it.Val())
		}
		return it.Err()
	}
	if cc, ok := c.(*redis.ClusterClient); ok {
		return keys, cc.ForEachMaster(ctx, scan)
	}
	return keys, scan(ctx, c.(*redis.Client))
}

// recordHarness runs common.lua's record and token encodings on Redis and returns what they give back, and the
// player's record hash of both versions.
var recordHarness = redis.NewScript(commonLua + prologue + `
local ts, hi, lo, player = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[5]
local tx = nil
if ARGV[4] ~= '' then tx = tonumber(ARGV[4]) end
local tok, num = token(hi, lo)
local rec = make_rec(ts, tok, tx)
local pts, ptok, ptx = parse_rec(rec)
local px = ''
if ptx then px = fmt(ptx) end
local recn = rec -- make_rec with the arrival number token gives below 2^53, as submit.lua calls it
if num then recn = make_rec(ts, 'unused', tx, num) end
local shown = 'nil'
if num then shown = sformat('%d', num) end
return { tok, rec, tostring(pts), ptok or '', px, member_player(tok .. player), recn, shown,
  sformat('%d', phash1(player)), sformat('%d', phash2(player)) }
`)

// FuzzRecordEncoding: every record the scripts can write (updatedAt from MinAchievedAt to MaxAchievedAt, any
// arrival number below 2^63, with or without a tail score) has the bytes written out below and reads back as what
// was written, by parse_rec and by Go's parseRecord; the player id follows the token in the sorted-set member
// unambiguously, tokens sort like the arrival numbers they encode, and the scripts hash a player id to the record
// hash Go's recordHash gives, in both versions.
func FuzzRecordEncoding(f *testing.F) {
	f.Add(int64(946684800), uint64(0), 0.0, false, "p", uint64(1))
	f.Add(int64(9999999999), uint64(1<<63-1), -1e300, true, "123", uint64(62*62*62*62*62*62-1))
	f.Add(int64(999999999), uint64(1<<32-1), 5e-324, true, "", uint64(1<<32))
	f.Add(int64(4102444800), uint64(56800235584), 9007199254740992.0, true, "A1:b,c", uint64(56800235583))
	f.Add(int64(1764601234), uint64(999999999999999), 0.5, false, "0123", uint64(1000000000000000))
	// Either side of 2^53 (token's one-double path below it) and of 62^8 (the longest token of that path).
	f.Add(int64(1764601234), uint64(1<<53-1), 0.0, false, "z", uint64(1<<53))
	f.Add(int64(1764601234), uint64(218340105584895), 0.0, false, "z", uint64(218340105584896))
	// A long id with bytes above 127, for the record hashes.
	f.Add(int64(1764601234), uint64(7), 1.5, true, "player-1234567-\u00fc\xff\x00~", uint64(8))
	rdb := redistest.SharedStandalone(f).Client(f)
	lo, hi := MinAchievedAt.Unix(), MaxAchievedAt.Unix()
	f.Fuzz(func(t *testing.T, ts int64, n uint64, tailx float64, tail bool, player string, other uint64) {
		if ts < lo || ts > hi {
			ts = lo + ((ts%(hi-lo+1))+(hi-lo+1))%(hi-lo+1)
		}
		n, other = n&(1<<63-1), other&(1<<63-1)
		if math.IsNaN(tailx) || math.IsInf(tailx, 0) {
			tailx = 0
		}
		tx := ""
		if tail {
			tx = strconv.FormatFloat(tailx, 'g', -1, 64)
		}
		v, err := recordHarness.Run(context.Background(), rdb, declared([]string{"t:{x}:"}), ts, n>>32, n&(1<<32-1), tx,
			player).StringSlice()
		if err != nil {
			t.Fatal(err)
		}
		tok, rec, pts, ptok, ptx, pp := v[0], v[1], v[2], v[3], v[4], v[5]
		wantNum := "nil" // token gives the number along only below 2^53
		if n < 1<<53 {
			wantNum = strconv.FormatUint(n, 10)
		}
		if v[7] != wantNum {
			t.Fatalf("token(%d) gave the number %s with it, want %s", n, v[7], wantNum)
		}
		if v[6] != rec {
			t.Fatalf("make_rec with the arrival number %d: %q, from the token: %q", n, v[6], rec)
		}
		if want := arrivalToken(n); tok != want {
			t.Fatalf("token(%d) = %q, want %q", n, tok, want)
		}
		if want := fmt.Sprintf("%010d%d", ts, n); !strings.HasPrefix(rec, want) || (!tail && rec != want) {
			t.Fatalf("record %q, want %q (and a tail score: %v)", rec, want, tail)
		}
		if gts, gn, gtail, ok := parseRecord(rec); !ok || gts != ts || gn != n || gtail != tail {
			t.Fatalf("parseRecord(%q) = %d, %d, tail %v, %v; written: %d, %d, tail %v", rec, gts, gn, gtail, ok, ts, n,
				tail)
		}
		h1, h2 := strconv.FormatUint(recordHash(1, player), 10), strconv.FormatUint(recordHash(2, player), 10)
		if v[8] != h1 || v[9] != h2 {
			t.Fatalf("record hashes of %q: phash1 %s, phash2 %s; recordHash %s, %s", player, v[8], v[9], h1, h2)
		}
		if pts != strconv.FormatInt(ts, 10) || ptok != tok || pp != player || memberPlayer(tok+player) != player {
			t.Fatalf("record %q of (%d, %q, %q) read back as (%s, %q), member player %q", rec, ts, tok, player, pts,
				ptok, pp)
		}
		if tail {
			if got, err := strconv.ParseFloat(ptx, 64); err != nil || got != tailx {
				t.Fatalf("record %q: tail score %q, want %v", rec, ptx, tailx)
			}
		} else if ptx != "" {
			t.Fatalf("record %q of an exact player reads back a tail score %q", rec, ptx)
		}
		if a, b := arrivalToken(n), arrivalToken(other); (a < b) != (n < other) || (a == b) != (n == other) {
			t.Fatalf("tokens %q (%d) and %q (%d) sort against their numbers", a, n, b, other)
		}
	})
}

// parseHarness reads any string with parse_rec and with parse_rec as it was before its single scan (2026-12-03),
// the reference: both readings are returned, each as {ok, updatedAt, token, tail score}, then member_player of it.
var parseHarness = redis.NewScript(commonLua + prologue + `
local function parse_rec_v1(v)
  if type(v) ~= 'string' then return nil end
  local c = sfind(v, ':', 11, true)
  local digits = ssub(v, 11, (c or 0) - 1)
  local ts = tonum(ssub(v, 1, 10))
  if not ts or #digits == 0 or #digits > 19 or sfind(v, '[^0-9]', 1) ~= (c or nil) then return nil end
  local tok
  if #digits <= 15 then
    tok = token_small(tonum(digits))
  else
    local hi, lo = 0, 0
    for i = 1, #digits do
      local x = lo * 10 + sbyte(digits, i) - 48
      lo = x % LO
      hi = hi * 10 + (x - lo) / LO
    end
    tok = token(hi, lo)
  end
  if c then return ts, tok, tonum(ssub(v, c + 1)) end
  return ts, tok, nil
end
local function show(ts, tok, tx)
  if not ts then return { '0', '', '', '' } end
  local x = 'nil'
  if tx then x = fmt(tx) end
  return { '1', fmt(ts), tok, x }
end
return { show(parse_rec(ARGV[1])), show(parse_rec_v1(ARGV[1])), member_player(ARGV[1]) }
`)

// recordPattern is what a record is (make_rec): updatedAt in 10 digits, the arrival number in 1 to 19, and for
// a tail player ':' and anything after it.
var recordPattern = regexp.MustCompile(`(?s)^([0-9]{10})([0-9]{1,19})(:.*)?$`)

// FuzzParseRecord: parse_rec reads any string as the reference reading does (parseHarness), and takes exactly the
// strings of recordPattern as records, with the updatedAt and the arrival number's token they spell; Go's
// parseRecord reads them as parse_rec does, and Go's memberPlayer reads any string as member_player does.
func FuzzParseRecord(f *testing.F) {
	for _, s := range []string{"", "1764601234", "17646012341", "17646012341:5", "17646012341:", "1764601234:1",
		"17646012341x", "1764601234123456789012345678", "17646012341234567890123456789", "176460123412345678901:-1e300",
		"1764601234999999999999999", "17646012349999999999999999", "1764601234 1", "176460123a1", "17646012341:0x10",
		"０1764601234",
		"2", "1", "21x", "Babcdefghijkl", "Cplayer", "0p", "-p", "\xff"} { // the last ones: members
		f.Add(s)
	}
	rdb := redistest.SharedStandalone(f).Client(f)
	f.Fuzz(func(t *testing.T, v string) {
		res, err := parseHarness.Run(context.Background(), rdb, declared([]string{"t:{x}:"}), v).Slice()
		if err != nil {
			t.Fatal(err)
		}
		got, ref := fmt.Sprint(res[0]), fmt.Sprint(res[1])
		if got != ref {
			t.Fatalf("parse_rec(%q) = %s, the reference reading %s", v, got, ref)
		}
		if mp := memberPlayer(v); res[2] != mp { // Go's reading of a sorted-set member (the aroundMe plain read)
			t.Fatalf("member_player(%q) = %q, memberPlayer %q", v, res[2], mp)
		}
		row := res[0].([]any)
		// Go's reading (the read without a script) takes what parse_rec takes, alike, but for arrival numbers
		// of 2^63 and more, which no script writes and which it leaves to the script.
		gts, gn, gtail, gok := parseRecord(v)
		if m := recordPattern.FindStringSubmatch(v); m != nil {
			if n, err := strconv.ParseUint(m[2], 10, 64); err == nil && n >= 1<<63 {
				if gok {
					t.Fatalf("parseRecord(%q) read an arrival number of 2^63 or more: %d", v, gn)
				}
				return
			}
		}
		if gok != (row[0] == "1") {
			t.Fatalf("parseRecord(%q) took it as a record: %v; parse_rec: %v", v, gok, row[0] == "1")
		}
		// A ':' makes it a tail record for Go, which leaves those to the script: parse_rec reads an unreadable
		// tail score as none.
		if gok && (row[1] != strconv.FormatInt(gts, 10) || row[2] != arrivalToken(gn) ||
			gtail != strings.Contains(v, ":") || (row[3] != "nil" && !gtail)) {
			t.Fatalf("parseRecord(%q) = %d, %d (token %q), tail %v; parse_rec %v", v, gts, gn, arrivalToken(gn), gtail, row)
		}
		m := recordPattern.FindStringSubmatch(v)
		if (row[0] == "1") != (m != nil) {
			t.Fatalf("parse_rec(%q) took it as a record: %v; the pattern: %v", v, row[0] == "1", m != nil)
		}
		if m == nil {
			return
		}
		ts, _ := strconv.ParseInt(m[1], 10, 64)
		n, err := strconv.ParseUint(m[2], 10, 64)
		if err != nil {
			t.Fatalf("arrival number %q: %v", m[2], err) // 19 digits fit in a uint64
		}
		if row[1] != strconv.FormatInt(ts, 10) || row[2] != arrivalToken(n) {
			t.Fatalf("parse_rec(%q) = updatedAt %v, token %v; want %d, %q", v, row[1], row[2], ts, arrivalToken(n))
		}
	})
}

func TestTokenDigits(t *testing.T) {
	for n, want := range map[uint64]string{0: "10", 61: "1z", 62: "210", 1<<63 - 1: fmt.Sprintf("B%s", "AzL8n0Y58m7")} {
		if got := arrivalToken(n); got != want {
			t.Fatalf("arrivalToken(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestPeriodFixture: the period-key rules that the dashboard's JavaScript also follows (web/board.test.mjs reads
// the same file): the keys of the periods before a period, newest first, in any time zone.
func TestPeriodFixture(t *testing.T) {
	data, err := os.ReadFile("testdata/periods.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Name     string   `json:"name"`
		Window   Window   `json:"window"`
		Current  string   `json:"current"`
		Previous []string `json:"previous"`
	}
	if err := json.Unmarshal(data, &cases); err != nil || len(cases) == 0 {
		t.Fatalf("periods.json: %v (%d cases)", err, len(cases))
	}
	for _, zone := range []string{"UTC", "America/Santiago", "Pacific/Chatham"} {
		loc, _ := time.LoadLocation(zone)
		for _, c := range cases {
			start, err := ParsePeriod(c.Window, c.Current, loc)
			if err != nil {
				t.Fatalf("%s: %v", c.Name, err)
			}
			var got []string
			if c.Window != AllTime {
				for i := 1; i <= len(c.Previous); i++ {
					got = append(got, periodKey(c.Window, nextStart(c.Window, start, -i)))
				}
			}
			if strings.Join(got, ",") != strings.Join(c.Previous, ",") {
				t.Fatalf("%s in %s: %v, want %v", c.Name, zone, got, c.Previous)
			}
		}
	}
}

// Servers of two versions sharing one Redis (a rolling deploy) each call their own code: the library's name
// carries a hash of everything in it, so loading one never replaces the other.
func TestLibraryVersionsSideBySide(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := redistest.Standalone(t).Client(t)
	changed := newScript("top", "return 'other version'", true)
	other := newLibrary(submitScript, removeScript, changed, ranksScript, aroundScript, createScript)
	if other.name == library.name || !strings.HasPrefix(library.name, "lb_") || len(library.name) != 3+16 {
		t.Fatalf("library names %q and %q", library.name, other.name)
	}
	old := newFunctions(c, other)
	s := New(c, Config{})
	if _, err := s.CreateBoard(ctx, Board{ID: "v"}); err != nil {
		t.Fatal(err)
	}
	if got, err := old.run(ctx, changed, []string{s.keyBase("v")}).Text(); err != nil || got != "other version" {
		t.Fatalf("the other version's top: %q %v", got, err)
	}
	if _, err := s.Submit(ctx, Submission{Board: "v", Player: "p", Score: 5}); err != nil {
		t.Fatal(err)
	}
	page, err := s.Top(ctx, View{Board: "v"}, 0, 10)
	if err != nil || len(page.Entries) != 1 || page.Entries[0].PlayerID != "p" || page.Entries[0].Score != 5 {
		t.Fatalf("this version's top after both loaded: %+v %v", page, err)
	}
	if got, err := old.run(ctx, changed, []string{s.keyBase("v")}).Text(); err != nil || got != "other version" {
		t.Fatalf("the other version's top after this one loaded: %q %v", got, err)
	}
	libs, err := c.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: "lb_*"}).Result()
	if err != nil || len(libs) != 2 {
		t.Fatalf("libraries %+v %v", libs, err)
	}
}
