package graph

import (
	"context"
	"time"

	"github.com/leaderboard/leaderboard/graph/model"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// view builds a leaderboard.View from optional GraphQL arguments (nil: the board's first window, the current
// period).
func view(board string, window *model.Window, period *string) leaderboard.View {
	v := leaderboard.View{Board: board}
	if window != nil {
		v.Window = leaderboard.Window(*window)
	}
	if period != nil {
		v.Period = *period
	}
	return v
}

// boardWindow returns the window argument, or the board's first window, checking that the board keeps it.
func boardWindow(b *leaderboard.Board, window *model.Window) (leaderboard.Window, error) {
	if window == nil {
		return b.DefaultWindow(), nil
	}
	w := leaderboard.Window(*window)
	if !b.HasWindow(w) {
		return "", newError(leaderboard.Invalid, "board "+quote(b.ID)+" has no "+string(w)+" window")
	}
	return w, nil
}

func submission(in model.ScoreInput) leaderboard.Submission {
	s := leaderboard.Submission{Board: in.Board, Player: in.PlayerID, Score: in.Score,
		DisplayName: in.DisplayName, Metadata: in.Metadata}
	if in.EventID != nil {
		s.EventID = *in.EventID
	}
	if in.AchievedAt != nil {
		s.AchievedAt = *in.AchievedAt
		if s.AchievedAt.IsZero() {
			// The store reads a zero time as "not given" (now); one the client sent is year 1, far before
			// leaderboard.MinAchievedAt, and is refused as such.
			s.AchievedAt = time.Unix(0, 0)
		}
	}
	return s
}

// startSubscription takes a slot of the connection's subscription limit until ctx is done, and reports the
// subscription to OnSubscription.
func (r *Resolver) startSubscription(ctx context.Context, field string) error {
	if r.Hub == nil {
		return newError(leaderboard.Unavailable, "live updates are not available")
	}
	if r.ReadKeyRequired {
		// Also here, not only in ReadGuard: the shared topUpdates path (live.go) does not pass through the root
		// field middleware, and over server-sent events no connection_init checks the key first.
		if err := require(ctx, RoleRead); err != nil {
			return err
		}
	}
	if err := acquire(ctx); err != nil {
		return err
	}
	if r.OnSubscription != nil {
		r.OnSubscription(field, 1)
		context.AfterFunc(ctx, func() { r.OnSubscription(field, -1) })
	}
	return nil
}

func quote(s string) string {
	const max = 64
	if len(s) > max {
		s = s[:max] + "…"
	}
	return "\"" + s + "\""
}
