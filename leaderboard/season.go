package leaderboard

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Seasons: the periods of a board's SEASON window are opened by an admin (StartSeason) and end at their endsAt,
// when the next one starts, or on EndSeason. A season covers [start, end): a score achieved in it counts for it,
// also when it arrives late, up to end + the board's grace; a score achieved while no season runs (or one whose
// season's grace is over) skips the SEASON window while the board's other windows take it. The state lives in the
// board's slot (keys 'season' and 'seasons', see common.lua) and every submit reads it inside its own script, so
// a submit lands wholly before or wholly after a start or end.

// Limits of seasons.
const (
	MaxSeasonIDBytes = 64                   // season ids: 1 to 64 bytes of A-Z a-z 0-9 . _ -, see CheckSeasonID
	MaxSeasonLength  = 400 * 24 * time.Hour // the longest season, from its start to its endsAt
)

// seasonIDChars is the charset of season ids: a letter or digit, then letters, digits, '.', '_' and '-'.
var seasonIDChars = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// calendarKeyShape matches the shapes of calendar period keys (2026-11-29, 2026-W48, 2026-11), valid dates or not.
var calendarKeyShape = regexp.MustCompile(`^[0-9]{4}-([0-9]{2}|[0-9]{2}-[0-9]{2}|[Ww][0-9]{2})$`)

// CheckSeasonID checks an admin-chosen season id: 1 to MaxSeasonIDBytes bytes of A-Z a-z 0-9 '.' '_' '-',
// starting with a letter or digit, and neither 'all' (any case) nor shaped like a calendar period key
// (2026-11-29, 2026-W48, 2026-11), so that a period key never reads as two things.
func CheckSeasonID(id string) error {
	if len(id) == 0 || len(id) > MaxSeasonIDBytes || !seasonIDChars.MatchString(id) {
		return errorf(Invalid, "a season id must be 1 to %d characters of A-Z a-z 0-9 . _ -, starting with a "+
			"letter or digit", MaxSeasonIDBytes)
	}
	if strings.EqualFold(id, AllPeriod) || calendarKeyShape.MatchString(id) {
		return errorf(Invalid, "season id %q is reserved: it reads as a calendar period key", id)
	}
	return nil
}

// SeasonInfo is one season of a board.
type SeasonInfo struct {
	ID        string
	StartedAt time.Time
	// EndsAt is when the season ends or ended: the endsAt it was started with, or the moment StartSeason (of the
	// next season) or EndSeason closed it early.
	EndsAt time.Time
	// Running is true while the store's clock is before EndsAt.
	Running bool
	// ReadableUntil is when its keys expire: its planned endsAt plus the grace plus Retention times its planned
	// length. Until then it stays readable by its id.
	ReadableUntil time.Time
}

// SeasonChange is the outcome of StartSeason or EndSeason.
type SeasonChange struct {
	Season SeasonInfo // the latest season after the call: the one started, or the one ended
	// Changed is false when the call changed nothing: a retried StartSeason of the running season with the same
	// endsAt, or EndSeason while no season runs.
	Changed bool
	// Closed is the season this call closed early (its End is the moment it closed), nil when none. Its scores
	// are final at Closed.EndsAt plus the board's grace.
	Closed *SeasonInfo
}

// seasonBoard loads a board and checks that it keeps the SEASON window.
func (s *Store) seasonBoard(ctx context.Context, board string) (*Board, error) {
	return s.windowBoard(ctx, board, Season)
}

// seasonExpiry returns when (unix s) the keys of a season from start to endsAt expire: after endsAt, the grace
// and Retention times the season's length, the way a calendar period stays readable for Retention periods after
// it. In seconds: MaxRetention times MaxSeasonLength (about 1100 years) does not fit a time.Duration.
func (b *Board) seasonExpiry(start, endsAt time.Time) int64 {
	e := endsAt.Unix()
	return e + int64(b.Grace/time.Second) + int64(b.Retention)*(e-start.Unix())
}

