package server

// The dashboard end to end: the real server (App) on a real Redis, the page in headless Chromium (Debian's
// chromium package, driven with chromedp). Chromium is required: when it is missing the test fails with an
// install hint; CI (.ci/run) installs it.
//
// Screenshots are saved as artifacts to $DASHBOARD_ARTIFACTS, or to $TMPDIR/leaderboard-dashboard when unset
// (the test log prints the directory): dashboard.png (desktop), dashboard-tv.png (?tv=1, 1920x1080) and
// dashboard-phone.png (390x844).

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// chromiumPath returns the browser the test drives, or fails the test: it is never skipped.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("the dashboard test needs headless Chromium at /usr/bin/chromium: apt-get install -y chromium " +
		"(.ci/run installs it)")
	return ""
}

// newBrowser starts a fresh headless Chromium for the test, with the extra options, and returns a tab's context.
func newBrowser(t *testing.T, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		// The machine may have no internet: without these Chromium stalls on its own background requests.
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1000),
	)
	opts = append(opts, extra...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelTab(); cancelAlloc() })
	start := time.Now()
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	t.Logf("Chromium started in %s", time.Since(start).Round(time.Millisecond))
	return ctx
}

// artifactDir returns where screenshots go (see the file comment).
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("DASHBOARD_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "leaderboard-dashboard")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// page wraps a browser tab with the checks the test needs.
type page struct {
	t   *testing.T
	ctx context.Context
}

func (p page) run(actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		p.t.Fatalf("browser: %v", err)
	}
}

// value runs an action that returns a value.
func value[T any](p page, a chromedp.Action[T]) T {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		p.t.Fatalf("browser: %v", err)
	}
	return v
}

// eval evaluates a JavaScript expression (awaiting a promise) and decodes its value into out.
func (p page) eval(js string, out any) {
	p.t.Helper()
	raw := value(p, chromedp.Evaluate[[]byte](js, chromedp.EvalAwaitPromise))
	if out == nil {
		return
	}
	if err := json.Unmarshal(raw, out); err != nil {
		p.t.Fatalf("decoding %s: %v", raw, err)
	}
}

// rows returns the player ids of the top list as shown, in order.
func (p page) rows() []string {
	var ids []string
	p.eval(`[...document.querySelectorAll("#rows tr")].map(r => r.dataset.player)`, &ids)
	return ids
}

// waitFor polls cond until it holds or d passes, and returns how long it took.
func (p page) waitFor(d time.Duration, what string, cond func() bool) time.Duration {
	p.t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			p.t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(15 * time.Millisecond)
	}
	return time.Since(start)
}

// waitRows waits until the list shows want (player ids in order) and returns how long that took.
func (p page) waitRows(d time.Duration, want []string) time.Duration {
	p.t.Helper()
	var got []string
	start := time.Now()
	for {
		got = p.rows()
		if slices.Equal(got, want) {
			return time.Since(start)
		}
		if time.Since(start) > d {
			p.t.Fatalf("the table shows %v, want %v within %s", got, want, d)
		}
		time.Sleep(15 * time.Millisecond)
	}
}

func (p page) text(sel string) string {
	var s string
	p.eval(`document.querySelector(`+strconv.Quote(sel)+`)?.textContent ?? ""`, &s)
	return strings.TrimSpace(s)
}

func (p page) screenshot(name string) {
	p.t.Helper()
	p.run(chromedp.Sleep(800 * time.Millisecond)) // let the slides settle
	png := value(p, chromedp.FullScreenshot(100))
	path := filepath.Join(artifactDir(p.t), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.t.Fatal(err)
	}
	p.t.Logf("screenshot: %s", path)
}

// freeAddr returns a free 127.0.0.1 address, so the server can be restarted on the same port.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// dashServer wraps the test server with the board operations the test needs.
type dashServer struct{ *testServer }

func (s dashServer) mustDo(t *testing.T, key, query string, vars map[string]any) json.RawMessage {
	t.Helper()
	res := s.do(t, key, query, vars)
	if len(res.Errors) > 0 || res.Status != 200 {
		t.Fatalf("%s: status %d, errors %+v", query, res.Status, res.Errors)
	}
	return res.Data
}

