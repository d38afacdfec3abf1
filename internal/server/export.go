package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/graph"
	"github.com/leaderboard/leaderboard/graph/model"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// ExportPage is how many rows an export reads from Redis at a time (one read of ranks offset+1 ..
// offset+ExportPage of its snapshot, leaderboard.MaxFirst); only one page is held in memory, whatever the size of
// the period.
const ExportPage = leaderboard.MaxFirst

const (
	// exportSnapshotTimeout bounds the copy an export starts with (leaderboard.Snapshot): a script that holds
	// Redis for seconds for a million players of the period (see the README's export section).
	exportSnapshotTimeout = 30 * time.Second
	// exportRetryAfter is the Retry-After of an export refused because its address or the server has as many
	// running as it may.
	exportRetryAfter = 10 * time.Second
)

// exportColumns are the fields of an exported row, the fields of a GraphQL Entry, in this order (the CSV header).
var exportColumns = []string{"playerId", "displayName", "rank", "tieRank", "approximate", "score", "topPercent",
	"updatedAt", "metadata"}

// exports are the exports a server runs at once, and their handler (ServeHTTP): EXPORT_CONCURRENCY of them,
// each on the store and Redis client of exports (newExports), whose timeout lets the snapshot script run for
// seconds without the API's pool or socket timeout being the one that allows it. The copies exports start with
// are the part that holds Redis (every other client waits meanwhile): one at a time, and after one that took d
// the next starts no sooner than exportCopySpacing * d later, so that exports aborted and started again and
// again cannot keep Redis busy. An export waits up to exportCopyWait for its turn; beyond that it is refused.
type exports struct {
	exportsConfig
	store *leaderboard.Store
	rdb   redis.UniversalClient
	slots chan struct{}
	turn  chan struct{}    // the copy's turn: one holder
	now   func() time.Time // time.Now; tests set it

	mu       sync.Mutex
	nextCopy time.Time // no copy starts before
}

// exportsConfig is what the exports take from the server that serves them (New).
type exportsConfig struct {
	Max             int                // EXPORT_CONCURRENCY: exports at once (0: none)
	Store           leaderboard.Config // of the exports' own store, on their own client
	Resolver        *leaderboard.Store // the API's store: it names the board, window and period of a request
	ReadKeyRequired bool               // an export needs a read key (API_KEYS)
	ClientAddr      func(*http.Request) string
	Streams         exportStreams // the address's shares of long-lived responses (MAX_CONNS_PER_ADDR)
	Log             *slog.Logger
	WriteTimeout    time.Duration // bounds the write of each page (0: none)
	RequestTimeout  time.Duration // bounds the read of each page (0: none)
}

// exportStreams is what an export asks of the server's long-lived responses (gqlstream.Streams): a share of its
// client's address, and a cancel that shutdown calls (see Streams.Reserve).
type exportStreams interface {
	Reserve(w http.ResponseWriter, addr string, cancel *context.CancelFunc) bool
	Release(addr string, cancel *context.CancelFunc)
}

const (
	// exportCopySpacing: copies hold Redis at most 1 / (1 + exportCopySpacing) of the time (a tenth).
	exportCopySpacing = 9
	// exportCopyWait is the longest an export waits for its copy's turn.
	exportCopyWait = 10 * time.Second
)

// newExports makes the exports of a server over Redis options o: cfg.Max at once, a pool of two connections
// each (the pages, and the renewal of the snapshot's TTL).
func newExports(o *redis.UniversalOptions, cfg exportsConfig) *exports {
	rdb := newRedisClient(o, 2*cfg.Max+1, exportSnapshotTimeout)
	return &exports{exportsConfig: cfg, store: leaderboard.New(rdb, cfg.Store), rdb: rdb,
		slots: make(chan struct{}, cfg.Max), turn: make(chan struct{}, 1), now: time.Now}
}