// StartSeason closes the running season of the board's SEASON window, if any, and opens season id from now to
// endsAt (seconds; after now, at most MaxSeasonLength later), in one script. An id used before on the board is a
// Conflict, except a retry: starting the running season again with the same endsAt changes nothing.
func (s *Store) StartSeason(ctx context.Context, board, id string, endsAt time.Time) (*SeasonChange, error) {
	if err := CheckSeasonID(id); err != nil {
		return nil, err
	}
	now := s.cfg.Clock()
	ends := endsAt.Truncate(time.Second)
	if !ends.After(now) {
		return nil, errorf(Invalid, "endsAt must be in the future")
	}
	if ends.Sub(now) > MaxSeasonLength {
		return nil, errorf(Invalid, "a season may last at most %d days", int(MaxSeasonLength/(24*time.Hour)))
	}
	if s.seq != nil {
		return s.seasonLedgered(ctx, board, EventSeasonStart, id, ends)
	}
	var out *SeasonChange
	err := s.fresh(board, func() error {
		b, err := s.seasonBoard(ctx, board)
		if err != nil {
			return err
		}
		start := time.Unix(now.Unix(), 0)
		out, err = s.seasonCall(ctx, b, "start", now, id, ends.Unix(), b.seasonExpiry(start, ends),
			b.Grace.Milliseconds())
		return err
	})
	return out, err
}

// EndSeason closes the running season of the board's SEASON window now. While none runs it changes nothing and
// returns the last season; a board where no season ever started is NotFound.
func (s *Store) EndSeason(ctx context.Context, board string) (*SeasonChange, error) {
	if s.seq != nil {
		return s.seasonLedgered(ctx, board, EventSeasonEnd, "", time.Time{})
	}
	var out *SeasonChange
	err := s.fresh(board, func() error {
		b, err := s.seasonBoard(ctx, board)
		if err != nil {
			return err
		}
		out, err = s.seasonCall(ctx, b, "end", s.cfg.Clock())
		return err
	})
	return out, err
}

func (s *Store) seasonCall(ctx context.Context, b *Board, op string, now time.Time, args ...any) (*SeasonChange,
	error) {
	release, err := s.writes.acquire(ctx)
	if err != nil {
		return nil, err
	}
	argv := append([]any{b.sum, op, now.Unix()}, args...)
	// A sharded board's shards each keep the season state their submissions read: shards 1.. first, with the
	// same clock, and shard 0 last, whose state the reads (CurrentPeriod, Seasons) and the reply come from.
	bases := s.ShardKeyBases(b)
	for _, base := range bases[1:] {
		if err := s.fns.run(ctx, seasonScript, []string{base}, argv...).Err(); err != nil {
			release()
			return nil, redisError(err)
		}
	}
	reply, err := s.run(ctx, seasonScript, []string{bases[0]}, argv...).Slice()
	release()
	if err != nil {
		return nil, redisError(err)
	}
	if len(reply) != 9 {
		return nil, redisError(fmt.Errorf("season script returned %d fields", len(reply)))
	}
	status := toString(reply[0])
	c := &SeasonChange{Changed: status == "started" || status == "ended", Season: seasonReply(reply[1:5], now)}
	if toString(reply[5]) != "" {
		closed := seasonReply(reply[5:9], now)
		c.Closed = &closed
	}
	return c, nil
}

// seasonReply reads a season of the season script's reply: id, start, end, key expiry (unix s).
func seasonReply(f []any, now time.Time) SeasonInfo {
	si := SeasonInfo{ID: toString(f[0]), StartedAt: time.Unix(toInt(f[1]), 0).UTC(),
		EndsAt: time.Unix(toInt(f[2]), 0).UTC(), ReadableUntil: time.Unix(toInt(f[3]), 0).UTC()}
	si.Running = now.Before(si.EndsAt)
	return si
}

