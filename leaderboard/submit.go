package leaderboard

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// Submission is one score for one player on one board.
type Submission struct {
	Board  string
	Player string
	// Score is the new score (BEST, LATEST) or the delta (SUM). Finite, magnitude at most 2^53.
	Score float64
	// EventID makes the submission idempotent: the same EventID on the same board is applied once and a retry
	// gets the first result back. Empty: no deduplication.
	EventID string
	// DisplayName and Metadata are stored with the player when not nil. Metadata is a JSON object of at most
	// 1 KiB.
	DisplayName *string
	Metadata    json.RawMessage
	// AchievedAt is when the score was achieved. Zero: now. Inside the board's grace window after a period
	// closed, the score still counts for the period it was achieved in.
	AchievedAt time.Time
}

// Result is the outcome of a submission in the board's first window, or in the first one written when no season
// took the score for a SEASON window before it (Window and Period say which).
type Result struct {
	Entry  Entry
	Window Window
	Period string
	// Entry.Rank, Entry.TopPercent and Size are 0 when Only left FieldRank out on a sharded board and the player
	// ranks below MaxFirst (see FieldRank).
	// PreviousRank is nil when the player had no score before, and when Only left FieldPreviousRank out and the
	// player ranked below LiveTop both before and after (an improvement on a BEST board: see FieldPreviousRank).
	PreviousRank  *int64
	PreviousScore *float64 // nil when the player had no score before
	Updated       bool     // false when the stored score did not change
	Duplicate     bool     // true when EventID was seen before: nothing was applied again
	Size          int64
	// EventEpoch and EventVersion name the change event the submission went out in (Store.Channel), when one
	// was published (version 0: none).
	EventEpoch   string
	EventVersion int64
}

// Outcome is the result or error of one item of SubmitMany.
type Outcome struct {
	Result *Result
	Err    error
}

// The submit script's header: 15 arguments (submit.lua), of which the 10th is the board's channel, the 12th the
// caller's clock (unix s), the 13th the number of items and the 15th the parts of the entries to fill (Fields).
const (
	submitHeaderArgs = 15
	submitPublishArg = 8
	submitChannelArg = 9
	submitNowArg     = 11
	submitCountArg   = 12
	submitFieldsArg  = 14
)

// submitFields are the parts of a result that cost a submission Redis work of their own: the others come with
// the write.
const submitFields = FieldTieRank | FieldMeta | FieldPreviousRank | FieldRank

// scriptFields is the submit script's fields argument: FieldRank is the Go side's (placeWritten), and left out so
// that requests that differ only in it share the batcher's merged calls.
func scriptFields(fields int) int { return fields &^ int(FieldRank) }

// Submit applies one submission atomically to every window of its board: one script call, one round trip.
// Only in opts leaves parts of the result's entry out (zero), as for reads, and the previous rank where it
// would cost a read of its own (FieldPreviousRank); a submission with an EventID fills them all, for its retries.
func (s *Store) Submit(ctx context.Context, sub Submission, opts ...ReadOption) (*Result, error) {
	out, err := s.SubmitMany(ctx, []Submission{sub}, opts...)
	if err != nil {
		return nil, err
	}
	return out[0].Result, out[0].Err
}

// SubmitMany applies up to MaxBulk submissions for any boards. Items of one board go to Redis in one script call
// (in input order); boards are written in parallel by at most Config.BulkWorkers workers. Each item succeeds or
// fails on its own; the outcomes are in input order. opts: as for Submit.
func (s *Store) SubmitMany(ctx context.Context, subs []Submission, opts ...ReadOption) ([]Outcome, error) {
	if len(subs) > MaxBulk {
		return nil, errorf(Invalid, "at most %d submissions per call, got %d", MaxBulk, len(subs))
	}
	fields := readArg(opts) & int(submitFields)
	if s.seq != nil {
		return s.submitLedgered(ctx, subs, fields), nil
	}
	out := make([]Outcome, len(subs))
	if len(subs) == 1 { // the common case, a single submission: nothing to group, no goroutine hop
		if err := checkID("board id", subs[0].Board); err != nil {
			out[0].Err = err
		} else {
			s.submitBoard(ctx, subs[0].Board, subs, onlyItem, fields, out)
		}
		return out, nil
	}
	groups := map[string][]int{}
	var order []string
	for i, sub := range subs {
		if err := checkID("board id", sub.Board); err != nil {
			out[i].Err = err
			continue
		}
		if _, ok := groups[sub.Board]; !ok {
			order = append(order, sub.Board)
		}
		groups[sub.Board] = append(groups[sub.Board], i)
	}
	if len(order) == 1 { // one board: no goroutine hop
		s.submitBoard(ctx, order[0], subs, groups[order[0]], fields, out)
		return out, nil
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, s.cfg.BulkWorkers)
	for _, board := range order {
		idx := groups[board]
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			s.submitBoard(ctx, board, subs, idx, fields, out)
		}()
	}
	wg.Wait()
	return out, nil
}

// onlyItem is the idx of a call of one submission (read only).
var onlyItem = []int{0}

