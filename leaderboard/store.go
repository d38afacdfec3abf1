package leaderboard

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed common.lua
	commonLuaSource string
	// commonLua is common.lua with the parts Go owns rendered in (renderCommon): the text every script starts with.
	commonLua = renderCommon(commonLuaSource)
	//go:embed submit.lua
	submitLua string
	//go:embed remove.lua
	removeLua string
	//go:embed top.lua
	topLua string
	//go:embed ranks.lua
	ranksLua string
	//go:embed rank.lua
	rankLua string
	//go:embed around.lua
	aroundLua string
	//go:embed create.lua
	createLua string
	//go:embed rankscore.lua
	rankAtLua string
	//go:embed season.lua
	seasonLua string
	//go:embed restore_done.lua
	restoreDoneLua string
	//go:embed mark.lua
	markLua string

	// The score bound is the Go constant's, so the script and the validation in Go cannot disagree.
	submitScript = newScript("submit", fmt.Sprintf("local MAX_SCORE = %d\n", MaxScore)+submitLua, false).
			withItems(submitHeaderArgs, submitCountArg)
	removeScript = newScript("remove", removeLua, false)
	topScript    = newScript("top", topLua, true)
	ranksScript  = newScript("ranks", ranksLua, true)
	rankScript   = newScript("rank", rankLua, true).withItems(rankHeaderArgs, rankCountArg)
	aroundScript = newScript("around", aroundLua, true)
	createScript = newScript("create", createLua, false)
	rankAtScript = newScript("rankscore", rankAtLua, true) // the rank a score would get (RankForScore)
	seasonScript = newScript("season", seasonLua, false)
	// The ledgered scripts (ledgered.go): the same bodies behind the ledger's gate.
	submitLedgerScript = submitScript.ledgered()
	removeLedgerScript = removeScript.ledgered()
	createLedgerScript = createScript.ledgered()
	seasonLedgerScript = seasonScript.ledgered()
	restoreDoneScript  = newScript("restore_done", restoreDoneLua, false)
	markLedgerScript   = newScript("mark", markLua, false).ledgered()
	closeLedgerScript  = closeScript.ledgered()
	library            = newLibrary(submitScript, removeScript, topScript, ranksScript, rankScript, aroundScript,
		createScript, rankAtScript, seasonScript, closeScript, groupScript, deadLetterScript, resendScript, deleteScript,
		purgeScript, watchScript, fenceScript, snapshotScript, snapPageScript, snapKeysScript,
		submitLedgerScript, removeLedgerScript, createLedgerScript, seasonLedgerScript, restoreDoneScript,
		markLedgerScript, closeLedgerScript, arrivalsScript, shardNearScript, shardResultScript, passLedgerScript)
)

// Publish commands for Config.PublishCommand.
const (
	PublishSharded = "SPUBLISH" // Redis 7 sharded pub/sub: a board's events stay on its cluster shard
	PublishPlain   = "PUBLISH"  // classic pub/sub, for servers without SPUBLISH (the embedded store)
	PublishNone    = "none"     // publish nothing
)

