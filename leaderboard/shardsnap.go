package leaderboard

import (
	"context"
	"fmt"
	"strconv"
	"sync"
)

// snapshotMerge is the snapshot of a sharded board's window period: a copy per shard (snapshot.lua on each, all
// started at once, so each shard's moment is within the time the copies take to start) and a merge of their
// rows by score, then arrival token, as the live board orders them. An export pages it in order; a page before the
// last one read starts the merge again from the first row.
type snapshotMerge struct {
	parts []*Snapshot
	cuts  []tailCut // per part (shard): tailCut
	mu    sync.Mutex
	next  int64 // rows merged so far: the 0-based rank of the next one
	buf   [][]mergeRow
	pos   []int64 // per part: rows fetched so far
	done  []bool  // per part: every row fetched
	lastX float64 // the score and tie rank of the last row merged
	tie   int64
}

// mergeRow is a snapshot row with what the merge orders it by.
type mergeRow struct {
	e   Entry
	row shardRow // x and tok: what the merge orders by
}

// snapshotSharded copies every shard (their key bases: bases) of a sharded board's window period at once.
func (s *Store) snapshotSharded(ctx context.Context, r Resolved, bases []string) (*Snapshot, error) {
	parts := make([]*Snapshot, len(bases))
	errs := make([]error, len(bases))
	var wg sync.WaitGroup
	for i, base := range bases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			parts[i], errs[i] = s.snapshotOf(ctx, r, base)
		}()
	}
	wg.Wait()
	if err := firstError(errs); err != nil {
		for _, p := range parts {
			if p != nil {
				_ = p.drop(context.WithoutCancel(ctx))
			}
		}
		return nil, err
	}
	m := &snapshotMerge{parts: parts, cuts: make([]tailCut, len(parts))}
	sn := &Snapshot{Resolved: r, s: s, merge: m}
	gaps := false
	for i, p := range parts {
		sn.Rows += p.Rows
		sn.Size += p.Size
		m.cuts[i], gaps = p.cut, gaps || p.cut.set
		p.stop, p.done = make(chan struct{}), make(chan struct{})
		go p.renew()
	}
	sn.Rows = r.Board.exactRows(sn.Rows)
	sn.once.Do(func() {}) // the parts renew themselves
	if gaps {
		// The exact tier ends where another shard's tail may begin (tailCut): its rows are counted by merging
		// them (an export asks for exactly Rows rows).
		n := int64(0)
		for {
			p, err := sn.pageMerged(ctx, int(n), MaxFirst)
			if err != nil {
				_ = sn.Close(context.WithoutCancel(ctx))
				return nil, err
			}
			n += int64(len(p.Entries))
			if len(p.Entries) < MaxFirst {
				break
			}
		}
		sn.Rows = n
	}
	return sn, nil
}

// pageMerged is Page of a sharded board's snapshot.
func (sn *Snapshot) pageMerged(ctx context.Context, offset, n int) (*Page, error) {
	m := sn.merge
	m.mu.Lock()
	defer m.mu.Unlock()
	if int64(offset) < m.next || m.buf == nil {
		m.next, m.tie = 0, 0
		m.buf = make([][]mergeRow, len(m.parts))
		m.pos = make([]int64, len(m.parts))
		m.done = make([]bool, len(m.parts))
	}
	p := &Page{Board: sn.Board.ID, Order: sn.Board.Order, Window: sn.Window, Period: sn.Period, Size: sn.Size}
	for m.next < sn.Board.exactRows(int64(offset+n)) { // on exactTop boards only the exact tier is listed
		k := -1
		for i := range m.parts {
			if len(m.buf[i]) == 0 && !m.done[i] {
				if err := sn.fetch(ctx, i); err != nil {
					return nil, err
				}
			}
			if len(m.buf[i]) > 0 && (k < 0 || compareRows(m.buf[i][0].row, m.buf[k][0].row) < 0) {
				k = i
			}
		}
		if k < 0 {
			break
		}
		row := m.buf[k][0]
		if !othersCut(m.cuts, k).holds(row.row.x) {
			break // the end of the board's exact tier
		}
		m.buf[k] = m.buf[k][1:]
		if m.next == 0 || row.row.x != m.lastX {
			m.tie = m.next + 1
		}
		m.lastX = row.row.x
		m.next++
		if m.next > int64(offset) {
			e := row.e
			e.Rank, e.TieRank, e.TopPercent = m.next, m.tie, TopPercent(m.next, sn.Size)
			p.Entries = append(p.Entries, e)
		}
	}
	return p, nil
}

// fetch reads the next MaxFirst rows of part i (the caller holds m.mu).
func (sn *Snapshot) fetch(ctx context.Context, i int) error {
	m, part := sn.merge, sn.merge.parts[i]
	release, err := sn.s.reads.acquire(ctx)
	if err != nil {
		return err
	}
	reply, err := sn.s.fns.run(ctx, snapPageScript, part.keys, part.id, m.pos[i], MaxFirst, "t").Slice()
	release()
	if err != nil {
		return redisError(err)
	}
	if len(reply) == 0 {
		return redisError(fmt.Errorf("snappage: empty reply"))
	}
	for _, rv := range reply[1:] {
		row, _ := rv.([]any)
		if len(row) != 8 {
			return redisError(fmt.Errorf("snappage: row of %d values", len(row)))
		}
		e, err := parseEntry(sn.Board, row[:7], sn.Size)
		if err != nil {
			return redisError(err)
		}
		x, err := strconv.ParseFloat(toString(row[3]), 64)
		if err != nil {
			return redisError(err)
		}
		m.buf[i] = append(m.buf[i], mergeRow{e: e, row: shardRow{x: x, tok: toString(row[7])}})
	}
	got := int64(len(reply) - 1)
	m.pos[i] += got
	if got < MaxFirst {
		m.done[i] = true
	}
	return nil
}