// submit sets scores (player -> score) in one submitScores call.
func (s dashServer) submit(t *testing.T, board string, scores ...any) {
	t.Helper()
	var inputs []map[string]any
	for i := 0; i < len(scores); i += 2 {
		inputs = append(inputs, map[string]any{"board": board, "playerId": scores[i], "score": scores[i+1],
			"displayName": "Player " + strings.ToUpper(scores[i].(string))})
	}
	s.mustDo(t, testSubmitKey, `mutation($in: [ScoreInput!]!) { submitScores(inputs: $in) { updated } }`,
		map[string]any{"in": inputs})
}

// topIDs returns the player ids of the board's top list through the API.
func (s dashServer) topIDs(t *testing.T, board string) []string {
	t.Helper()
	var out struct{ Top []struct{ PlayerID string } }
	if err := json.Unmarshal(s.mustDo(t, "", `query($b: ID!) { top(board: $b, first: 10) { playerId } }`,
		map[string]any{"b": board}), &out); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range out.Top {
		ids = append(ids, e.PlayerID)
	}
	return ids
}

func TestDashboard(t *testing.T) {
	ctx := newBrowser(t)
	cfg := testConfig(t)
	cfg.ListenAddr = freeAddr(t)
	srv := dashServer{startServer(t, cfg)}
	const board = "dash"
	srv.mustDo(t, testAdminKey, `mutation { createLeaderboard(input: {id: "dash", title: "Dashboard test",
		windows: [ALL_TIME, DAILY]}) { id } }`, nil)
	srv.submit(t, board, "a", 50, "b", 40, "c", 30, "d", 20, "e", 10)

	p := page{t, ctx}
	p.run(chromedp.Navigate(srv.URL + "/?board=dash"))
	p.waitRows(10*time.Second, []string{"a", "b", "c", "d", "e"})
	p.waitFor(5*time.Second, "connection state Live", func() bool { return p.text("#conn-text") == "Live" })
	// Count what the ARIA live region says from here on: it must stay quiet while the list churns.
	p.eval(`window.__announcements = 0; new MutationObserver(() => window.__announcements++)
		.observe(document.getElementById("announce"), {childList: true, characterData: true, subtree: true}); 0`, nil)

	t.Run("diff table in the page", func(t *testing.T) {
		// The page's own module (the browser's JavaScript engine, not Node) rebuilds every case of the shared table.
		table, err := os.ReadFile("../../pubsub/testdata/diffs.json")
		if err != nil {
			t.Fatal(err)
		}
		var failures []string
		p.eval(`import("/board.js").then(({applyUpdate}) => {
			const rows = (l) => JSON.stringify(l.map(({playerId, rank, score}) => ({playerId, rank, score})));
			const out = [];
			const cases = `+string(table)+`;
			if (!cases.length) return ["no cases"];
			for (const c of cases) {
				let list = applyUpdate([], {snapshot: true, entries: c.snapshot}, c.first);
				for (const u of c.updates || []) list = applyUpdate(list, {snapshot: !!u.snapshot, entries: u.entries || [],
					removed: u.removed || []}, c.first);
				if (rows(list) !== rows(c.expected)) out.push(c.name + ": got " + rows(list));
			}
			return out;
		})`, &failures)
		if len(failures) > 0 {
			t.Errorf("board.js in Chromium: %v", failures)
		}
	})

	t.Run("live order within a second", func(t *testing.T) {
		// e jumps to the top, c passes b, f arrives on b's score (a tie: b got there first).
		srv.submit(t, board, "e", 100, "c", 45, "f", 40)
		want := srv.topIDs(t, board)
		if !slices.Equal(want, []string{"e", "a", "c", "b", "f", "d"}) {
			t.Fatalf("top through the API: %v", want)
		}
		took := p.waitRows(time.Second, want)
		t.Logf("the page showed the new order %s after the mutation returned", took.Round(time.Millisecond))
		var marks struct {
			Up, Down, Tie []string
			Entered       string
			TieTitle      string
		}
		p.eval(`({
			up: [...document.querySelectorAll("#rows tr")].filter(r => r.querySelector(".move .up")).map(r => r.dataset.player),
			down: [...document.querySelectorAll("#rows tr")].filter(r => r.querySelector(".move .down")).map(r => r.dataset.player),
			entered: [...document.querySelectorAll("#rows tr")].filter(r => r.querySelector(".move .new")).map(r => r.dataset.player).join(","),
			tie: [...document.querySelectorAll("#rows tr")].filter(r => r.querySelector(".tie")).map(r => r.dataset.player),
			tieTitle: document.querySelector("#rows .tie")?.title || "",
		})`, &marks)
		// e went 5 -> 1; a 1 -> 2, b 2 -> 4, d 4 -> 6; c stayed third.
		if !slices.Equal(marks.Up, []string{"e"}) || !slices.Equal(marks.Down, []string{"a", "b", "d"}) {
			t.Errorf("up arrows on %v, down arrows on %v; want e up, a, b and d down", marks.Up, marks.Down)
		}
		if marks.Entered != "f" {
			t.Errorf("NEW mark on %q, want f", marks.Entered)
		}
		if !slices.Equal(marks.Tie, []string{"f"}) || !strings.Contains(marks.TieTitle, "rank 4") {
			t.Errorf("tie marks on %v (%q), want f tied with rank 4", marks.Tie, marks.TieTitle)
		}
		if got := p.text("#fact-size"); got != "6" {
			t.Errorf("board facts: %q players, want 6", got)
		}
	})

	t.Run("keyboard", func(t *testing.T) {
		var active string
		p.run(chromedp.Focus(chromedp.CSS("#rows tr:first-child")), chromedp.KeyEvent(kb.ArrowDown),
			chromedp.KeyEvent(kb.ArrowDown))
		p.eval(`document.activeElement.dataset.player`, &active)
		if active != "c" {
			t.Errorf("two arrow-downs from the first row focus %q, want c (rank 3)", active)
		}
		p.run(chromedp.KeyEvent(kb.Enter))
		p.waitFor(2*time.Second, "Enter shows the focused player", func() bool {
			return p.text("#player-place") == "#3"
		})
	})

	t.Run("player panel", func(t *testing.T) {
		p.run(chromedp.SetValue(chromedp.CSS("#player-input"), "d"), chromedp.Click(chromedp.CSS("#player-form button")))
		p.waitFor(2*time.Second, "player d shown", func() bool {
			return p.text("#player-place") == "#6" && p.text("#player-score") == "20"
		})
		if name := p.text("#player-name"); name != "Player D (d)" {
			t.Errorf("player name %q", name)
		}
		var around []string
		p.eval(`[...document.querySelectorAll("#around-rows tr")].map(r => r.cells[1].textContent)`, &around)
		// radius 3, filled in at the edge: d is last, so six players show.
		if !slices.Equal(around, []string{"Player E", "Player A", "Player C", "Player B", "Player F", "Player D"}) {
			t.Errorf("around d: %v", around)
		}
		// rankUpdates moves the panel live, and d's row in the list is marked.
		srv.submit(t, board, "d", 75)
		took := p.waitFor(time.Second, "panel shows d's new rank", func() bool {
			return p.text("#player-place") == "#2" && p.text("#player-score") == "75"
		})
		t.Logf("the player panel showed the new rank %s after the mutation returned", took.Round(time.Millisecond))
		var me []string
		p.eval(`[...document.querySelectorAll("#rows tr.me")].map(r => r.dataset.player)`, &me)
		if !slices.Equal(me, []string{"d"}) {
			t.Errorf("rows marked as the followed player: %v", me)
		}
	})

	p.screenshot("dashboard.png")

	parent := t
	t.Run("reconnects after a restart", func(t *testing.T) {
		srv.Shutdown(t)
		srv.App.Close()
		p.waitFor(5*time.Second, "page notices the lost connection", func() bool {
			s := p.text("#conn-text")
			return strings.HasPrefix(s, "Reconnecting") || s == "Connecting…"
		})
		srv = dashServer{startServer(parent, cfg)} // same address, same Redis and key prefix
		srv.submit(t, board, "g", 500)
		want := srv.topIDs(t, board)
		if want[0] != "g" {
			t.Fatalf("top after restart: %v", want)
		}
		took := p.waitRows(20*time.Second, want)
		t.Logf("the page was back with the current list %s after the server restarted", took.Round(time.Millisecond))
		p.waitFor(2*time.Second, "connection state Live again", func() bool { return p.text("#conn-text") == "Live" })
		// The player panel resubscribed too.
		srv.submit(t, board, "d", 600)
		p.waitFor(2*time.Second, "panel live after the restart", func() bool { return p.text("#player-place") == "#1" })
	})

	t.Run("quiet live region", func(t *testing.T) {
		var n int
		var live, atomic string
		p.eval(`window.__announcements`, &n)
		p.eval(`document.getElementById("announce").getAttribute("aria-live")`, &live)
		// Four leader changes and a restart happened; the region speaks about the connection and (throttled)
		// about leaders only.
		p.eval(`document.getElementById("announce").getAttribute("aria-atomic")`, &atomic)
		if live != "polite" || atomic != "true" || n > 4 {
			t.Errorf("live region aria-live=%q aria-atomic=%q changed %d times, want polite, true and at most 4",
				live, atomic, n)
		}
		var structure struct{ Caption, RowHeaders, ColHeaders int }
		p.eval(`({caption: document.querySelectorAll("table#top-list > caption").length,
			rowHeaders: document.querySelectorAll("#rows th[scope=row]").length,
			colHeaders: document.querySelectorAll("#top-list thead th[scope=col]").length})`, &structure)
		if structure.Caption != 1 || structure.RowHeaders != len(p.rows()) || structure.ColHeaders != 5 {
			t.Errorf("table semantics: %+v", structure)
		}
	})

	t.Run("large type and phone", func(t *testing.T) {
		p.run(chromedp.EmulateViewport(1920, 1080), chromedp.Navigate(srv.URL+"/?board=dash&tv=1&player=d"))
		p.waitRows(10*time.Second, srv.topIDs(t, board))
		var fontPx float64
		p.eval(`parseFloat(getComputedStyle(document.querySelector("#rows td.score")).fontSize)`, &fontPx)
		if fontPx < 30 {
			t.Errorf("tv mode score font %.0fpx, want at least 30px on a 1920px screen", fontPx)
		}
		p.screenshot("dashboard-tv.png")

		p.run(chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile,
			chromedp.EmulateTouch), chromedp.Navigate(srv.URL+"/?board=dash"))
		p.waitRows(10*time.Second, srv.topIDs(t, board))
		var overflow bool
		p.eval(`document.documentElement.scrollWidth > window.innerWidth + 1`, &overflow)
		if overflow {
			t.Error("the page scrolls sideways on a 390px phone")
		}
		p.screenshot("dashboard-phone.png")
	})
}