// Config configures a Store. Every field has a usable zero value.
type Config struct {
	// Prefix starts every key. Default "lb". Must not contain '{' or '}'.
	Prefix string
	// Clock tells the time that decides periods. Default time.Now.
	Clock func() time.Time
	// PublishCommand is how the submit and remove scripts announce changes. Default PublishSharded.
	PublishCommand string
	// BulkWorkers bounds how many boards SubmitMany writes in parallel. Default 8.
	BulkWorkers int
	// ClockSkew is how far in the future achievedAt may be before it is rejected. Default 1 minute.
	ClockSkew time.Duration
	// MaxReads and MaxWrites bound the read calls (top, ranks, around, friends, size, board lists) and the write
	// calls (one per board of a submission batch, removals, creations) this store has in flight on Redis, so that
	// a flood of one kind cannot take the connections the other needs; size the Redis pool for both. A call that
	// finds no slot within QueueWait is RATE_LIMITED. 0: no bound (the default; the live hub's store has none).
	MaxReads, MaxWrites int
	// QueueWait is how long a call waits for a slot. Default 1 second.
	QueueWait time.Duration
	// BatchLanes, when above 0, sends the script calls of concurrent requests to Redis together, in pipelines
	// of up to 64 calls on BatchLanes connections at once (see batcher); each call stays its own atomic script.
	// 0 (the default): every call goes on its own.
	BatchLanes int
	// SnapshotTTL is how long an export's snapshot (Snapshot) outlives its last renewal, so that the copy of a
	// process that died mid-export frees itself. Default DefaultSnapshotTTL.
	SnapshotTTL time.Duration
	// Ledger, when set, is the durable record every write is committed to before Redis applies it (package
	// ledger; see ledgered.go). nil (the default): Redis alone holds the boards.
	Ledger Ledger
	// LedgerWorkers is how many boards' writes are recorded and applied at once with a ledger. Default
	// DefaultLedgerWorkers.
	LedgerWorkers int
	// OnRestore, when set, hears of every restore and catch-up of a board from the ledger (logs, metrics).
	OnRestore func(RestoreReport)
	// OutboxGroups are the consumer groups that deliver the outboxes to webhooks (one per WEBHOOK_URLS entry,
	// internal/periodclose's Group). With a ledger, each version of a period's frozen standings records a
	// delivery for each of them, and a version whose delivery to one of them has not completed is sent again when
	// Redis lost its outbox entry (resend.go). Every process of a deployment should name the same.
	OutboxGroups []string
	// RestoreShare is the share of its time a restore from the ledger spends in its script calls: after each
	// call it rests for the rest, so that the other boards' writes keep their turns on Redis meanwhile. From
	// above 0 to 1 (no rest). Default DefaultRestoreShare.
	RestoreShare float64
	// RestoreRate is the most events a second a restore from the ledger (and a void's replay of a closed
	// period) applies, so that it leaves Redis and the machine to the other boards' writes; a catch-up is not
	// paced. Negative: no limit. Default DefaultRestoreRate.
	RestoreRate float64
}

// Store is the leaderboard service's data layer over one Redis (standalone or Cluster). It is safe for
// concurrent use.
type Store struct {
	rdb     redis.UniversalClient
	cfg     Config
	reads   *gate
	writes  *gate
	fns     *functions
	batch   *batcher      // nil: no batching
	boards  sync.Map      // board id -> *cachedBoard, until a script reports the definition changed or gone (see fresh)
	layouts recordLayouts // the record layouts the plain reads saw last (ranksplain.go)
	// The reads the plain reads answered (Ranks reads, and aroundMe reads by player), of them the aroundMe reads,
	// and their snapshots that did not prove round 1 (PlainStats).
	plainReads, plainArounds, plainRetries atomic.Int64
	groups                                 rankGroups // rank and aroundMe reads without a script, by view (rankgroup.go)

	seq       *sequencer // nil without a ledger
	restoring sync.Map   // board id -> *cachedBoard of a board being restored (not readable, so not in boards)
	// undefined are the boards the last ledger check found in the ledger and without a definition in Redis
	// (CheckLedger restores those it finds so twice in a row); guarded by undefinedMu.
	undefinedMu sync.Mutex
	undefined   map[string]bool

	// forgets counts forget calls; forgetMu orders them with loadBoard's caching: a definition read before a forget
	// (the board deleted and maybe created again since) is not cached after it.
	forgetMu sync.Mutex
	forgets  uint64
	// resendAfter is the ledger key after which the next ledger check looks for close events to send again
	// (resend.go).
	resendAfter atomic.Int64

	// The ids of all boards, read from every slot's board list at most once per boardListTTL (one pipeline of
	// 16384 SMEMBERS) however many callers ask; CreateBoard and forget update it (listChange). listMu guards the
	// fields and is never held across a Redis call: the hub's Redis reader forgets deleted boards (Store.Forget)
	// and must not wait for a read of the lists, which listFill serializes. The changes made while a read runs
	// (listPending, while listFilling) are applied to what it read.
	listMu      sync.Mutex
	listIDs     []string
	listRead    time.Time
	listFilling bool
	listPending []listEdit
	listFill    sync.Mutex
}

