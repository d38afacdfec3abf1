package leaderboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Event is a change event that the submit and remove scripts publish on a board's channel (Store.Channel).
type Event struct {
	// Epoch and Version number the board's events: Version counts up by one per event within an Epoch; a new
	// Epoch means the counter started again (its key was lost), so nothing can be concluded from Version alone.
	Epoch   string
	Version int64
	Changes []Change
}

// Change is one player's change in one window period.
type Change struct {
	Window Window
	Period string
	Player string
	// Prev is the rank before (0: had no score), Rank the rank after (0: removed). A change below the store's
	// LiveTop that only moves the size is published at most every half second per period (see submit.lua); a
	// change of display name or metadata alone has Prev == Rank.
	Prev, Rank int64
	// Scored: the event carries Before and After, the player's score before (when Prev > 0) and after (when
	// Rank > 0), and Size, the players in the window period after the change (events of servers before these
	// fields do not). The scores are the index's own: ascending is better (negated on DESC boards).
	Scored        bool
	Before, After float64
	Size          int64
}

var windowByCode = map[string]Window{"a": AllTime, "d": Daily, "w": Weekly, "m": Monthly, "s": Season}

// DecodeEvent reads an event payload.
func DecodeEvent(payload []byte) (Event, error) {
	var ev struct {
		E string              `json:"e"`
		V int64               `json:"v"`
		C [][]json.RawMessage `json:"c"`
	}
	if err := json.Unmarshal(payload, &ev); err != nil {
		return Event{}, fmt.Errorf("decode event: %w", err)
	}
	out := Event{Epoch: ev.E, Version: ev.V, Changes: make([]Change, 0, len(ev.C))}
	for _, c := range ev.C {
		var code, period, player string
		var prev, n float64
		if len(c) < 5 || json.Unmarshal(c[0], &code) != nil || json.Unmarshal(c[1], &period) != nil ||
			json.Unmarshal(c[2], &player) != nil || json.Unmarshal(c[3], &prev) != nil ||
			json.Unmarshal(c[4], &n) != nil || windowByCode[code] == "" {
			return Event{}, fmt.Errorf("decode event: bad change %s", c)
		}
		ch := Change{Window: windowByCode[code], Period: period, Player: player, Prev: int64(prev), Rank: int64(n)}
		if len(c) >= 8 {
			var before, after string
			var size float64
			if json.Unmarshal(c[5], &before) != nil || json.Unmarshal(c[6], &after) != nil ||
				json.Unmarshal(c[7], &size) != nil {
				return Event{}, fmt.Errorf("decode event: bad change %s", c)
			}
			ch.Scored, ch.Size = true, int64(size)
			var err error
			if ch.Prev > 0 {
				ch.Before, err = strconv.ParseFloat(before, 64)
			}
			if err == nil && ch.Rank > 0 {
				ch.After, err = strconv.ParseFloat(after, 64)
			}
			if err != nil {
				return Event{}, fmt.Errorf("decode event: bad score in change %s", c)
			}
		}
		out.Changes = append(out.Changes, ch)
	}
	return out, nil
}

// EventVersion returns the epoch and version of the last event published for a board ("", 0 when none was).
// Events with this epoch and a version up to it are reflected in every read that starts after this call.
func (s *Store) EventVersion(ctx context.Context, board string) (epoch string, version int64, err error) {
	v, err := s.rdb.HMGet(ctx, keyCounters.of(s.keyBase(board)), "ep", "ver").Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return "", 0, redisError(err)
	}
	if len(v) == 2 {
		epoch, _ = v[0].(string)
		version = toInt(v[1])
	}
	return epoch, version, nil
}

// ShardEventVersions is EventVersion for each shard of a board (one element for an unsharded board), in the order
// of Channels: each shard numbers the events it publishes on its own channel with its own counter. The shards are
// read in one round trip; events of shard i up to versions[i] in epochs[i] are reflected in every read that starts
// after this call.
func (s *Store) ShardEventVersions(ctx context.Context, b *Board) (epochs []string, versions []int64, err error) {
	bases := s.ShardKeyBases(b)
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(bases))
	for i, base := range bases {
		cmds[i] = pipe.HMGet(ctx, keyCounters.of(base), "ep", "ver")
	}
	_, _ = pipe.Exec(ctx)
	epochs, versions = make([]string, len(bases)), make([]int64, len(bases))
	for i, cmd := range cmds {
		v, err := cmd.Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, nil, redisError(err)
		}
		if len(v) == 2 {
			epochs[i], _ = v[0].(string)
			versions[i] = toInt(v[1])
		}
	}
	return epochs, versions, nil
}

// Channels returns the channels on which a board's changes are published: Channel for an unsharded board, and
// one per shard for a sharded one (shard i's submissions and removals publish on the i-th, with ranks and sizes of
// that shard alone; a deletion is announced on every one of them, shard 0's first).
func (s *Store) Channels(b *Board) []string {
	if !b.Sharded() {
		return []string{s.Channel(b.ID)}
	}
	bases := s.ShardKeyBases(b)
	out := make([]string, len(bases))
	for i, base := range bases {
		out[i] = channelOf(base)
	}
	return out
}