// The dashboard opened under another name than localhost (a wall screen on the LAN, here wallscreen.test, which
// Chromium resolves to 127.0.0.1) gets no websocket while PUBLIC_ORIGIN does not name it: the page says so and
// what to set, and so does the server's log (once, however often the page retries). With PUBLIC_ORIGIN set (the
// server restarted on the same port) the page recovers by itself: live list, the notice gone. (It used to show an
// empty board and "Reconnecting in 1 s…" for ever, with nothing in the log.)
func TestDashboardSaysWhyItsOriginIsRefused(t *testing.T) {
	const host = "wallscreen.test"
	ctx := newBrowser(t, chromedp.Flag("host-resolver-rules", "MAP "+host+" 127.0.0.1"))
	cfg := testConfig(t)
	cfg.ListenAddr = freeAddr(t)
	var logged syncBuffer
	warnLog := slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv := dashServer{startServerLog(t, cfg, warnLog)}
	srv.mustDo(t, testAdminKey, `mutation { createLeaderboard(input: {id: "wall"}) { id } }`, nil)
	srv.submit(t, "wall", "a", 50)
	_, port, _ := net.SplitHostPort(cfg.ListenAddr)
	origin := "http://" + host + ":" + port

	p := page{t, ctx}
	p.run(chromedp.Navigate(origin + "/?board=wall"))
	p.waitFor(20*time.Second, "the page says why its websocket is refused", func() bool {
		var shown bool
		p.eval(`!document.getElementById("error").hidden`, &shown)
		return shown && strings.Contains(p.text("#error"), "PUBLIC_ORIGIN="+origin)
	})
	p.waitFor(5*time.Second, "the connection state names the refusal", func() bool {
		return strings.HasPrefix(p.text("#conn-text"), "Origin refused")
	})
	p.screenshot("dashboard-refused-origin.png")
	if lines := strings.Count(logged.String(), "websocket refused"); lines != 1 ||
		!strings.Contains(logged.String(), "PUBLIC_ORIGIN="+origin) {
		t.Errorf("the server's log has %d lines about the refused websocket, want 1 naming PUBLIC_ORIGIN=%s:\n%s",
			lines, origin, logged.String())
	}

	srv.Shutdown(t)
	srv.App.Close()
	cfg.PublicOrigins = []string{origin}
	startServer(t, cfg)                       // same address, same Redis and key prefix
	p.waitRows(30*time.Second, []string{"a"}) // the page's back-off is 15 s at most
	p.waitFor(5*time.Second, "Live, and the notice gone", func() bool {
		var hidden bool
		p.eval(`document.getElementById("error").hidden`, &hidden)
		return hidden && p.text("#conn-text") == "Live"
	})
}