// submitBoard validates the items idx of subs (all for one board) and applies the valid ones in one script call.
// fields: the submitFields to fill.
func (s *Store) submitBoard(ctx context.Context, board string, subs []Submission, idx []int, fields int, out []Outcome) {
	err := s.fresh(board, func() error {
		for _, i := range idx {
			out[i] = Outcome{}
		}
		return s.submitBoardOnce(ctx, board, subs, idx, fields, out)
	})
	if err != nil {
		for _, i := range idx {
			if out[i].Err == nil && out[i].Result == nil {
				out[i].Err = err
			}
		}
	}
}

// submitBoardOnce is one try of submitBoard. An error it returns applies to every item that has no outcome yet;
// nothing of those items was written.
func (s *Store) submitBoardOnce(ctx context.Context, board string, subs []Submission, idx []int, fields int,
	out []Outcome) error {
	v, err := s.loadBoard(ctx, board)
	if err != nil {
		return err
	}
	if v.b.Sharded() {
		return s.submitSharded(ctx, v, subs, idx, fields, out)
	}
	b := v.b
	now := s.cfg.Clock()
	args := make([]any, submitHeaderArgs, submitHeaderArgs+len(idx)*(submitItemArgs+2*len(b.Windows)))
	copy(args, v.submitHead)
	args[submitNowArg], args[submitFieldsArg] = now.Unix(), scriptFields(fields)
	// A single submission (the common case) keeps its bookkeeping on the stack.
	var sentBuf [1]int
	var periodBuf [1]string
	sent, firstPeriods := sentBuf[:0], periodBuf[:0]
	for _, i := range idx {
		var period string
		args, period, err = s.appendItem(args, b, subs[i], now, "")
		if err != nil {
			out[i].Err = err
			continue
		}
		sent = append(sent, i)
		firstPeriods = append(firstPeriods, period)
	}
	if len(sent) == 0 {
		return nil
	}
	args[submitCountArg] = len(sent)
	release, err := s.writes.acquire(ctx)
	if err != nil {
		return err
	}
	reply, err := s.run(ctx, submitScript, []string{v.keys}, args...).Slice()
	release()
	if err == nil && len(reply) != len(sent) {
		err = fmt.Errorf("submit script returned %d replies for %d items", len(reply), len(sent))
	}
	if err != nil {
		return redisError(err)
	}
	for k, i := range sent {
		out[i].Result, out[i].Err = parseSubmitReply(b, reply[k], firstPeriods[k], subs[i].Player)
		if out[i].Result == nil && out[i].Err == nil {
			out[i].Err = &Error{Code: Internal, Message: "internal error"}
		}
	}
	return nil
}

func (s *Store) publishArg() string {
	if s.cfg.PublishCommand == PublishNone {
		return ""
	}
	return s.cfg.PublishCommand
}

// submitItemArgs is the number of a submission's script arguments before its windows' (two per window);
// submitArrivalItemArg is the place of its arrival number among them (”: the period's own counter gives it; a
// sharded board's submissions carry the board's, shardwrite.go), submitClockItemArg the place of its clock (unix
// s; ”: the call's, submitNowArg; a recorded event carries its own, appendEvent).
const (
	submitItemArgs       = 11
	submitArrivalItemArg = 9
	submitClockItemArg   = 10
)

// appendItem validates one submission and appends its script arguments to args; it returns them and the period
// of the board's first window. On an error args is returned as it was.
// fp is the submission's fingerprint when the ledger recorded it ("": compute it).
func (s *Store) appendItem(args []any, b *Board, sub Submission, now time.Time, fp string) ([]any, string, error) {
	n := len(args)
	if err := checkID("player id", sub.Player); err != nil {
		return args[:n], "", err
	}
	if err := checkScore(sub.Score); err != nil {
		return args[:n], "", err
	}
	if b.Mode != Sum {
		if b.MinScore != nil && sub.Score < *b.MinScore || b.MaxScore != nil && sub.Score > *b.MaxScore {
			return args[:n], "", errorf(Invalid, "score %v is outside the board's range [%s, %s]", sub.Score,
				fmtBound(b.MinScore, "-inf"), fmtBound(b.MaxScore, "+inf"))
		}
	}
	if sub.EventID != "" {
		if err := checkID("eventId", sub.EventID); err != nil {
			return args[:n], "", err
		}
	}
	hasName, name := "0", ""
	if sub.DisplayName != nil {
		if len(*sub.DisplayName) > MaxNameBytes || !utf8.ValidString(*sub.DisplayName) {
			return args[:n], "", errorf(Invalid, "displayName must be valid UTF-8 of at most %d bytes", MaxNameBytes)
		}
		hasName, name = "1", *sub.DisplayName
	}
	hasMeta, meta := "0", ""
	if sub.Metadata != nil {
		m, err := checkMetadata(sub.Metadata)
		if err != nil {
			return args[:n], "", err
		}
		hasMeta, meta = "1", m
	}
	at := now
	if !sub.AchievedAt.IsZero() {
		if sub.AchievedAt.After(now.Add(s.cfg.ClockSkew)) {
			return args[:n], "", errorf(Invalid, "achievedAt is in the future")
		}
		if sub.AchievedAt.Before(MinAchievedAt) {
			return args[:n], "", errorf(Invalid, "achievedAt must not be before %s", MinAchievedAt.Format(time.RFC3339))
		}
		if sub.AchievedAt.Before(now) {
			at = sub.AchievedAt
		}
	}
	if at.After(MaxAchievedAt) {
		return args[:n], "", errorf(Invalid, "achievedAt must not be after %s", MaxAchievedAt.Format(time.RFC3339))
	}
	score := strconv.FormatFloat(sub.Score, 'g', -1, 64)
	if fp == "" {
		fp = fingerprint(sub, score)
	}
	args = append(args, sub.Player, score, sub.EventID, fp, hasName, name, hasMeta, meta, at.Unix(), "", "")
	var first string
	loc := b.Location()
	for i, w := range b.Windows {
		period, exp := AllPeriod, int64(0)
		if w == Season {
			// The script picks the season running at achievedAt (season_of in common.lua) and checks its grace
			// against the clock in milliseconds, closedAt's precision. (The header's clock is whole seconds, so
			// that the calls of one second merge, see batcher.)
			period, exp = "", now.UnixMilli()
		} else if w != AllTime {
			start := periodStart(w, at, loc)
			if cur := periodStart(w, now, loc); !start.Equal(cur) {
				if b.closedAt(nextStart(w, start, 1), now) {
					return args[:n], "", errorf(PeriodClosed, "the %s period %s is closed", w, periodKey(w, start))
				}
			}
			period, exp = periodKey(w, start), b.expireAt(w, start)
			if exp <= now.Unix() { // its keys would be written already expired (the script checks this too)
				return args[:n], "", errorf(PeriodClosed, "the %s period %s is closed", w, period)
			}
		}
		if i == 0 {
			first = period
		}
		args = append(args, period, exp)
	}
	return args, first, nil
}

