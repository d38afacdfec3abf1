package leaderboard

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
)

// The key layout of a board, and its one owner. Go builds every key it names with the functions below, and the
// scripts name the same keys through common.lua's K (board keys) and key builders (period keys), which are not
// written in common.lua: renderCommon renders them from the same two tables (boardKeyTable, windowKeyTable) into
// common.lua where it says "-- @keys" (luaKeys). So a read without a script and a script cannot name a key
// differently; TestLuaKeysMatchGo holds the rendered Lua to the Go
// builders on Redis, and TestScriptsGlueNoKeys keeps the scripts from gluing a key of their own.
//
// Every key of a board starts with its key base "<prefix>:{<tag>}:" (keyBase; KEYS[1] of every script, base in
// common.lua), so all of them are in one cluster slot and every script on a board is atomic. The keys after it:
var (
	// keyDef (def): the board definition (JSON). ARGV[1] of every script is the SHA-1 of the definition the caller
	// holds: a script refuses to run on a board that was deleted or re-created with another definition
	// (check_def).
	keyDef = boardKey{"def", "def"}
	// keyRestoreDef (rdef): the definition of a board being restored, which waits there while the board is
	// rebuilt (nobody reads a board without def) until restore_done.lua moves it to def.
	keyRestoreDef = boardKey{"rdef", "rdef"}
	// keyNames (m): playerId -> {"n": displayName, "m": metadata}; on boards without ALL_TIME it expires with the
	// last period written.
	keyNames = boardKey{"m", "names"}
	// keyCounters (c): board counters: ver (version of published changes), ep (epoch of ver: set when ver starts,
	// so a counter that started again is never mistaken for the old one), lsq (the seq of the last ledger event
	// applied, see the ledger's gate in common.lua), void (the last void applied), arr (shard 0 of a sharded
	// board: its board-wide arrival counter, arrivals.lua), born (when create.lua created the board, Redis's
	// TIME: tells a board created again with the same definition from the one before; a restore from the ledger
	// sets none, BoardMark), lbk (the ledger's key of the board, boardKeyField).
	keyCounters = boardKey{"c", "counters"}
	// keyEvent (e:<eventId>): the first result of an eventId, with the fingerprint of its payload.
	keyEvent = boardKey{"e:", "event"}
	// keyLimit (l:<minute>:<player>): submissions of a player in one minute of the caller's clock (unix s / 60),
	// on boards with a submission limit; expires after LIMIT_TTL seconds (see limit_key).
	keyLimit = boardKey{"l:", "limit"}
	// keyWatch (watch): present while some process watches single players' ranks on this board.
	keyWatch = boardKey{"watch", "watch"}
	// keySeason (season): the SEASON window's state (season.lua writes it, submit.lua reads it): cur, cs, ce, cx
	// (the latest season's id, start, end and key expiry, unix s; ce is the endsAt it was started with until it is
	// closed early, then the moment it closed), prev, ps, pe, px (the season before it, which late scores may
	// still reach), gms (the board's grace, ms), grace (the same in whole seconds, as servers before gms read it;
	// gms falls back to it).
	keySeason = boardKey{"season", "season"}
	// keySeasons (seasons): the seasons whose keys have not expired: id -> "<start>,<end>,<key expiry>" (unix s,
	// end as ce above).
	keySeasons = boardKey{"seasons", "seasons"}
	// keySeasonsUsed (seasons:used): the ids of the seasons that left seasons (season.lua moves them at the next
	// start): an id is never used twice.
	keySeasonsUsed = boardKey{"seasons:used", "seasons_used"}
	// keyOutbox (o): the outbox stream of close events (close.lua appends; outboxKey).
	keyOutbox = boardKey{"o", "outbox"}
	// keyDeadLetter (o:dead): close events whose webhook delivery gave up (deadLetterKey).
	keyDeadLetter = boardKey{"o:dead", "dead_letter"}
	// keyTomb (del): the tombstone of a deletion still being purged (delete.lua, purge.lua): the token of that
	// deletion (on a sharded board's shard 0, with its shard count: deletionToken); no def then, and create.lua
	// refuses the id until the purge removes it.
	keyTomb = boardKey{"del", "tomb"}
	// keyRestoring (restoring): the lock of a restore of the board (restore.go).
	keyRestoring = boardKey{"restoring", "restoring"}
	// keyLive (live): not a key but the board's pub/sub channel (channelOf), named like its keys so that it
	// carries the board's hash tag.
	keyLive = boardKey{"live", "live"}
	// keySnap (snap:<id>:<part>): an export's copy of one window period at one moment (snapshot.lua; snapshot.go
	// owns it): s (its state: cnt, lvl, sp, hv as the period's, rows, nb record hashes), z, m, and r:<n> in the
	// period's record layout, after snap_base(id). Every part has a TTL that the export renews. Go never names a
	// part, only the family (SnapshotKeys).
	keySnap = boardKey{"snap:", "snap"}
)

