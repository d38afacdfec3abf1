package server

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/99designs/gqlgen/graphql"

	"github.com/leaderboard/leaderboard/graph"
	"github.com/leaderboard/leaderboard/graph/model"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// ExportPage is how many rows an export reads from Redis at a time (one top read of ranks offset+1 ..
// offset+ExportPage, leaderboard.MaxFirst); only one page is held in memory, whatever the size of the period.
const ExportPage = leaderboard.MaxFirst

// exportColumns are the fields of an exported row, the fields of a GraphQL Entry, in this order (the CSV header).
var exportColumns = []string{"playerId", "displayName", "rank", "tieRank", "approximate", "score", "topPercent",
	"updatedAt", "metadata"}

// export serves GET /export/<board>?window=&period=&format=csv|ndjson: every row that paging `top` returns for the
// window period (defaults as in GraphQL: the board's first window, its current period), in rank order, each field
// rendered as GraphQL renders it. CSV (the default) has a header row; NDJSON is one JSON object per line. The rows
// are streamed page by page. Errors before the first row are a JSON body {"errors": [{message, extensions.code}]}:
// 400 BAD_USER_INPUT, 401 UNAUTHENTICATED, 404 NOT_FOUND, 429 RATE_LIMITED, 503 UNAVAILABLE, 500 INTERNAL; a
// failure while streaming aborts the response (the client sees it cut, never a shorter valid file).
func (a *App) export(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		exportError(w, http.StatusMethodNotAllowed, leaderboard.Invalid, "use GET")
		return
	}
	if a.Keys.ReadKeyRequired {
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
	ctx := r.Context()
	res, err := a.Store.Resolve(ctx, v)
	var page *leaderboard.Page
	if err == nil {
		v = leaderboard.View{Board: res.Board.ID, Window: res.Window, Period: res.Period} // a rollover does not move it
		page, err = a.exportPage(ctx, v, 0)
	}
	if err != nil {
		exportError(w, exportStatus(leaderboard.ErrorCode(err)), leaderboard.ErrorCode(err), leaderboard.ErrorMessage(err))
		return
	}
	name := strings.Map(func(c rune) rune {
		if c < 0x20 || c >= 0x7f || strings.ContainsRune(`"\/;`, c) {
			return '_'
		}
		return c
	}, v.Board+"-"+string(v.Window)+"-"+v.Period)
	if format == "csv" {
		w.Header().Set("Content-Type", "text/csv; charset=utf-8")
		name += ".csv"
	} else {
		w.Header().Set("Content-Type", "application/x-ndjson")
		name += ".ndjson"
	}
	w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	// The server's write timeout bounds each page, not the whole export (which may take minutes): a reader that
	// stalls for WRITE_TIMEOUT is still cut off.
	rc := http.NewResponseController(w)
	var buf bytes.Buffer
	cw := csv.NewWriter(&buf)
	if format == "csv" {
		_ = cw.Write(exportColumns)
	}
	row := make([]string, len(exportColumns))
	for offset := 0; ; {
		for i := range page.Entries {
			e := &page.Entries[i]
			if format == "csv" {
				exportRow(e, row)
				_ = cw.Write(row)
			} else {
				writeNDJSON(&buf, e)
			}
		}
		cw.Flush()
		if a.cfg.WriteTimeout > 0 {
			_ = rc.SetWriteDeadline(time.Now().Add(a.cfg.WriteTimeout))
		}
		if _, err := w.Write(buf.Bytes()); err != nil {
			return // the client went away
		}
		buf.Reset()
		_ = rc.Flush()
		offset += len(page.Entries)
		if len(page.Entries) < ExportPage || offset >= int(page.Size) {
			return
		}
		if page, err = a.exportPage(ctx, v, offset); err != nil {
			if ctx.Err() == nil {
				a.log.Warn("export: reading a page failed; response aborted", "board", v.Board, "offset", offset,
					"err", err)
			}
			panic(http.ErrAbortHandler) // a cut response, never one that looks complete
		}
	}
}

// exportPage reads ranks offset+1 .. offset+ExportPage of v, within REQUEST_TIMEOUT.
func (a *App) exportPage(ctx context.Context, v leaderboard.View, offset int) (*leaderboard.Page, error) {
	if a.cfg.RequestTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, a.cfg.RequestTimeout)
		defer cancel()
	}
	return a.Store.Top(ctx, v, offset, ExportPage)
}

// gqlText renders a value with gqlgen's marshaler, as a GraphQL response shows it.
func gqlText(m graphql.Marshaler) string {
	var b bytes.Buffer
	m.MarshalGQL(&b)
	return b.String()
}

// exportRow fills row with the CSV fields of e: GraphQL's renderings, an empty field for null, metadata as JSON.
func exportRow(e *leaderboard.Entry, row []string) {
	row[0] = e.PlayerID
	row[1] = ""
	if e.DisplayName != nil {
		row[1] = *e.DisplayName
	}
	row[2] = strconv.FormatInt(e.Rank, 10)
	row[3] = strconv.FormatInt(e.TieRank, 10)
	row[4] = strconv.FormatBool(e.Approximate)
	row[5] = gqlText(model.MarshalFloat(e.Score))
	row[6] = gqlText(model.MarshalFloat(e.TopPercent))
	row[7], _ = strconv.Unquote(gqlText(graphql.MarshalTime(e.UpdatedAt)))
	row[8] = ""
	if e.Metadata != nil {
		row[8] = gqlText(model.MarshalJSON(e.Metadata))
	}
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