// listEdit is a change of the board list: a board created (add) or forgotten.
type listEdit struct {
	id  string
	add bool
}

// listChange applies a change to the cached board list, and to the read of the lists running, if any.
func (s *Store) listChange(id string, add bool) {
	s.listMu.Lock()
	defer s.listMu.Unlock()
	if s.listFilling {
		s.listPending = append(s.listPending, listEdit{id, add})
	}
	if !s.listRead.IsZero() {
		s.listIDs = editList(s.listIDs, listEdit{id, add})
	}
}

// editList returns the sorted ids with e applied (a copy when it changes them: callers hold the old slice).
func editList(ids []string, e listEdit) []string {
	i, found := slices.BinarySearch(ids, e.id)
	switch {
	case e.add && !found:
		return slices.Insert(slices.Clone(ids), i, e.id)
	case !e.add && found:
		return slices.Delete(slices.Clone(ids), i, i+1)
	}
	return ids
}

// boardListTTL is how long Boards may answer from the last read of the board lists.
const boardListTTL = time.Second

// New returns a Store over rdb.
func New(rdb redis.UniversalClient, cfg Config) *Store {
	if cfg.Prefix == "" {
		cfg.Prefix = "lb"
	}
	cfg.Prefix = strings.NewReplacer("{", "", "}", "").Replace(cfg.Prefix)
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.PublishCommand == "" {
		cfg.PublishCommand = PublishSharded
	}
	if cfg.BulkWorkers <= 0 {
		cfg.BulkWorkers = 8
	}
	if cfg.ClockSkew <= 0 {
		cfg.ClockSkew = time.Minute
	}
	if cfg.QueueWait <= 0 {
		cfg.QueueWait = time.Second
	}
	s := &Store{rdb: rdb, cfg: cfg, reads: newGate(cfg.MaxReads, cfg.QueueWait),
		writes: newGate(cfg.MaxWrites, cfg.QueueWait), fns: newFunctions(rdb, library),
		groups: rankGroups{views: map[rankGroupKey]*rankGroup{}}}
	if cfg.BatchLanes > 0 {
		s.batch = newBatcher(s.fns, cfg.BatchLanes)
	}
	if cfg.Ledger != nil {
		s.seq = newSequencer(s, cfg.Ledger, cfg.LedgerWorkers)
	}
	return s
}

// run runs a script, through the batcher when there is one.
func (s *Store) run(ctx context.Context, sc *script, keys []string, args ...any) *redis.Cmd {
	if s.batch != nil {
		return s.batch.run(ctx, sc, keys, args...)
	}
	return s.fns.run(ctx, sc, keys, args...)
}

// Drain waits until the script calls the store sent through its batcher are done, or ctx ends: a caller that
// gave up leaves its call running, and closing Redis under it would make a failure of it. A no-op without one.
func (s *Store) Drain(ctx context.Context) {
	if s.batch != nil {
		s.batch.drain(ctx)
	}
}

// Redis returns the client the store uses.
func (s *Store) Redis() redis.UniversalClient { return s.rdb }

// Prefix returns the prefix of every key of the store.
func (s *Store) Prefix() string { return s.cfg.Prefix }

// Now returns the store's current time.
func (s *Store) Now() time.Time { return s.cfg.Clock() }

// PublishCommand returns the command the scripts publish changes with (PublishSharded, PublishPlain or
// PublishNone).
func (s *Store) PublishCommand() string { return s.cfg.PublishCommand }

// cachedBoard is what the store keeps of a board it read or created: the definition and what the calls on the
// board derive from it alone, made once instead of on every call (a submission made 20 small objects of them).
type cachedBoard struct {
	b    *Board
	keys string // keyBase
	// submitHead is the submit script's header (submitHeaderArgs) for this board and store, with 0 where a call
	// puts its own values (submitNowArg, submitCountArg, submitFieldsArg). Shared: never written.
	submitHead []any
	// shards: the key bases of a sharded board's shards (shard.go), shards[0] = keys; nil for one shard.
	shards []string
	// arrivals hands out a sharded board's arrival numbers (shardwrite.go); nil for one shard.
	arrivals *arrivalQueue
	// scratch: a replay into scratch keys (scratch.go), whose keys live by each event's own clock, so that
	// periods whose keys have expired by today's are written too.
	scratch bool
}