// boardKeyTable is every boardKey: common.lua's K has a field for each.
var boardKeyTable = []boardKey{keyDef, keyRestoreDef, keyNames, keyCounters, keyEvent, keyLimit, keyWatch, keySeason,
	keySeasons, keySeasonsUsed, keyOutbox, keyDeadLetter, keyTomb, keyRestoring, keyLive, keySnap}

// The keys of a window period, "<name>:<window code>:<period>" (and ":<n>" for the numbered ones). Every period key
// gets a TTL relative to the caller's clock (ARGV "now"), never an absolute time, so a key is never written
// already expired, whatever Redis's own clock says.
var (
	// keyRanking (z, zkey): sorted set, the exact ranking. Score: the score, negated on DESC boards, so that one
	// ascending order serves both; member: arrival token .. playerId, so equal scores rank by first arrival (see
	// token() in common.lua, arrivalToken).
	keyRanking = windowKey{"z", "zkey", false}
	// keyRecords (r, rkey): player records, linear-hashed into small hashes numbered n (kept in Redis's compact
	// listpack encoding): playerId -> "<updatedAt, 10 digits><arrival number>" or, for players beyond exactTop,
	// "<updatedAt><arrival number>:<internal score>" (make_rec in common.lua; record.go reads them).
	keyRecords = windowKey{"r", "rkey", true}
	// keyState (s, skey): state: seq/sqh (arrival counter, low and high part), cnt (players), lvl/sp (record
	// hashing), hv (the version of the hash that places records, see phash; absent: 1), tn/tb (tail count and
	// bound), szp (ms of the last published size change).
	keyState = windowKey{"s", "skey", false}
	// keyHistogram (h, hkey): histogram of tail scores (exactTop boards), a Fenwick tree over score buckets (fields
	// 1..FN), and "w<bucket>" flags for buckets with too many distinct scores to count each.
	keyHistogram = windowKey{"h", "hkey", false}
	// keyTailScores (v, vkey; n is the histogram bucket): the tail players of a histogram bucket counted per
	// distinct internal score, while the bucket holds at most VMAX distinct scores (see tail_before).
	keyTailScores = windowKey{"v", "vkey", true}
	// keyFence (x, fence_key): the close fence: present once the period is closed, which makes its standings
	// final: every script that writes a period refuses a fenced one. close.lua sets it in the step that reads the
	// standings for the close event, so the event and the period agree for ever; it holds the event's outbox id
	// ('' when the period closed without one: nobody played) and lives at least as long as the period's keys. Go
	// reads it through fence.lua.
	keyFence = windowKey{"x", "fence_key", false}
)

// windowKeyTable is every windowKey: common.lua has a builder function for each.
var windowKeyTable = []windowKey{keyRanking, keyRecords, keyState, keyHistogram, keyTailScores, keyFence}

// boardKey is a key of a board, or the prefix of a family of keys ("e:", "l:", "snap:"): name follows the key
// base. lua is its field in common.lua's K (the scripts write base .. K.<lua>).
type boardKey struct {
	name, lua string
}

// of returns the key of the board whose key base is base.
func (k boardKey) of(base string) string { return base + k.name }

// windowKey is a key of a window period: "<name>:<window code>:<period>", and ":<n>" after it when numbered. lua is
// its builder in common.lua: lua(w, p) or, numbered, lua(w, p, n).
type windowKey struct {
	name, lua string
	numbered  bool
}

// at returns the key of window period (w, period) of the board whose key base is base; for a numbered key, the
// prefix its numbers follow is at(...) + ":" (recordsPrefix).
func (k windowKey) at(base string, w Window, period string) string {
	return base + k.name + ":" + windowCodes[w] + ":" + period
}

// atN returns numbered key n of window period (w, period).
func (k windowKey) atN(base string, w Window, period string, n uint64) string {
	return k.at(base, w, period) + ":" + strconv.FormatUint(n, 10)
}

// recordsPrefix is the start of the keys of a window period's record hashes, which their numbers follow
// (common.lua's rkey with n empty; recordLayout.key adds n).
func recordsPrefix(base string, w Window, period string) string {
	return keyRecords.at(base, w, period) + ":"
}

// keyBase returns the prefix of every key of a board: "<prefix>:{<tag>}:". The tag is the id in unpadded
// base64url, which cannot contain braces, so any id (braces, colons, emoji) gives a valid, unique hash tag. A
// board in the definition cache has it made already (every call on a board names its keys).
func (s *Store) keyBase(board string) string {
	if v, ok := s.boards.Load(board); ok {
		return v.(*cachedBoard).keys
	}
	return s.makeKeyBase(board)
}

