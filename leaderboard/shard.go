package leaderboard

import (
	"encoding/base64"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
)

// Sharded boards. A board of S shards (Board.Shards, 2..MaxShards) keeps each player on one shard (ShardOf: a hash
// of the player id) and each shard in a hash slot of its own, so that one hot board's writes spread over the
// primaries of a Redis Cluster. A shard is laid out as a board of its own under its key base (ShardKeyBase): the
// same keys, the same scripts, the same definition (so check_def holds every shard to it). Shard 0's key base is
// the board's own: a board of one shard is today's layout, and shard 0 holds what the board has once (its
// definition in the board list, its counters, its outbox).
//
// Fair ties across shards: the scripts order equal scores by arrival token, and a shard's own counter would make
// tokens of different shards incomparable. A sharded board's arrival numbers come from one board-wide counter on
// shard 0 instead (arrivals.lua), taken in blocks: the submissions waiting in a process share one INCRBY
// (shardwrite.go), so the order of equal scores is the order in which submissions reached that counter. The ledger's
// sequence would serve too, but sharded boards do not run on the ledger yet (CreateBoard refuses them).
//
// Reads merge the shards (shardread.go): rank = 1 + the players ahead (score, then token) on every shard; top K =
// the merge of every shard's top K; aroundMe = the merge of every shard's neighbours of the player's (score, token).
//
// exactTop: every shard keeps the board's exactTop players exact. The board's best exactTop players are then in
// the union of the shards' exact tiers (a player beyond its shard's exact tier has exactTop players ahead on that
// shard alone), so ranks 1..exactTop of the merge are exact while every shard's tier is full (else see tailCut);
// beyond, a rank adds every shard's tail estimate (tail_before of its histogram) and is Approximate, as on a board
// of one shard.
const (
	MaxShards = 64 // most shards of a board
	// MaxShardedDepth bounds offset+first of Top on a sharded board: every shard sends that many rows to merge.
	MaxShardedDepth = 10_000
)

// normalizeShards fills the default (1) and checks the range.
func (b *Board) normalizeShards() error {
	if b.Shards == 0 {
		b.Shards = 1
	}
	if b.Shards < 1 || b.Shards > MaxShards {
		return errorf(Invalid, "shards must be between 1 and %d", MaxShards)
	}
	return nil
}

// Sharded reports whether the board keeps its players in more than one shard.
func (b *Board) Sharded() bool { return b.Shards > 1 }

// storedShards is the stored form of a normalized Shards: 0 for one shard, so definitions stored before the field
// existed stay equal to new ones.
func storedShards(n int) int {
	if n == 1 {
		return 0
	}
	return n
}

// ShardOf returns the shard (0..shards-1) that keeps a player: FNV-1a of the id, modulo shards.
func ShardOf(player string, shards int) int {
	if shards <= 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(player))
	return int(h.Sum32() % uint32(shards))
}

// ShardKeyBase returns the key base of shard i of a board of shards shards in a store whose keys start with prefix.
// Shard 0's is the board's own (KeyBase). Shard i's tag is the board's tag, '.' (never in base64url, so no board's
// tag) and the smallest number that puts it in the i-th of shards equal ranges of slots counted from shard 0's:
// the shards' slots spread evenly over the slot space, and so over the primaries of a cluster whose primaries hold
// ranges of it (as CLUSTER ADDSLOTSRANGE and redis-cli --cluster create give them).
func ShardKeyBase(prefix, board string, i, shards int) string {
	tag := base64.RawURLEncoding.EncodeToString([]byte(board))
	return prefix + ":{" + shardTag(tag, i, shards) + "}:"
}

// shardTag is the hash tag of shard i (see ShardKeyBase).
func shardTag(tag string, i, shards int) string {
	if i == 0 {
		return tag
	}
	r := (slotRange(HashSlot("{"+tag+"}"), shards) + i) % shards
	lo, hi := r*clusterSlots/shards, (r+1)*clusterSlots/shards
	buf := make([]byte, 0, len(tag)+12)
	for n := 0; ; n++ {
		buf = append(append(buf[:0], tag...), '.')
		buf = strconv.AppendInt(buf, int64(n), 10)
		// HashSlot of the bare tag: the key has no braces, so its whole text is hashed.
		if slot := HashSlot(string(buf)); slot >= lo && slot < hi {
			return string(buf)
		}
	}
}