// Watch asks the scripts to publish every change of a board, not only those that touch the live top, for ttl
// (live rank watchers keep it set). A deleted board is not watched (no key is written for it). On a sharded board
// every shard is watched (in one round trip): a write on any shard can move a watched player's rank.
func (s *Store) Watch(ctx context.Context, board string, ttl time.Duration) error {
	if cb, err := s.loadBoard(ctx, board); err == nil && cb.b.Sharded() {
		calls := make([]shardCall, len(cb.shards))
		for i, base := range cb.shards {
			calls[i] = shardCall{watchScript, base, []any{ttl.Milliseconds()}, nil}
		}
		_, errs := s.onShards(ctx, calls)
		return firstError(errs)
	}
	return redisError(s.fns.run(ctx, watchScript, []string{s.keyBase(board)}, ttl.Milliseconds()).Err())
}

// NewSubscription opens a subscription connection for the store's publish command (sharded SSUBSCRIBE for
// PublishSharded, SUBSCRIBE otherwise). On Redis Cluster a sharded subscription serves channels of one hash slot;
// the first channel subscribed picks its node.
func (s *Store) NewSubscription(ctx context.Context) *redis.PubSub {
	if s.cfg.PublishCommand == PublishSharded {
		return s.rdb.SSubscribe(ctx)
	}
	return s.rdb.Subscribe(ctx)
}

// SubscriptionNode says which subscription connection serves channel. For a sharded store on Redis Cluster it
// is the primary that serves the channel's hash slot: node is its address and open returns a connection to that
// primary alone, which may carry the channels of every slot the primary serves (one SSUBSCRIBE per slot: Redis
// refuses one command across slots). Elsewhere node is "" and open is NewSubscription: one connection serves
// every channel. When the cluster's slot map cannot be read, node names the slot and open returns a cluster
// subscription that picks the slot's node itself.
func (s *Store) SubscriptionNode(ctx context.Context, channel string) (node string, open func(context.Context) *redis.PubSub) {
	cc, ok := s.rdb.(*redis.ClusterClient)
	if !ok || s.cfg.PublishCommand != PublishSharded {
		return "", s.NewSubscription
	}
	primary, err := cc.MasterForKey(ctx, channel)
	if err != nil {
		return "slot " + strconv.Itoa(HashSlot(channel)), s.NewSubscription
	}
	return primary.Options().Addr, func(ctx context.Context) *redis.PubSub { return primary.SSubscribe(ctx) }
}

// ReloadSubscriptionNodes has the client read the cluster's slot map again, so that SubscriptionNode names the
// primary that serves a channel's slot now (after a slot moved or a node's connection broke). Elsewhere there
// is one node and nothing to reload.
func (s *Store) ReloadSubscriptionNodes(ctx context.Context) {
	if cc, ok := s.rdb.(*redis.ClusterClient); ok {
		cc.ReloadState(ctx)
	}
}

// Listen subscribes ps to a board's channel (Channel), with the store's publish command.
func (s *Store) Listen(ctx context.Context, ps *redis.PubSub, channel string) error {
	if s.cfg.PublishCommand == PublishSharded {
		return ps.SSubscribe(ctx, channel)
	}
	return ps.Subscribe(ctx, channel)
}

// Unlisten unsubscribes ps from a channel.
func (s *Store) Unlisten(ctx context.Context, ps *redis.PubSub, channel string) error {
	if s.cfg.PublishCommand == PublishSharded {
		return ps.SUnsubscribe(ctx, channel)
	}
	return ps.Unsubscribe(ctx, channel)
}

// Sharded reports whether the store's channels are sharded (SPUBLISH) on a Redis Cluster, where a subscription
// connection serves the slots of one primary (SubscriptionNode).
func (s *Store) Sharded() bool {
	_, cluster := s.rdb.(*redis.ClusterClient)
	return cluster && s.cfg.PublishCommand == PublishSharded
}

// IsScriptError reports whether err is a script's own refusal (an LB_<CODE> error reply: bad input, not found,
// a conflict...), not a failure of Redis.
func IsScriptError(err error) bool {
	return err != nil && strings.Contains(err.Error(), "LB_")
}

// Watched reports whether a board is watched (see Watch).
// On a sharded board it reports whether every shard is watched.
func (s *Store) Watched(ctx context.Context, board string) (bool, error) {
	bases := []string{s.keyBase(board)}
	if cb, err := s.loadBoard(ctx, board); err == nil && cb.b.Sharded() {
		bases = cb.shards
	}
	for _, base := range bases {
		n, err := s.rdb.Exists(ctx, keyWatch.of(base)).Result()
		if err != nil || n != 1 {
			return false, redisError(err)
		}
	}
	return true, nil
}