// cacheBoard keeps b, the board id whose definition has SHA-1 b.sum, in the definition cache.
func (s *Store) cacheBoard(id string, b *Board) *cachedBoard {
	v := s.newCachedBoard(id, b)
	s.boards.Store(id, v)
	return v
}

// newCachedBoard is what the store derives from a board's definition.
func (s *Store) newCachedBoard(id string, b *Board) *cachedBoard {
	keys := s.makeKeyBase(id)
	codes := make([]string, len(b.Windows))
	for i, w := range b.Windows {
		codes[i] = windowCodes[w]
	}
	head := []any{b.sum, strings.ToLower(string(b.Order[:1])), strings.ToLower(string(b.Mode)), b.ExactTop,
		optFloat(b.MinScore), optFloat(b.MaxScore), int64(b.dedupeTTL() / time.Second), LiveTop,
		s.publishArg(), channelOf(keys), strings.Join(codes, ","), 0, 0, b.MaxSubmitsPerMinute, 0}
	v := &cachedBoard{b: b, keys: keys, submitHead: head}
	if b.Sharded() {
		v.shards = s.shardBases(id, b.Shards)
		v.arrivals = &arrivalQueue{}
	}
	return v
}

// Channel returns the pub/sub channel on which a board's changes are published. It carries the board's hash
// tag, so with SPUBLISH it lives on the board's shard.
func (s *Store) Channel(board string) string {
	if v, ok := s.boards.Load(board); ok {
		return v.(*cachedBoard).submitHead[submitChannelArg].(string)
	}
	return channelOf(s.makeKeyBase(board))
}

// CreateBoard stores a new board definition and lists it among the boards, in one script. Creating an id that
// exists with the same definition returns it; with a different definition it is a Conflict.
func (s *Store) CreateBoard(ctx context.Context, b Board) (*Board, error) {
	if err := b.normalize(); err != nil {
		return nil, err
	}
	def := b.encode()
	if s.seq != nil {
		if err := s.createLedgered(ctx, b.ID, def); err != nil {
			return nil, err
		}
	} else if b.Sharded() {
		if err := s.createSharded(ctx, &b, def); err != nil {
			return nil, err
		}
	} else if err := s.createFinishingPurge(ctx, []string{s.keyBase(b.ID), s.registryKey(b.ID)}, def, b.ID, ""); err != nil {
		return nil, err
	}
	nb := b
	nb.sum = defSum(def)
	s.cacheBoard(b.ID, &nb)
	s.listChange(b.ID, true)
	return &nb, nil
}

// Board returns a board's definition, or a NotFound error. Definitions are cached; a script that finds the
// board gone or re-created with another definition makes the store forget (and reload) it.
func (s *Store) Board(ctx context.Context, id string) (*Board, error) {
	v, err := s.loadBoard(ctx, id)
	if err != nil {
		return nil, err
	}
	return v.b, nil
}

// loadBoard is Board with what the store derives from the definition (cachedBoard).
func (s *Store) loadBoard(ctx context.Context, id string) (*cachedBoard, error) {
	if v, ok := s.boards.Load(id); ok {
		return v.(*cachedBoard), nil
	}
	if err := checkID("board id", id); err != nil {
		return nil, err
	}
	s.forgetMu.Lock()
	gen := s.forgets
	s.forgetMu.Unlock()
	def, err := s.rdb.Get(ctx, keyDef.of(s.makeKeyBase(id))).Result()
	if errors.Is(err, redis.Nil) {
		return nil, s.missing(ctx, id)
	}
	if err != nil {
		return nil, redisError(err)
	}
	b, err := decodeBoard(def)
	if err != nil {
		return nil, &Error{Code: Internal, Message: "internal error", Err: err}
	}
	// Cached unless a forget came since the read: the definition may be of a board deleted since, and no script
	// would tell a read of a window only the new board has that it is stale (Resolve refuses it first).
	s.forgetMu.Lock()
	defer s.forgetMu.Unlock()
	if s.forgets != gen {
		return s.newCachedBoard(id, b), nil
	}
	return s.cacheBoard(id, b), nil
}

