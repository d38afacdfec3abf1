package leaderboard

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// sequencer.go: the order of a ledgered store's writes. Each board's writes go to one worker (by a hash of the
// board id), which records whatever writes are waiting in one ledger commit for all their boards, then applies
// each board's events to Redis in the order of their sequence numbers, through the gate of the ledgered scripts.

// Sequencer defaults.
const (
	// DefaultLedgerWorkers is how many boards' writes are recorded and applied at once (Config.LedgerWorkers).
	DefaultLedgerWorkers = 8
	// maxCommitEvents bounds the events of one commit (a worker's writes waiting beyond it go in the next one).
	maxCommitEvents = 4096
	// ledgerApplyTimeout bounds a worker's commit and apply of one round: the writes are recorded by then, and
	// what Redis did not take is applied later from the ledger (catch-up).
	ledgerApplyTimeout = 10 * time.Second
	// maxLedgerItems bounds the items of one ledgered submit call (as maxMergedItems does for the batcher).
	maxLedgerItems = 128
)

// ledgerWrite is one request's events for one board, waiting for its worker.
type ledgerWrite struct {
	board  string
	kind   EventKind // EventSubmit: events are items of SubmitMany; otherwise one event
	events []LedgerEvent
	fields int // submit: the parts of results to fill (submitFields)

	appended []Appended
	outs     []Outcome // submit: per event
	reply    any       // others: the script's reply
	err      error     // the whole write's error
	done     chan struct{}
}

type sequencer struct {
	s       *Store
	ledger  Ledger
	workers []chan *ledgerWrite
	restore restorer
	known   sync.Map // board id -> knownBoard (holds)
	// creations are the boards whose creation this process is recording or applying (id -> when it began): the
	// ledger check does not take one for lost while its definition is not in Redis yet (creating).
	creations sync.Map
	list      ledgerList
	frozen    *frozenCache
}

func newSequencer(s *Store, l Ledger, workers int) *sequencer {
	if workers <= 0 {
		workers = DefaultLedgerWorkers
	}
	q := &sequencer{s: s, ledger: l, workers: make([]chan *ledgerWrite, workers), frozen: newFrozenCache()}
	q.restore.init()
	for i := range q.workers {
		ch := make(chan *ledgerWrite, maxBatch)
		q.workers[i] = ch
		go q.work(ch)
	}
	return q
}

// worker returns the channel of the worker that orders board's writes.
func (q *sequencer) worker(board string) chan *ledgerWrite {
	h := uint32(2166136261) // FNV-1a
	for i := 0; i < len(board); i++ {
		h = (h ^ uint32(board[i])) * 16777619
	}
	return q.workers[h%uint32(len(q.workers))]
}

// do hands w to its worker and waits for it, or for ctx. A write the caller stops waiting for is still recorded
// and applied (or was refused as a whole): its outcome is unknown to the caller, as for a lost reply.
func (q *sequencer) do(ctx context.Context, w *ledgerWrite) error {
	w.done = make(chan struct{})
	select {
	case q.worker(w.board) <- w:
	case <-ctx.Done():
		return ctxError(ctx)
	}
	select {
	case <-w.done:
		return w.err
	case <-ctx.Done():
		return ctxError(ctx)
	}
}

// creating reports whether this process is creating board now: it began less than two ledgerApplyTimeouts ago
// (the round's commit, then its apply; a mark a caller that stopped waiting left behind ends so).
func (q *sequencer) creating(board string) bool {
	v, ok := q.creations.Load(board)
	if !ok {
		return false
	}
	if time.Since(v.(time.Time)) < 2*ledgerApplyTimeout {
		return true
	}
	q.creations.CompareAndDelete(board, v)
	return false
}

func ctxError(ctx context.Context) error {
	return &Error{Code: Unavailable, Message: "the write's outcome is unknown: the request ended first", Err: ctx.Err()}
}

// work runs one worker: it records a round of writes (whatever is waiting, up to maxCommitEvents) while its
// applier applies the round before, in order: a round's commit and the apply of the one before overlap.
func (q *sequencer) work(ch chan *ledgerWrite) {
	applies := make(chan func(), 1)
	go func() {
		for apply := range applies {
			apply()
		}
	}()
	for w := range ch {
		round := []*ledgerWrite{w}
		n := len(w.events)
	fill:
		for n < maxCommitEvents {
			select {
			case w := <-ch:
				round = append(round, w)
				n += len(w.events)
			default:
				break fill
			}
		}
		if apply := q.commit(round); apply != nil {
			applies <- apply
		}
	}
	close(applies)
}