// Seasons returns every season ever started on a board whose keys have not expired yet, by start (the latest
// last). Empty for a board without the SEASON window.
func (s *Store) Seasons(ctx context.Context, board string) ([]SeasonInfo, error) {
	b, err := s.Board(ctx, board)
	if err != nil {
		return nil, err
	}
	if !b.HasWindow(Season) {
		return nil, nil
	}
	release, err := s.reads.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	all, err := s.rdb.HGetAll(ctx, keySeasons.of(s.keyBase(board))).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, redisError(err)
	}
	now := s.cfg.Clock()
	out := make([]SeasonInfo, 0, len(all))
	for id, v := range all {
		f := strings.Split(v, ",")
		if len(f) != 3 {
			continue
		}
		var n [3]int64
		for i := range f {
			n[i], err = strconv.ParseInt(f[i], 10, 64)
			if err != nil {
				return nil, redisError(fmt.Errorf("bad season record %q", v))
			}
		}
		si := SeasonInfo{ID: id, StartedAt: time.Unix(n[0], 0).UTC(), EndsAt: time.Unix(n[1], 0).UTC(),
			ReadableUntil: time.Unix(n[2], 0).UTC()}
		if !now.Before(si.ReadableUntil) {
			continue
		}
		si.Running = now.Before(si.EndsAt)
		out = append(out, si)
	}
	slices.SortFunc(out, func(a, b SeasonInfo) int {
		if c := a.StartedAt.Compare(b.StartedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// LatestSeason returns the board's running season, or the last one that ran; nil when no season ever started
// (or the board has no SEASON window).
func (s *Store) LatestSeason(ctx context.Context, board string) (*SeasonInfo, error) {
	b, err := s.Board(ctx, board)
	if err != nil {
		return nil, err
	}
	if !b.HasWindow(Season) {
		return nil, nil
	}
	release, err := s.reads.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	v, err := s.rdb.HMGet(ctx, keySeason.of(s.keyBase(board)), "cur", "cs", "ce", "cx").Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, redisError(err)
	}
	id, _ := v[0].(string)
	if id == "" {
		return nil, nil
	}
	si := &SeasonInfo{ID: id, StartedAt: time.Unix(toInt(v[1]), 0).UTC(), EndsAt: time.Unix(toInt(v[2]), 0).UTC(),
		ReadableUntil: time.Unix(toInt(v[3]), 0).UTC()}
	si.Running = s.cfg.Clock().Before(si.EndsAt)
	return si, nil
}

// NoSeason is the current SEASON period of a board where no season has started yet: it reads as an empty
// ranking, takes no scores, and subscriptions that follow it move to the first season when it starts.
const NoSeason = ""

// CurrentPeriod returns the current period of window w of board b: Board.Period for calendar windows and
// ALL_TIME; for SEASON the running season's id or, while none runs, the last season's (its final standings), and
// NoSeason before the first season.
func (s *Store) CurrentPeriod(ctx context.Context, b *Board, w Window) (string, error) {
	if w != Season {
		return b.Period(w, s.cfg.Clock()), nil
	}
	si, err := s.LatestSeason(ctx, b.ID)
	if err != nil || si == nil {
		return NoSeason, err
	}
	return si.ID, nil
}

// NextReset returns when the current period of window w of board b ends: Board.PeriodEnd for the calendar and
// ALL_TIME (zero); for SEASON the running season's end, zero while none runs.
func (s *Store) NextReset(ctx context.Context, b *Board, w Window) (time.Time, error) {
	if w != Season {
		return b.PeriodEnd(w, s.cfg.Clock()), nil
	}
	si, err := s.LatestSeason(ctx, b.ID)
	if err != nil || si == nil || !si.Running {
		return time.Time{}, err
	}
	return si.EndsAt, nil
}

// liveSeasons returns the ids of the board's seasons whose keys may still exist (see Seasons).
func (s *Store) liveSeasons(ctx context.Context, b *Board) ([]string, error) {
	if !b.HasWindow(Season) {
		return nil, nil
	}
	all, err := s.Seasons(ctx, b.ID)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(all))
	for i, si := range all {
		ids[i] = si.ID
	}
	return ids, nil
}