// acquire takes one of the slots without waiting, or reports that all are taken.
func (e *exports) acquire() bool {
	select {
	case e.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

func (e *exports) release() { <-e.slots }

// beginCopy waits for a copy's turn, at most exportCopyWait. When it gets it, the copy ends with endCopy(start);
// otherwise retry says when to ask again.
func (e *exports) beginCopy(ctx context.Context) (start time.Time, retry time.Duration) {
	t := time.NewTimer(exportCopyWait)
	defer t.Stop()
	select {
	case e.turn <- struct{}{}:
	case <-t.C:
		return time.Time{}, exportCopyWait
	case <-ctx.Done():
		return time.Time{}, exportCopyWait
	}
	e.mu.Lock()
	wait := e.nextCopy.Sub(e.now())
	e.mu.Unlock()
	if wait > exportCopyWait {
		<-e.turn
		return time.Time{}, wait
	}
	if wait > 0 {
		t.Reset(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			<-e.turn
			return time.Time{}, exportCopyWait
		}
	}
	return e.now(), 0
}

func (e *exports) endCopy(start time.Time) {
	e.mu.Lock()
	end := e.now()
	e.nextCopy = end.Add(exportCopySpacing * end.Sub(start))
	e.mu.Unlock()
	<-e.turn
}

// ServeHTTP serves GET /export/<board>?window=&period=&format=csv|ndjson: every row that paging `top` returns for the
// window period (defaults as in GraphQL: the board's first window, its current period) at one moment, in rank
// order, each field rendered as GraphQL renders it. CSV (the default) has a header row and neutralises text
// cells that a spreadsheet would run as formulas (csvText); NDJSON is one JSON object per line. The export copies
// the period's standings first (leaderboard.Snapshot) and streams the copy page by page, so players who move
// meanwhile are still listed once each, as they stood. An export counts against MAX_CONNS_PER_ADDR like an event
// stream, and at most EXPORT_CONCURRENCY run at once. Errors before the first row are a JSON body {"errors":
// [{message, extensions.code}]}: 400 BAD_USER_INPUT, 401 UNAUTHENTICATED, 404 NOT_FOUND, 429 RATE_LIMITED (this
// address's share, Retry-After), 503 RATE_LIMITED (every export slot taken, or the copy's turn too far off;
// Retry-After), 503 UNAVAILABLE, 500
// INTERNAL; a failure while streaming aborts the response (the client sees it cut, never a shorter valid file).
func (e *exports) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		exportError(w, http.StatusMethodNotAllowed, leaderboard.Invalid, "use GET")
		return
	}
	if e.ReadKeyRequired {
		p := graph.PrincipalFrom(r.Context())
		switch {
		case !p.Presented:
			exportError(w, http.StatusUnauthorized, graph.Unauthenticated,
				"an API key is required: send Authorization: Bearer <key>")
			return
		case p.Roles == 0:
			exportError(w, http.StatusUnauthorized, graph.Unauthenticated, "unknown API key")
			return
		case !p.Has(graph.RoleRead):
			exportError(w, http.StatusForbidden, graph.Forbidden, "this API key may not do that")
			return
		}
	}
	q := r.URL.Query()
	format := q.Get("format")
	if format == "" {
		format = "csv"
	}
	if format != "csv" && format != "ndjson" {
		exportError(w, http.StatusBadRequest, leaderboard.Invalid, "format must be csv or ndjson")
		return
	}
	v := leaderboard.View{Board: strings.TrimPrefix(r.URL.Path, "/export/"), Period: q.Get("period")}
	if win := q.Get("window"); win != "" {
		if !model.Window(win).IsValid() {
			exportError(w, http.StatusBadRequest, leaderboard.Invalid, "window must be one of ALL_TIME, DAILY, WEEKLY, MONTHLY, SEASON")
			return
		}
		v.Window = leaderboard.Window(win)
	}
	if v.Board == "" {
		exportError(w, http.StatusNotFound, leaderboard.NotFound, "no leaderboard id in the path: /export/<board>")
		return
	}
	res, err := e.Resolver.Resolve(r.Context(), v)
	if err != nil {
		exportError(w, exportStatus(leaderboard.ErrorCode(err)), leaderboard.ErrorCode(err), leaderboard.ErrorMessage(err))
		return
	}
	v = leaderboard.View{Board: res.Board.ID, Window: res.Window, Period: res.Period} // a rollover does not move it
	name := strings.Map(func(c rune) rune {
		if c < 0x20 || c >= 0x7f || strings.ContainsRune(`"\/;`, c) {
			return '_'
		}
		return c
	}, v.Board+"-"+string(v.Window)+"-"+v.Period)
	if r.Method == http.MethodHead { // the headers a GET would get, without its copy
		exportHeaders(w, format, name)
		w.WriteHeader(http.StatusOK)
		return
	}

	// An export is a long-lived stream: it takes a share of its address (MAX_CONNS_PER_ADDR, as websockets and
	// event streams do; shutdown ends it), then one of the server's export slots.
	addr := e.ClientAddr(r)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	retryAfter(w, exportRetryAfter) // for Reserve's refusals; an export that starts drops it
	if !e.Streams.Reserve(w, addr, &cancel) {
		return
	}
	defer e.Streams.Release(addr, &cancel)
	if !e.acquire() {
		exportError(w, http.StatusServiceUnavailable, leaderboard.RateLimited,
			"too many exports are running on this server; retry later")
		return
	}
	defer e.release()
	start, wait := e.beginCopy(ctx)
	if wait > 0 {
		retryAfter(w, wait)
		exportError(w, http.StatusServiceUnavailable, leaderboard.RateLimited,
			"this server is copying standings for another export, or has just done so; retry later")
		return
	}
	w.Header().Del("Retry-After")
	snapCtx, snapCancel := context.WithTimeout(ctx, exportSnapshotTimeout)
	snap, err := e.store.Snapshot(snapCtx, v)
	snapCancel()
	e.endCopy(start)
	if err != nil {
		if ctx.Err() == nil && leaderboard.ErrorCode(err) == leaderboard.Internal {
			e.Log.Error("export: copying the standings failed", "board", v.Board, "err", err)
		}
		exportError(w, exportStatus(leaderboard.ErrorCode(err)), leaderboard.ErrorCode(err), leaderboard.ErrorMessage(err))
		return
	}
	defer func() { // also when the client went away, or a page failed (panic)
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := snap.Close(closeCtx); err != nil {
			e.Log.Warn("export: deleting its snapshot failed; its keys expire by themselves", "board", v.Board,
				"err", err)
		}
	}()
	exportHeaders(w, format, name)
	w.WriteHeader(http.StatusOK)
	// The server's write timeout bounds each page, not the whole export (which may take minutes): a reader that
	// stalls for WRITE_TIMEOUT is cut off, and never holds more than a page of the server's memory.
	rc := http.NewResponseController(w)
	var buf bytes.Buffer
	if format == "csv" {
		buf.WriteString(strings.Join(exportColumns, ",") + "\n")
	}
	for offset := int64(0); ; {
		if offset >= snap.Rows {
			if buf.Len() > 0 { // an empty period: the header alone
				_, _ = w.Write(buf.Bytes())
			}
			return
		}
		n := int(min(ExportPage, snap.Rows-offset))
		page, err := e.page(ctx, snap, int(offset), n)
		if err == nil && len(page.Entries) != n {
			err = fmt.Errorf("page at offset %d has %d rows of %d", offset, len(page.Entries), n)
		}
		if err != nil {
			if ctx.Err() == nil {
				e.Log.Warn("export: reading a page failed; response aborted", "board", v.Board, "offset", offset,
					"err", err)
			}
			panic(http.ErrAbortHandler) // a cut response, never one that looks complete
		}
		for i := range page.Entries {
			if format == "csv" {
				writeCSV(&buf, &page.Entries[i])
			} else {
				writeNDJSON(&buf, &page.Entries[i])
			}
		}
		if e.WriteTimeout > 0 {
			_ = rc.SetWriteDeadline(time.Now().Add(e.WriteTimeout))
		}
		if _, err := w.Write(buf.Bytes()); err != nil {
			return // the client went away
		}
		buf.Reset()
		_ = rc.Flush()
		offset += int64(n)
	}
}