// commit records a round of writes in one ledger commit and returns what applies each board's writes in order
// (nil when the commit failed: the writes have their error).
func (q *sequencer) commit(round []*ledgerWrite) func() {
	now := time.UnixMilli(q.s.cfg.Clock().UnixMilli()) // the clock the events are recorded and applied with
	ctx, cancel := context.WithTimeout(context.Background(), ledgerApplyTimeout)
	byBoard := map[string]int{}
	var batches []AppendBatch
	var writes [][]*ledgerWrite
	for _, w := range round {
		i, ok := byBoard[w.board]
		if !ok || w.kind == EventCreate || (len(writes[i]) == 1 && writes[i][0].kind == EventCreate) {
			i = len(batches) // a create is a batch of its own (Ledger.Append)
			if w.kind != EventCreate {
				byBoard[w.board] = i
			}
			batches = append(batches, AppendBatch{Board: w.board, RecordedAt: now})
			writes = append(writes, nil)
		}
		batches[i].Events = append(batches[i].Events, w.events...)
		writes[i] = append(writes[i], w)
	}
	res, err := q.ledger.Append(ctx, batches)
	cancel()
	if err != nil {
		for _, w := range round {
			w.err = err
			close(w.done)
		}
		return nil
	}
	for i := range batches {
		off := 0
		for _, w := range writes[i] {
			w.appended = res[i][off : off+len(w.events)]
			for k := range w.events {
				w.events[k].Seq = w.appended[k].Seq
				w.events[k].Board = w.appended[k].Board
				w.events[k].RecordedAt = now
			}
			off += len(w.events)
		}
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), ledgerApplyTimeout)
		defer cancel()
		applyBoard := func(ws []*ledgerWrite) {
			q.apply(ctx, ws, now)
			for _, w := range ws {
				close(w.done)
			}
		}
		if len(writes) == 1 { // one board, the usual round: no goroutine to hand it to
			applyBoard(writes[0])
			return
		}
		var wg sync.WaitGroup
		for _, ws := range writes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				applyBoard(ws)
			}()
		}
		wg.Wait()
	}
}

// apply applies the recorded writes of one board, in order; consecutive submissions go in shared calls.
func (q *sequencer) apply(ctx context.Context, ws []*ledgerWrite, now time.Time) {
	defer func() {
		for _, w := range ws {
			w.recorded()
		}
	}()
	for i := 0; i < len(ws); {
		if ws[i].kind != EventSubmit {
			q.applyOne(ctx, ws[i], now)
			i++
			continue
		}
		j := i + 1
		for j < len(ws) && ws[j].kind == EventSubmit {
			j++
		}
		q.applySubmits(ctx, ws[i:j], now)
		i = j
	}
}

// gapped runs call, which applies events from seq first on; when Redis lacks earlier events of the board (LB_GAP:
// another process has them in flight, or Redis lost them), it waits a moment for them, then applies them from the
// ledger itself, and calls again.
func (q *sequencer) gapped(ctx context.Context, board string, first int64, call func() error) error {
	for attempt := 0; ; attempt++ {
		err := call()
		hwm, gap := gapOf(err)
		if !gap || attempt == 3 {
			return err
		}
		if attempt == 0 {
			// Another process recorded the events before ours and is applying them: give it a moment.
			time.Sleep(gapWait)
			continue
		}
		if _, err := q.catchUp(ctx, board, hwm, first-1); err != nil {
			return err
		}
	}
}

// gapWait is how long a write that finds earlier events missing waits for another process to apply them before
// it applies them itself from the ledger.
const gapWait = 20 * time.Millisecond

// gapOf returns the board's high-water mark when err is the gate's LB_GAP.
func gapOf(err error) (int64, bool) {
	if err == nil {
		return 0, false
	}
	msg := err.Error()
	i := strings.Index(msg, "LB_GAP ")
	if i < 0 {
		return 0, false
	}
	n, perr := strconv.ParseInt(strings.TrimSpace(msg[i+len("LB_GAP "):]), 10, 64)
	return n, perr == nil
}

// seenErr reports whether err is the gate's LB_SEEN: the event was applied before.
func seenErr(err error) bool { return err != nil && strings.Contains(err.Error(), "LB_SEEN") }

// gateArg is the ledgered scripts' last argument (see common.lua): the mode, the range of seqs the call stands
// for (0, 0: none but duplicates), the clock keys live by, the ledger's key of the events' board (key; see
// boardKeyField), and the seq of each event it carries. The gate refuses a call whose board Redis holds another
// board of the ledger than key (LB_OTHER); 0, and any key in a restore (which builds the board afresh), is not
// compared.
func gateArg(restore bool, key, first, last int64, seqs []int64, ttlNow time.Time) string {
	var b strings.Builder
	if restore {
		b.WriteString("r,")
		key = 0
	} else {
		b.WriteString("w,")
	}
	b.WriteString(strconv.FormatInt(first, 10))
	b.WriteByte(',')
	b.WriteString(strconv.FormatInt(last, 10))
	b.WriteByte(',')
	b.WriteString(strconv.FormatInt(ttlNow.Unix(), 10))
	b.WriteByte(',')
	b.WriteString(strconv.FormatInt(key, 10))
	for _, s := range seqs {
		b.WriteByte(',')
		b.WriteString(strconv.FormatInt(s, 10))
	}
	return b.String()
}