// clusterSlots is how many hash slots a Redis Cluster has.
const clusterSlots = 16384

// slotRange returns which of shards equal ranges of the slot space holds slot: range r is the slots from
// r*16384/shards to (r+1)*16384/shards, rounded down, the latter excluded.
func slotRange(slot, shards int) int {
	r := slot * shards / clusterSlots
	if (r+1)*clusterSlots/shards <= slot { // slot*shards/16384 rounds down below a boundary that rounds down too
		r++
	}
	return r
}

// shardBases returns the key bases of a board's shards (one: the board's own).
func (s *Store) shardBases(board string, shards int) []string {
	out := make([]string, shards)
	for i := range out {
		out[i] = ShardKeyBase(s.cfg.Prefix, board, i, shards)
	}
	return out
}

// ShardKeyBases returns the key bases of every shard of a board (one for an unsharded board), for tools and tests
// that look at its keys.
func (s *Store) ShardKeyBases(b *Board) []string { return s.shardBases(b.ID, max(b.Shards, 1)) }

// approxAt reports whether rank is estimated on a sharded board: beyond exactTop (see above).
func (b *Board) approxAt(rank int64) bool { return b.ExactTop > 0 && rank > int64(b.ExactTop) }

// tailCut is where a shard's tail may begin on a sharded exactTop board: the internal score from which its tail
// players may rank (set: at x; unset: nowhere). The argument above (a player beyond its shard's exact tier has
// exactTop players ahead there) holds while the shard's tier is full. A drop on LATEST or SUM, or a removal, can
// leave a shard's tier with fewer than exactTop players while its tail holds some (tail players are not ordered,
// so none moves up, as on a board of one shard): those may then rank anywhere from the tail's bound on, also
// within the board's best exactTop. So a place is exact only when its player is in its own shard's exact tier
// (which that shard orders before its tail) and it is before the cut of every other shard whose tier has such a
// gap (othersCut); top, aroundMe and exports list the board's exact tier only, which ends at the first place
// that is not exact (exactPrefix).
type tailCut struct {
	set bool
	x   float64
}

// holds reports whether internal score x is before the cut.
func (c tailCut) holds(x float64) bool { return !c.set || x < c.x }

// gapCut is the cut of a shard with exact players in its tier and a tail bound tail (empty: no tail): set when the
// tier has a gap (fewer than exactTop players while the tail holds some).
func (b *Board) gapCut(exact int64, tail string) (tailCut, error) {
	if tail == "" || b.ExactTop == 0 || exact >= int64(b.ExactTop) {
		return tailCut{}, nil
	}
	x, err := strconv.ParseFloat(tail, 64)
	if err != nil {
		return tailCut{}, fmt.Errorf("bad tail bound %q", tail)
	}
	return tailCut{true, x}, nil
}

// othersCut is the first of the cuts of every shard but shard j (cuts: by shard).
func othersCut(cuts []tailCut, j int) tailCut {
	var c tailCut
	for k, o := range cuts {
		if k != j && o.set && (!c.set || o.x < c.x) {
			c = o
		}
	}
	return c
}

// exactPrefix is how many of rows (merged, each from its player's shard's exact tier) the board's exact tier
// holds: those before the first one that another shard's tail may precede (cuts: by shard).
func exactPrefix(rows []shardRow, cuts []tailCut) int {
	if !slices.ContainsFunc(cuts, func(c tailCut) bool { return c.set }) {
		return len(rows)
	}
	for i, row := range rows {
		if !othersCut(cuts, ShardOf(row.player, len(cuts))).holds(row.x) {
			return i
		}
	}
	return len(rows)
}

// exactRows bounds a count of listed rows by the board's exact tier (exactTop; none: n).
func (b *Board) exactRows(n int64) int64 {
	if b.ExactTop > 0 {
		return min(n, int64(b.ExactTop))
	}
	return n
}
