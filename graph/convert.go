package graph

import (
	"context"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

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
	var w leaderboard.Window
	if window != nil {
		w = leaderboard.Window(*window)
	}
	w, err := b.WindowOrDefault(w)
	return w, internal(err)
}

func submission(in model.ScoreInput) leaderboard.Submission {
	s := leaderboard.Submission{Board: in.Board, Player: in.PlayerID, Score: in.Score.Value,
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
	conn, err := acquire(ctx)
	if err != nil {
		return err
	}
	count := r.OnSubscription
	if count != nil {
		count(field, 1)
	}
	if conn != nil || count != nil {
		// One registration for both: each context.AfterFunc costs an idle subscriber ~0.15 KiB for its life.
		context.AfterFunc(lifetime(ctx), func() {
			conn.release()
			if count != nil {
				count(field, -1)
			}
		})
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

// entryFields is the read option of a field that returns entries: only the parts of Entry its selection shows
// (aliases, fragments and @skip/@include as gqlgen collects them; rank, score and topPercent come with every
// read), so the store does no Redis work for the others (leaderboard.Fields).
func entryFields(ctx context.Context) leaderboard.ReadOption { return selectedFields(ctx, entryParts) }

// resultFields is entryFields for a field that returns ScoreResults: the parts its entry's selection shows, its
// rank when selected, and previousRank when selected (a submission's tieRank, metadata, previous rank, and on a
// sharded board its rank, cost Redis work of their own).
func resultFields(ctx context.Context) leaderboard.ReadOption {
	return selectedFields(ctx, func(op *graphql.OperationContext, set ast.SelectionSet) leaderboard.Fields {
		var f leaderboard.Fields
		for _, cf := range graphql.CollectFields(op, set, nil) {
			switch cf.Name {
			case "entry":
				f |= entryParts(op, cf.Selections)
				for _, ef := range graphql.CollectFields(op, cf.Selections, nil) {
					switch ef.Name {
					case "rank", "approximate", "topPercent":
						f |= leaderboard.FieldRank
					}
				}
			case "previousRank":
				f |= leaderboard.FieldPreviousRank
			}
		}
		return f
	})
}

// entryParts returns the parts of Entry a selection of Entry shows.
func entryParts(op *graphql.OperationContext, set ast.SelectionSet) leaderboard.Fields {
	var f leaderboard.Fields
	for _, cf := range graphql.CollectFields(op, set, nil) {
		switch cf.Name {
		case "updatedAt":
			f |= leaderboard.FieldUpdatedAt
		case "tieRank":
			f |= leaderboard.FieldTieRank
		case "displayName", "metadata":
			f |= leaderboard.FieldMeta
		}
	}
	return f
}

// selectedFields returns Only(parts of the resolver's field's selection). A selection without directives shows
// the same parts for every request of its document, so those are remembered by field (readFieldsMemo).
func selectedFields(ctx context.Context, parts func(*graphql.OperationContext, ast.SelectionSet) leaderboard.Fields) leaderboard.ReadOption {
	fc := graphql.GetFieldContext(ctx)
	if fc == nil || fc.Field.Field == nil {
		return leaderboard.Only(leaderboard.AllFields) // no selection to go by
	}
	var key *ast.Field
	if !hasDirectives(fc.Field.Selections, 0) {
		key = fc.Field.Field
		readFieldsMemo.RLock()
		f, ok := readFieldsMemo.m[key]
		readFieldsMemo.RUnlock()
		if ok {
			return leaderboard.Only(f)
		}
	}
	f := parts(graphql.GetOperationContext(ctx), fc.Field.Selections)
	if key != nil {
		readFieldsMemo.Lock()
		if readFieldsMemo.m == nil || len(readFieldsMemo.m) >= maxPreparedPlans {
			readFieldsMemo.m = map[*ast.Field]leaderboard.Fields{}
		}
		readFieldsMemo.m[key] = f
		readFieldsMemo.Unlock()
	}
	return leaderboard.Only(f)
}

// readFieldsMemo remembers selectedFields by field, at most maxPreparedPlans of them (documents the query cache
// let go are forgotten with the rest when it fills).
var readFieldsMemo struct {
	sync.RWMutex
	m map[*ast.Field]leaderboard.Fields
}

// hasDirectives reports whether a selection, or a fragment it spreads, carries a directive (then what it
// selects depends on the variables). Fragments nest at most as deep as validation allows; depth bounds the walk.
func hasDirectives(set ast.SelectionSet, depth int) bool {
	if depth > 32 {
		return true
	}
	for _, sel := range set {
		switch s := sel.(type) {
		case *ast.Field:
			if len(s.Directives) > 0 || hasDirectives(s.SelectionSet, depth+1) {
				return true
			}
		case *ast.InlineFragment:
			if len(s.Directives) > 0 || hasDirectives(s.SelectionSet, depth+1) {
				return true
			}
		case *ast.FragmentSpread:
			if len(s.Directives) > 0 || s.Definition == nil || len(s.Definition.Directives) > 0 ||
				hasDirectives(s.Definition.SelectionSet, depth+1) {
				return true
			}
		}
	}
	return false
}

// scoreEventPage is a page of the ledger's submissions as scoreEvents answers it.
func scoreEventPage(evs []leaderboard.LedgerEvent, next string) *model.ScoreEventPage {
	p := &model.ScoreEventPage{Events: make([]model.ScoreEvent, len(evs))}
	for i := range evs {
		e := &evs[i]
		at := e.AchievedAt
		if at.IsZero() {
			at = e.RecordedAt // achieved when it was recorded
		}
		p.Events[i] = model.ScoreEvent{EventID: e.EventName(), PlayerID: e.Player, Score: e.Score,
			AchievedAt: at.UTC(), RecordedAt: e.RecordedAt.UTC(), Voided: e.Voided}
		if e.Voided {
			reason := e.VoidReason
			p.Events[i].VoidReason = &reason
		}
	}
	if next != "" {
		p.Next = &next
	}
	return p
}