// fresh runs f, an operation on one board; when a script found that the cached definition of the board is out
// of date, the definition is reloaded and f runs once more. A board that is gone is forgotten.
func (s *Store) fresh(board string, f func() error) error {
	err := f()
	if errors.Is(err, errStaleDef) {
		s.boards.Delete(board)
		err = f()
	}
	if errors.Is(err, errStaleDef) || ErrorCode(err) == NotFound {
		s.boards.Delete(board)
	}
	if s.seq != nil && ErrorCode(err) == NotFound {
		err = s.missing(context.Background(), board)
	}
	return err
}

// Boards returns every board Redis holds, ordered by id. The list may be up to a second old (boards created by
// this store are always in it). The server's loops (closes, webhooks) go by it: a board Redis lost is not theirs
// until it is restored, and must not hold up the others.
func (s *Store) Boards(ctx context.Context) ([]*Board, error) {
	ids, err := s.boardIDs(ctx)
	if err != nil {
		return nil, err
	}
	return s.boardsOf(ctx, ids, true)
}

// ListBoards is Boards as clients read it (leaderboards): with the ledger, every board it holds is in it, or the
// list is UNAVAILABLE while Redis lacks one (sequencer.unlisted), never a list without it.
func (s *Store) ListBoards(ctx context.Context) ([]*Board, error) {
	ids, err := s.boardIDs(ctx)
	if err != nil {
		return nil, err
	}
	if s.seq != nil {
		if ids, err = s.seq.unlisted(ctx, ids); err != nil {
			return nil, err
		}
	}
	return s.boardsOf(ctx, ids, false)
}

// boardsOf returns the boards of ids that exist, and without the ones being restored from the ledger when
// skipRestoring is set (else such a board is the list's error).
func (s *Store) boardsOf(ctx context.Context, ids []string, skipRestoring bool) ([]*Board, error) {
	out := make([]*Board, 0, len(ids))
	for _, id := range ids {
		b, err := s.Board(ctx, id)
		if ErrorCode(err) == NotFound || skipRestoring && errors.Is(err, errRestoringNow) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// boardIDs returns the sorted ids of every board list.
func (s *Store) boardIDs(ctx context.Context) ([]string, error) {
	// cached returns the cached list while it is fresh; when it is not and fill is set (listFill held), the changes
	// from now on are kept for the read about to begin.
	cached := func(fill bool) ([]string, bool) {
		s.listMu.Lock()
		defer s.listMu.Unlock()
		if !s.listRead.IsZero() && time.Since(s.listRead) < boardListTTL {
			return s.listIDs, true
		}
		if fill {
			s.listFilling, s.listPending = true, nil
		}
		return nil, false
	}
	if ids, ok := cached(false); ok {
		return ids, nil
	}
	s.listFill.Lock() // one read of the lists at a time; the callers meanwhile take its result
	defer s.listFill.Unlock()
	if ids, ok := cached(true); ok {
		return ids, nil
	}
	defer func() {
		s.listMu.Lock()
		s.listFilling, s.listPending = false, nil
		s.listMu.Unlock()
	}()
	release, err := s.reads.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	// One SMEMBERS per slot's board list, pipelined (go-redis sends one batch to each cluster node).
	tags := slotTags()
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.StringSliceCmd, len(tags))
	for i, tag := range tags {
		cmds[i] = pipe.SMembers(ctx, s.registryOf(tag))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, redisError(err)
	}
	var ids []string
	for _, c := range cmds {
		ids = append(ids, c.Val()...)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	s.listMu.Lock()
	defer s.listMu.Unlock()
	for _, e := range s.listPending { // boards created or forgotten while the lists were read
		ids = editList(ids, e)
	}
	s.listIDs, s.listRead = ids, time.Now()
	return ids, nil
}
