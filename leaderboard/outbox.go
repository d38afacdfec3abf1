package leaderboard

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// outbox.go: the consumer side of a board's outbox of close events (close.go records them), for the webhook
// deliveries (internal/periodclose): consumer groups read, claim, acknowledge and dead-letter events, at least once
// each.

// OutboxRead reads up to count close events of the board that consumer group has not read yet, for consumer
// (XREADGROUP): they are pending for it until acknowledged. A group is created, reading from the oldest event
// kept, the first time it reads an outbox. Nothing new (or no outbox): nil.
func (s *Store) OutboxRead(ctx context.Context, board, group, consumer string, count int) ([]CloseEvent, error) {
	key := s.outboxKey(board)
	read := func() ([]redis.XMessage, error) {
		res, err := s.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: group, Consumer: consumer,
			Streams: []string{key, ">"}, Count: int64(count), Block: -1}).Result()
		if err != nil || len(res) == 0 {
			return nil, err
		}
		return res[0].Messages, nil
	}
	msgs, err := read()
	if err != nil && strings.HasPrefix(err.Error(), "NOGROUP") {
		var created int
		if created, err = s.run(ctx, groupScript, []string{s.keyBase(board), key}, group).Int(); err != nil {
			return nil, redisError(err)
		}
		if created == 0 {
			return nil, nil // no outbox (or the group appeared meanwhile: read it next time)
		}
		msgs, err = read()
	}
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, redisError(err)
	}
	return s.decodeCloses(ctx, board, msgs)
}

// PendingClose is a close event that a consumer group read and did not acknowledge.
type PendingClose struct {
	OutboxID   string
	Consumer   string        // who holds it
	Idle       time.Duration // since it was last read or claimed
	Deliveries int64         // how often it was read or claimed
}

// OutboxPending lists up to count events pending in the group for at least minIdle, oldest first.
func (s *Store) OutboxPending(ctx context.Context, board, group string, minIdle time.Duration, count int) ([]PendingClose, error) {
	res, err := s.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: s.outboxKey(board), Group: group,
		Idle: minIdle, Start: "-", End: "+", Count: int64(count)}).Result()
	if err != nil {
		if errors.Is(err, redis.Nil) || strings.HasPrefix(err.Error(), "NOGROUP") {
			return nil, nil
		}
		return nil, redisError(err)
	}
	out := make([]PendingClose, len(res))
	for i, p := range res {
		out[i] = PendingClose{OutboxID: p.ID, Consumer: p.Consumer, Idle: p.Idle, Deliveries: p.RetryCount}
	}
	return out, nil
}

// OutboxClaim makes consumer the holder of a pending event if it has been idle for at least minIdle (XCLAIM:
// its idle time starts again and its delivery count goes up). Of several consumers claiming one event at once,
// one gets it. nil: someone else holds it now, or it is no longer pending or kept.
func (s *Store) OutboxClaim(ctx context.Context, board, group, consumer, id string, minIdle time.Duration) (*CloseEvent, error) {
	msgs, err := s.rdb.XClaim(ctx, &redis.XClaimArgs{Stream: s.outboxKey(board), Group: group,
		Consumer: consumer, MinIdle: minIdle, Messages: []string{id}}).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, redisError(err)
	}
	evs, err := s.decodeCloses(ctx, board, msgs)
	if err != nil || len(evs) == 0 {
		return nil, err
	}
	return &evs[0], nil
}

// OutboxAck acknowledges an event for the group: it is delivered and no longer pending.
func (s *Store) OutboxAck(ctx context.Context, board, group, id string) error {
	return redisError(s.rdb.XAck(ctx, s.outboxKey(board), group, id).Err())
}