// fingerprint identifies what an eventId stands for: the same eventId with another player, score or achievedAt
// is a conflict, not a retry.
func fingerprint(sub Submission, score string) string {
	if sub.EventID == "" {
		return ""
	}
	at := ""
	if !sub.AchievedAt.IsZero() {
		at = strconv.FormatInt(sub.AchievedAt.UnixNano(), 10)
	}
	h := sha256.Sum256([]byte(sub.Player + "\x00" + score + "\x00" + at))
	return base64.RawStdEncoding.EncodeToString(h[:12])
}

func checkMetadata(m json.RawMessage) (string, error) {
	if len(m) > 4*MaxMetadataBytes {
		return "", errorf(Invalid, "metadata must be a JSON object of at most %d bytes", MaxMetadataBytes)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(m, &obj); err != nil || obj == nil {
		return "", errorf(Invalid, "metadata must be a JSON object")
	}
	compact, err := json.Marshal(obj)
	if err != nil || len(compact) > MaxMetadataBytes {
		return "", errorf(Invalid, "metadata must be a JSON object of at most %d bytes", MaxMetadataBytes)
	}
	return string(compact), nil
}

func optFloat(v *float64) string {
	if v == nil {
		return ""
	}
	return strconv.FormatFloat(*v, 'g', -1, 64)
}

func fmtBound(v *float64, none string) string {
	if v == nil {
		return none
	}
	return strconv.FormatFloat(*v, 'g', -1, 64)
}

// parseSubmitReply reads one item reply of the submit script.
func parseSubmitReply(b *Board, v any, period, player string) (*Result, error) {
	row, ok := v.([]any)
	if !ok || len(row) == 0 {
		return nil, fmt.Errorf("unexpected submit reply %T", v)
	}
	status := toString(row[0])
	if status == "err" && len(row) >= 3 {
		return nil, &Error{Code: Code(toString(row[1])), Message: toString(row[2])}
	}
	if len(row) < 10 {
		return nil, fmt.Errorf("short submit reply (%d fields)", len(row))
	}
	size := toInt(row[9])
	var tie any // absent from results stored by an older version
	if len(row) > 10 {
		tie = row[10]
	}
	e, err := parseEntry(b, []any{player, row[1], row[2], row[3], row[4], row[5], tie}, size)
	if err != nil {
		return nil, err
	}
	r := &Result{Entry: e, Window: b.Windows[0], Period: period, Updated: toInt(row[8]) == 1,
		Duplicate: status == "dup", Size: size}
	if len(row) >= 13 { // the first window written: a SEASON window that skipped the score is not
		if wi := toInt(row[11]); wi >= 1 && int(wi) <= len(b.Windows) {
			r.Window, r.Period = b.Windows[wi-1], toString(row[12])
		}
	}
	if len(row) >= 15 && status == "ok" {
		r.EventVersion, r.EventEpoch = toInt(row[13]), toString(row[14])
	}
	if pr := toString(row[6]); pr != "" {
		n := toInt(row[6])
		r.PreviousRank = &n
	}
	if ps := toString(row[7]); ps != "" {
		x, err := strconv.ParseFloat(ps, 64)
		if err != nil {
			return nil, fmt.Errorf("bad previous score %q", ps)
		}
		u := b.userScore(x)
		r.PreviousScore = &u
	}
	return r, nil
}