// makeKeyBase makes keyBase without the definition cache.
func (s *Store) makeKeyBase(board string) string { return KeyBase(s.cfg.Prefix, board) }

// KeyBase returns the prefix of every key of board in a store whose keys start with prefix (as Store.Prefix gives
// it): "<prefix>:{<tag>}:" (keyBase). For tools and tests outside this package, with the keys below.
func KeyBase(prefix, board string) string {
	return prefix + ":{" + base64.RawURLEncoding.EncodeToString([]byte(board)) + "}:"
}

// CountersKey returns the counters of a board (keyCounters: its high-water mark lsq, ...), RestoreLockKey the lock
// a restore of it holds (keyRestoring), for tools and tests outside this package.
func CountersKey(prefix, board string) string    { return keyCounters.of(KeyBase(prefix, board)) }
func RestoreLockKey(prefix, board string) string { return keyRestoring.of(KeyBase(prefix, board)) }

// IsRankingKey reports whether key is the exact ranking (sorted set) of a board's window period (keyRanking),
// for tools that measure a board's keys.
func IsRankingKey(key string) bool { return strings.Contains(key, "}:"+keyRanking.name+":") }

// stateKey is the state hash of a window period of a board (common.lua's skey): its player count and layout.
func (s *Store) stateKey(board string, w Window, period string) string {
	return keyState.at(s.keyBase(board), w, period)
}

// outboxKey is the board's outbox stream; deadLetterKey the stream of events whose delivery gave up.
func (s *Store) outboxKey(board string) string     { return keyOutbox.of(s.keyBase(board)) }
func (s *Store) deadLetterKey(board string) string { return keyDeadLetter.of(s.keyBase(board)) }

// channelOf returns the channel of the board whose key base is keys.
func channelOf(keys string) string { return keyLive.of(keys) }

// BoardKeys returns the SCAN/KEYS pattern that matches every key of a board (for tests and tools; SCAN with it
// on every node of a cluster).
func (s *Store) BoardKeys(board string) (pattern string) {
	return globEscape(s.keyBase(board)) + "*"
}

// SnapshotKeys returns the SCAN/KEYS pattern that matches the keys of every snapshot of a board (for tests and
// tools, as BoardKeys).
func (s *Store) SnapshotKeys(board string) string {
	return globEscape(keySnap.of(s.keyBase(board))) + "*"
}

// globEscape escapes the bytes that a SCAN/KEYS pattern reads as wildcards.
func globEscape(s string) string {
	return strings.NewReplacer("*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`).Replace(s)
}

// registryKey returns the board list that holds board's id: one set per cluster hash slot, named with a tag of
// that slot, so that the create script registers a board in the same atomic step as its definition (a script may
// only touch keys of one slot). Registry tags start with '~', which base64url board tags never contain.
func (s *Store) registryKey(board string) string {
	return s.registryOf(slotTag(HashSlot(s.keyBase(board))))
}

// registryOf returns the board list of the slot whose registry tag is tag (slotTag).
func (s *Store) registryOf(tag string) string { return s.cfg.Prefix + ":{" + tag + "}:boards" }

// keysMarker is the line of common.lua that renderCommon replaces with luaKeys.
const keysMarker = "-- @keys (rendered from keys.go)\n"

// luaKeys renders the key layout for common.lua: K, the name of every board key after the key base, and a builder
// per period key.
func luaKeys() string {
	var b strings.Builder
	b.WriteString("-- rendered from keys.go (luaKeys): the keys of a board after its base, and their builders\n")
	b.WriteString("local K = {")
	for i, k := range boardKeyTable {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, " %s = %s", k.lua, luaString(k.name))
	}
	b.WriteString(" }\n")
	for _, k := range windowKeyTable {
		if k.numbered {
			fmt.Fprintf(&b, "local function %s(w, p, n) return base .. %s .. w .. ':' .. p .. ':' .. n end\n", k.lua,
				luaString(k.name+":"))
		} else {
			fmt.Fprintf(&b, "local function %s(w, p) return base .. %s .. w .. ':' .. p end\n", k.lua,
				luaString(k.name+":"))
		}
	}
	return b.String()
}

// luaString quotes a key name for Lua; names are plain ASCII without quotes or backslashes.
func luaString(s string) string {
	if strings.ContainsAny(s, `'\`) || strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r > '~' }) {
		panic("leaderboard: key name " + strconv.Quote(s) + " cannot be rendered")
	}
	return "'" + s + "'"
}
