package leaderboard

import (
	"context"
	"fmt"
	"strconv"
)

// RankEstimate is where a score would place a new player in a window period right now.
type RankEstimate struct {
	Board  string
	Window Window
	Period string
	Score  float64
	// Rank is the rank a new player submitting Score now would get: after every player with an equal or better
	// score (fair ties). Exact unless Approximate.
	Rank int64
	// TieRank is 1 + the players with a strictly better score: the competition rank the new player would share.
	TieRank int64
	// Approximate is true when the score would land beyond the board's exactTop, where ranks are estimated.
	Approximate bool
	// Size is the number of players with a score now (without the new player).
	Size int64
	// TopPercent is 100 * Rank / (Size + 1): the topPercent of the new player's entry once it is in.
	TopPercent float64
}

// RankForScore returns where score would place a new player in view v now, writing nothing. The score is checked
// as a submitted one would be (finite, magnitude at most MaxScore, within the board's bounds); on SUM boards it is
// a total, which a new player's first submission is.
func (s *Store) RankForScore(ctx context.Context, v View, score float64) (*RankEstimate, error) {
	if err := checkScore(score); err != nil {
		return nil, err
	}
	var out *RankEstimate
	err := s.fresh(v.Board, func() error {
		r, err := s.Resolve(ctx, v)
		if err != nil {
			return err
		}
		b := r.Board
		if b.MinScore != nil && score < *b.MinScore || b.MaxScore != nil && score > *b.MaxScore {
			return errorf(Invalid, "score %v is outside the board's range [%s, %s]", score,
				fmtBound(b.MinScore, "-inf"), fmtBound(b.MaxScore, "+inf"))
		}
		x := b.userScore(score) // the index's scale: negated on DESC boards (the conversion is its own inverse)
		release, err := s.reads.acquire(ctx)
		if err != nil {
			return err
		}
		defer release()
		if b.Sharded() {
			out, err = s.rankForScoreSharded(ctx, r, score, x)
			return err
		}
		reply, err := s.run(ctx, rankAtScript, []string{s.keyBase(b.ID)}, b.sum, windowCodes[r.Window], r.Period,
			strconv.FormatFloat(x, 'g', -1, 64), b.ExactTop).Slice()
		if err != nil {
			return redisError(err)
		}
		if len(reply) != 4 {
			return &Error{Code: Internal, Message: "internal error",
				Err: fmt.Errorf("rankscore script returned %d fields, want 4", len(reply))}
		}
		e := &RankEstimate{Board: b.ID, Window: r.Window, Period: r.Period, Score: score, Size: toInt(reply[0]),
			Rank: toInt(reply[1]), TieRank: toInt(reply[2]), Approximate: toInt(reply[3]) == 1}
		e.TopPercent = TopPercent(e.Rank, e.Size+1)
		out = e
		return nil
	})
	return out, err
}

// rankForScoreSharded is RankForScore on a sharded board: after every player with an equal or better score on
// every shard.
func (s *Store) rankForScoreSharded(ctx context.Context, r Resolved, score, x float64) (*RankEstimate, error) {
	v, err := s.loadBoard(ctx, r.Board.ID)
	if err != nil {
		return nil, err
	}
	if !v.b.Sharded() {
		return nil, errStaleDef
	}
	near, err := s.nearOnShards(ctx, v, r.Window, r.Period, 0,
		[]shardProbe{{x: strconv.FormatFloat(x, 'g', -1, 64), tok: "+"}})
	if err != nil {
		return nil, err
	}
	e := &RankEstimate{Board: r.Board.ID, Window: r.Window, Period: r.Period, Score: score, Size: sizeOf(near)}
	for _, sh := range near {
		e.Rank += sh.probes[0].ahead
		e.TieRank += sh.probes[0].better
	}
	e.Rank++
	e.TieRank++
	// Estimated beyond exactTop, or where a shard's tail may hold players at x or better (tailCut: the new player
	// would live on one of the shards, after them all).
	e.Approximate = r.Board.approxAt(e.Rank) || !othersCut(cuts(near), -1).holds(x)
	e.TopPercent = TopPercent(e.Rank, e.Size+1)
	return e, nil
}