// retryAfter sets the Retry-After header to d, in whole seconds rounded up.
func retryAfter(w http.ResponseWriter, d time.Duration) {
	w.Header().Set("Retry-After", strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10))
}

// exportHeaders sets the headers of an export's 200 answer: its type and file name.
func exportHeaders(w http.ResponseWriter, format, name string) {
	if format == "csv" {
		w.Header().Set("Content-Type", "text/csv; charset=utf-8")
		name += ".csv"
	} else {
		w.Header().Set("Content-Type", "application/x-ndjson")
		name += ".ndjson"
	}
	w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
	w.Header().Set("Cache-Control", "no-store")
}

// page reads ranks offset+1 .. offset+n of a snapshot, within REQUEST_TIMEOUT.
func (e *exports) page(ctx context.Context, snap *leaderboard.Snapshot, offset, n int) (*leaderboard.Page, error) {
	if e.RequestTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.RequestTimeout)
		defer cancel()
	}
	return snap.Page(ctx, offset, n)
}

// gqlText renders a value with gqlgen's marshaler, as a GraphQL response shows it.
func gqlText(m graphql.Marshaler) string {
	var b bytes.Buffer
	m.MarshalGQL(&b)
	return b.String()
}

// writeCSV writes e as one CSV record: GraphQL's renderings, an empty field for null, metadata as JSON. The text
// columns (playerId, displayName, metadata) go through csvText; the others are numbers, booleans and times as
// GraphQL renders them, which need no quotes (a negative score stays a number).
func writeCSV(b *bytes.Buffer, e *leaderboard.Entry) {
	csvText(b, e.PlayerID)
	b.WriteByte(',')
	if e.DisplayName != nil {
		csvText(b, *e.DisplayName)
	}
	b.WriteByte(',')
	b.WriteString(strconv.FormatInt(e.Rank, 10))
	b.WriteByte(',')
	b.WriteString(strconv.FormatInt(e.TieRank, 10))
	b.WriteByte(',')
	b.WriteString(strconv.FormatBool(e.Approximate))
	b.WriteByte(',')
	model.MarshalFloat(e.Score).MarshalGQL(b)
	b.WriteByte(',')
	model.MarshalFloat(e.TopPercent).MarshalGQL(b)
	b.WriteByte(',')
	t, _ := strconv.Unquote(gqlText(graphql.MarshalTime(e.UpdatedAt)))
	b.WriteString(t)
	b.WriteByte(',')
	if e.Metadata != nil {
		csvText(b, gqlText(model.MarshalJSON(e.Metadata)))
	}
	b.WriteByte('\n')
}