// OutboxDeadLetter acknowledges an event for the group and, in the same script, appends it to the board's
// dead-letter stream (fields outbox: its outbox id, group, reason), which keeps the newest OutboxMaxLen; nothing
// when the board was deleted meanwhile (its outbox is gone, and a dead-letter stream must not outlive it).
func (s *Store) OutboxDeadLetter(ctx context.Context, board, group, id, reason string) error {
	return redisError(s.run(ctx, deadLetterScript, []string{s.keyBase(board), s.outboxKey(board),
		s.deadLetterKey(board)}, group, id, reason, OutboxMaxLen).Err())
}

// DeadLetters returns the outbox ids of the board's dead-lettered events of group, oldest first (for tools and
// tests).
func (s *Store) DeadLetters(ctx context.Context, board, group string) ([]string, error) {
	msgs, err := s.rdb.XRange(ctx, s.deadLetterKey(board), "-", "+").Result()
	if err != nil {
		return nil, redisError(err)
	}
	var ids []string
	for _, m := range msgs {
		if m.Values["group"] == group {
			ids = append(ids, fmt.Sprint(m.Values["outbox"]))
		}
	}
	return ids, nil
}

// OutboxesReady returns those of the boards that have an outbox, after making sure consumer group group exists
// on each of them (created reading from the oldest event kept). Boards without an outbox have no events to
// deliver yet. It asks Redis in pipelines, without failing commands (which would count as Redis errors).
func (s *Store) OutboxesReady(ctx context.Context, boards []string, group string) ([]string, error) {
	if len(boards) == 0 {
		return nil, nil
	}
	pipe := s.rdb.Pipeline()
	exists := make([]*redis.IntCmd, len(boards))
	for i, b := range boards {
		exists[i] = pipe.Exists(ctx, s.outboxKey(b))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, redisError(err)
	}
	var have []string
	for i, c := range exists {
		if c.Val() == 1 {
			have = append(have, boards[i])
		}
	}
	if len(have) == 0 {
		return nil, nil
	}
	pipe = s.rdb.Pipeline()
	infos := make([]*redis.XInfoGroupsCmd, len(have))
	for i, b := range have {
		infos[i] = pipe.XInfoGroups(ctx, s.outboxKey(b))
	}
	_, _ = pipe.Exec(ctx) // an outbox deleted meanwhile fails its own command only
	var ready []string
	for i, c := range infos {
		if c.Err() != nil {
			continue
		}
		found := false
		for _, g := range c.Val() {
			found = found || g.Name == group
		}
		if !found {
			// A script, so that two processes creating it at once get no BUSYGROUP error.
			err := s.run(ctx, groupScript, []string{s.keyBase(have[i]), s.outboxKey(have[i])}, group).Err()
			if err != nil {
				return ready, redisError(err)
			}
		}
		ready = append(ready, have[i])
	}
	return ready, nil
}

// OutboxGroup is what a consumer group has to do on an outbox.
type OutboxGroup struct {
	Pending int64 // events read and not acknowledged
	Lag     int64 // events not read yet; -1: unknown (after trimming), so maybe some
}

// OutboxGroupStates returns the state of consumer group group on the outboxes of boards (boards that have an
// outbox with the group, see OutboxesReady), asked in one pipeline. Boards whose outbox is gone are left out.
func (s *Store) OutboxGroupStates(ctx context.Context, boards []string, group string) (map[string]OutboxGroup, error) {
	out := make(map[string]OutboxGroup, len(boards))
	if len(boards) == 0 {
		return out, nil
	}
	pipe := s.rdb.Pipeline()
	infos := make([]*redis.XInfoGroupsCmd, len(boards))
	for i, b := range boards {
		infos[i] = pipe.XInfoGroups(ctx, s.outboxKey(b))
	}
	if _, err := pipe.Exec(ctx); err != nil && isUnavailable(err) {
		return nil, redisError(err)
	}
	for i, c := range infos {
		for _, g := range c.Val() {
			if g.Name == group {
				out[boards[i]] = OutboxGroup{Pending: g.Pending, Lag: g.Lag}
			}
		}
	}
	return out, nil
}