// boardOf is the ledger's key of the board of a call's events (LedgerEvent.Board), 0 when none says.
func boardOf(evs []*LedgerEvent) int64 {
	for _, e := range evs {
		if e.Board != 0 {
			return e.Board
		}
	}
	return 0
}

// keyClock is the clock the keys of a ledgered call live by: today's, or for a scratch replay the event's own.
func (s *Store) keyClock(v *cachedBoard, now time.Time) time.Time {
	if v.scratch {
		return now
	}
	return s.cfg.Clock()
}

// seqRange is the range of the new (not duplicate) seqs of a call's events.
func seqRange(evs []*LedgerEvent, dup []bool) (first, last int64) {
	for i, e := range evs {
		if dup != nil && dup[i] {
			continue
		}
		if first == 0 || e.Seq < first {
			first = e.Seq
		}
		last = max(last, e.Seq)
	}
	return first, last
}

// applySubmits applies the submissions of consecutive writes of one board.
func (q *sequencer) applySubmits(ctx context.Context, ws []*ledgerWrite, now time.Time) {
	board := ws[0].board
	type item struct {
		w *ledgerWrite
		k int
	}
	var items []item
	for _, w := range ws {
		w.outs = make([]Outcome, len(w.events))
		for k := range w.events {
			if a := w.appended[k]; a.Duplicate && a.Fingerprint != w.events[k].Fingerprint {
				w.outs[k].Err = errorf(Conflict, "eventId %s was already used for another submission", w.events[k].EventID)
				continue
			}
			items = append(items, item{w, k})
		}
	}
	fields := 0
	for _, w := range ws {
		fields |= w.fields
	}
	for start := 0; start < len(items); start += maxLedgerItems {
		chunk := items[min(start, len(items)):min(start+maxLedgerItems, len(items))]
		evs := make([]*LedgerEvent, len(chunk))
		dup := make([]bool, len(chunk))
		for i, it := range chunk {
			evs[i] = &it.w.events[it.k]
			dup[i] = it.w.appended[it.k].Duplicate
		}
		outs, err := q.s.applySubmitEvents(ctx, board, evs, dup, fields, false, now, q.gapped)
		var refused []Refusal
		for i, it := range chunk {
			if err != nil {
				it.w.outs[it.k].Err = err
				continue
			}
			it.w.outs[it.k] = outs[i]
			if e := outs[i].Err; e != nil && !dup[i] && IsRefusal(e) {
				refused = append(refused, Refusal{Seq: evs[i].Seq, Reason: refusalReason(e)})
			}
		}
		if len(refused) > 0 {
			// Marked before the answers go: a void's rebuild replays the board without the voided events, which
			// could let a refused one count (a submission limit no longer reached). A failed mark leaves the
			// refusal to the replay, which refuses it again unless a void changed what came before it.
			_ = q.ledger.Refuse(ctx, board, now, refused)
		}
		q.lost(board, err)
	}
}

// lost starts the restore of a board whose write found it lost (err NOT_FOUND) or holding another board of the
// ledger (errOtherBoard).
func (q *sequencer) lost(board string, err error) {
	if err != nil && (ErrorCode(err) == NotFound || errors.Is(err, errOtherBoard)) {
		q.restore.start(q, board)
	}
}

// refusalReason is how the ledger keeps a refusal (Refusal.Reason; scoreEvents' voidReason; migration 00004
// reads this form).
func refusalReason(err error) string {
	return fmt.Sprintf("refused (%s): %s", ErrorCode(err), ErrorMessage(err))
}

// applyOne applies a write of one event other than a submission.
func (q *sequencer) applyOne(ctx context.Context, w *ledgerWrite, now time.Time) {
	e := &w.events[0]
	if a := w.appended[0]; e.Kind == EventVoid && !a.Duplicate && a.Voided == 0 {
		e.noneVoided = true
	}
	w.reply, w.err = q.s.applyEvent(ctx, w.board, e, w.appended[0].Duplicate, false, now, q.gapped)
	if ErrorCode(w.err) == NotFound && e.Kind != EventCreate {
		w.err = q.s.missing(ctx, w.board)
	}
	if errors.Is(w.err, errOtherBoard) {
		q.lost(w.board, w.err)
	}
}

// recorded turns a recorded write's errRestoring (its board is being restored, so Redis did not take it) into
// errRecordedRestoring: errRestoring says nothing was applied, but the ledger has the event and the restore applies
// it with the others it takes.
func (w *ledgerWrite) recorded() {
	if errors.Is(w.err, errRestoringNow) {
		w.err = errRecordedRestoring(w.board)
	}
	for k := range w.outs {
		if errors.Is(w.outs[k].Err, errRestoringNow) {
			w.outs[k].Err = errRecordedRestoring(w.board)
		}
	}
}

// gappedFunc is sequencer.gapped, or a restore's plain call.
type gappedFunc func(ctx context.Context, board string, first int64, call func() error) error