// csvFormulaStart are the first characters that make a spreadsheet read a cell as a formula (OWASP, CSV
// injection): = + - @, tab and carriage return.
const csvFormulaStart = "=+-@\t\r"

// csvText writes a text cell always quoted (quotes doubled), and, when it starts with one of csvFormulaStart,
// with a single quote before the text, so that a spreadsheet shows it as text instead of running it
// (=HYPERLINK(...), +SUM(...), @cmd). The file then differs from the stored text by that quote; NDJSON keeps the
// text exactly.
func csvText(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	if s != "" && strings.IndexByte(csvFormulaStart, s[0]) >= 0 {
		b.WriteByte('\'')
	}
	b.WriteString(strings.ReplaceAll(s, `"`, `""`))
	b.WriteByte('"')
}

// writeNDJSON writes e as one JSON object and a newline, each field as in a GraphQL response.
func writeNDJSON(b *bytes.Buffer, e *leaderboard.Entry) {
	id, _ := json.Marshal(e.PlayerID)
	b.WriteString(`{"playerId":`)
	b.Write(id)
	b.WriteString(`,"displayName":`)
	if e.DisplayName != nil {
		name, _ := json.Marshal(*e.DisplayName)
		b.Write(name)
	} else {
		b.WriteString("null")
	}
	b.WriteString(`,"rank":`)
	b.WriteString(strconv.FormatInt(e.Rank, 10))
	b.WriteString(`,"tieRank":`)
	b.WriteString(strconv.FormatInt(e.TieRank, 10))
	b.WriteString(`,"approximate":`)
	b.WriteString(strconv.FormatBool(e.Approximate))
	b.WriteString(`,"score":`)
	model.MarshalFloat(e.Score).MarshalGQL(b)
	b.WriteString(`,"topPercent":`)
	model.MarshalFloat(e.TopPercent).MarshalGQL(b)
	b.WriteString(`,"updatedAt":`)
	graphql.MarshalTime(e.UpdatedAt).MarshalGQL(b)
	b.WriteString(`,"metadata":`)
	if e.Metadata != nil {
		model.MarshalJSON(e.Metadata).MarshalGQL(b)
	} else {
		b.WriteString("null")
	}
	b.WriteString("}\n")
}

// exportStatus is the HTTP status of an export refused with code.
func exportStatus(code leaderboard.Code) int {
	switch code {
	case leaderboard.Invalid:
		return http.StatusBadRequest
	case leaderboard.NotFound:
		return http.StatusNotFound
	case leaderboard.RateLimited:
		return http.StatusTooManyRequests
	case leaderboard.Unavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// exportError writes a GraphQL-shaped error body.
func exportError(w http.ResponseWriter, status int, code leaderboard.Code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"errors": []map[string]any{
		{"message": msg, "extensions": map[string]any{"code": string(code)}}}})
}
