package leaderboard

import (
	"context"
	_ "embed"
	"strconv"
	"strings"
	"time"
)

// resend.go: close events survive Redis. The ledger keeps each announced version of a period's frozen standings
// with its outbox id, and per webhook consumer group (Config.OutboxGroups, recorded when the version is frozen)
// whether its delivery completed: a 2xx answer, or given up into the dead-letter stream (RecordDelivery). Redis
// holds the outbox and the groups' state, and may lose them before a delivery completed (a FLUSHALL, a restart
// without persistence, a failover); the close check of a restored board finds its fences in the ledger and does
// not send what the ledger says went out. So after a restore, and at every ledger check, every announced version
// whose delivery to a configured group has not completed and whose outbox entry Redis no longer holds goes into
// the outbox again, with its frozen standings, its first recordedAt and, in field 'first', its first outbox id,
// which the event's id (CloseEvent.ID, the webhooks' X-Leaderboard-Event-Id) keeps: receivers dedupe it. A group
// that completed the delivery acknowledges it without sending (DeliveryDone). Only versions not completed are
// read (the ledger indexes them), never a board's history.

var (
	//go:embed resend.lua
	resendLua    string
	resendScript = newScript("resend", resendLua, false)
)

// resendPerBoard bounds the events one check puts back into one board's outbox: well within what the outbox keeps
// (OutboxMaxLen), so that they do not trim each other; the others wait for the next check.
const resendPerBoard = OutboxMaxLen / 2

// resendScan bounds the versions one ledger check reads for all boards.
const resendScan = 1000

// ResendUndelivered puts back into the outboxes the close events the ledger says were announced and not
// delivered to every webhook of Config.OutboxGroups, when Redis no longer holds them: those of the board with
// ledger key key, or of every board (key 0). It returns how many it put back. Boards Redis lacks (being
// restored) are left to the end of their restore.
func (s *Store) ResendUndelivered(ctx context.Context, key int64) (int, error) {
	if s.seq == nil || len(s.cfg.OutboxGroups) == 0 {
		return 0, nil
	}
	limit, after := resendPerBoard, int64(0)
	if key == 0 {
		limit, after = resendScan, s.resendAfter.Load()
	}
	us, err := s.seq.ledger.Undelivered(ctx, key, after, s.cfg.OutboxGroups, limit)
	if err != nil {
		return 0, err
	}
	if key == 0 {
		// A full page: the next check goes on after its last board, so that boards whose events are held (their
		// receivers are down) do not keep the others' from being read; else it starts over.
		next := int64(0)
		if len(us) == limit {
			next = us[len(us)-1].Key
		}
		s.resendAfter.Store(next)
	}
	n := 0
	for len(us) > 0 { // by board (the ledger orders them so)
		end := 1
		for end < len(us) && us[end].Key == us[0].Key {
			end++
		}
		k, err := s.resendBoard(ctx, us[:min(end, resendPerBoard)])
		n += k
		if err != nil && ErrorCode(err) != NotFound && ErrorCode(err) != Unavailable {
			return n, err
		}
		us = us[end:]
	}
	return n, nil
}

// resendBoard puts back those of us (versions of one board) that the board's outbox no longer holds.
func (s *Store) resendBoard(ctx context.Context, us []Undelivered) (int, error) {
	board := us[0].Board
	if n, err := s.rdb.Exists(ctx, keyDef.of(s.makeKeyBase(board))).Result(); err != nil || n == 0 {
		return 0, redisError(err) // lost or being restored: its restore sends them when it is done
	}
	msgs, err := s.rdb.XRange(ctx, s.outboxKey(board), "-", "+").Result()
	if err != nil {
		return 0, redisError(err)
	}
	held := make(map[string]bool, 2*len(msgs))
	for _, m := range msgs {
		held[m.ID] = true
		if f, _ := m.Values["first"].(string); f != "" {
			held[f] = true
		}
	}
	var lost []Undelivered
	for _, u := range us {
		if !held[u.OutboxID] {
			lost = append(lost, u)
		}
	}
	if len(lost) == 0 {
		return 0, nil
	}
	b, err := s.Board(ctx, board)
	if err != nil {
		return 0, err
	}
	args := []any{board, s.cfg.Clock().UnixMilli(), OutboxMaxLen}
	for _, u := range lost {
		top, err := s.seq.ledger.FrozenRows(ctx, u.Key, u.Window, u.Period, u.Version, 0, b.CloseEventTop)
		if err != nil {
			return 0, err
		}
		topJSON, err := encodeCloseTop(b, top)
		if err != nil {
			return 0, err
		}
		recorded := u.AnnouncedAt
		if recorded.IsZero() { // announced before the ledger kept the moment: the outbox id's (Redis's clock)
			ms, _ := strconv.ParseInt(u.OutboxID[:max(strings.IndexByte(u.OutboxID, '-'), 0)], 10, 64)
			recorded = time.UnixMilli(ms)
		}
		args = append(args, u.OutboxID, string(u.Window), u.Period, u.EndedAt.UnixMilli(), recorded.UnixMilli(),
			u.Size, topJSON, u.Version, u.Reason)
	}
	release, err := s.writes.acquire(ctx)
	if err != nil {
		return 0, err
	}
	put, err := s.run(ctx, resendScript, []string{s.keyBase(board), s.outboxKey(board)}, args...).StringSlice()
	release()
	if err != nil {
		return 0, redisError(err)
	}
	return len(put), nil
}

// RecordDelivery records in the ledger that the delivery of a close event to a webhook consumer group completed:
// delivered (a 2xx answer) or, with gaveUp, given up into the dead-letter stream. Either way it is not sent to
// that group again when Redis loses it. Without a ledger: nothing.
func (s *Store) RecordDelivery(ctx context.Context, ev *CloseEvent, group string, gaveUp bool) error {
	if s.seq == nil {
		return nil
	}
	return s.seq.ledger.Delivered(ctx, ev.Board, ev.Window, ev.Period, ev.Version, group, gaveUp, s.cfg.Clock())
}

// DeliveryDone reports whether the ledger recorded that the delivery of a close event's version to a webhook
// consumer group completed (RecordDelivery): an event sent again after Redis lost it (FirstID set) goes to every
// group of the new outbox, and one that had completed it acknowledges it without sending; so does one whose
// version went out again under a new outbox id (its first id never reached the ledger). Without a ledger: false.
func (s *Store) DeliveryDone(ctx context.Context, ev *CloseEvent, group string) (bool, error) {
	if s.seq == nil {
		return false, nil
	}
	return s.seq.ledger.DeliveryDone(ctx, ev.Board, ev.Window, ev.Period, ev.Version, group)
}
