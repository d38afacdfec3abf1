package graph

import (
	"context"

	"github.com/99designs/gqlgen/graphql"

	"github.com/leaderboard/leaderboard/graph/model"
)

// Prepared arguments: a prepared root field's arguments decoded by the generated unmarshalers of their types, as
// the generated field_X_args functions decode them, but without what those do around each value for the sake of
// an error's path: a path context and a closure per argument, per input field and per list element (a
// submitScore's arguments were 20 of its 154 allocations, a friends(100)'s over 200). A value that an unmarshaler
// refuses, an input field the schema does not have and anything unusual go to the generated function, which then
// decodes everything again and reports the error at its path.
// TestPreparedResultsMatchGqlgen holds the two ways to the same responses, TestPreparedArgsMatchGenerated to the
// same field contexts.

// preparedFieldContext returns what the generated fieldContext_<Object>_<root> returns for field, with the
// arguments decoded here, or false when the generated function must make it.
func (ec *executionContext) preparedFieldContext(ctx context.Context, field graphql.CollectedField, root preparedRoot) (fc *graphql.FieldContext, ok bool) {
	defer func() {
		if r := recover(); r != nil { // field.ArgumentMap panics on a literal it cannot read: the generated way reports it
			fc, ok = nil, false
		}
	}()
	raw := field.ArgumentMap(ec.Variables)
	var args map[string]any
	switch root {
	case prepSubmitScore:
		in, ok := plainScoreInput(ctx, ec, raw["input"])
		if !ok {
			return nil, false
		}
		args = map[string]any{"input": in}
	case prepSubmitScores:
		v, ok := raw["inputs"]
		if !ok {
			return nil, false
		}
		list := graphql.CoerceList(v)
		ins := make([]model.ScoreInput, len(list))
		for i, e := range list {
			if ins[i], ok = plainScoreInput(ctx, ec, e); !ok {
				return nil, false
			}
		}
		args = map[string]any{"inputs": ins}
	default: // rank, aroundMe, friends
		board, err := plainArg(ctx, raw, "board", ec.unmarshalNID2string)
		if err != nil {
			return nil, false
		}
		player, err := plainArg(ctx, raw, "playerId", ec.unmarshalNID2string)
		if err != nil {
			return nil, false
		}
		window, err := plainArg(ctx, raw, "window", ec.unmarshalOWindow2ᚖgithubᚗcomᚋleaderboardᚋleaderboardᚋgraphᚋmodelᚐWindow)
		if err != nil {
			return nil, false
		}
		period, err := plainArg(ctx, raw, "period", ec.unmarshalOString2ᚖstring)
		if err != nil {
			return nil, false
		}
		args = map[string]any{"board": board, "playerId": player, "window": window, "period": period}
		switch root {
		case prepAroundMe:
			radius, err := plainArg(ctx, raw, "radius", ec.unmarshalOInt2ᚖint)
			if err != nil {
				return nil, false
			}
			args["radius"] = radius
		case prepFriends:
			v, ok := raw["friendIds"]
			if !ok {
				return nil, false
			}
			list := graphql.CoerceList(v)
			ids := make([]string, len(list))
			for i, e := range list {
				if ids[i], err = ec.unmarshalNID2string(ctx, e); err != nil {
					return nil, false
				}
			}
			args["friendIds"] = ids
		}
	}
	fc = &graphql.FieldContext{Object: "Query", Field: field, IsMethod: true, IsResolver: true, Args: args}
	switch root {
	case prepSubmitScore, prepSubmitScores:
		fc.Object = "Mutation"
		fc.Child = func(ctx context.Context, field graphql.CollectedField) (*graphql.FieldContext, error) {
			return ec.childFields_ScoreResult(ctx, field)
		}
	default:
		fc.Child = func(ctx context.Context, field graphql.CollectedField) (*graphql.FieldContext, error) {
			return ec.childFields_Entry(ctx, field)
		}
	}
	return fc, true
}

// plainArg is graphql.ProcessArgField without the path context: an absent argument is T's zero value.
func plainArg[T any](ctx context.Context, raw map[string]any, name string, decode func(context.Context, any) (T, error)) (T, error) {
	v, ok := raw[name]
	if !ok {
		var zero T
		return zero, nil
	}
	return decode(ctx, v)
}

// plainScoreInput is unmarshalInputScoreInput for an input object of ScoreInput's fields (each optional, as
// there), decoded by the same unmarshalers; false for anything else.
func plainScoreInput(ctx context.Context, ec *executionContext, v any) (model.ScoreInput, bool) {
	var it model.ScoreInput
	m, ok := v.(map[string]any)
	if !ok {
		return it, false
	}
	var err error
	for k, v := range m {
		switch k {
		case "board":
			it.Board, err = ec.unmarshalNID2string(ctx, v)
		case "playerId":
			it.PlayerID, err = ec.unmarshalNID2string(ctx, v)
		case "score":
			it.Score, err = ec.unmarshalNFloat2githubᚗcomᚋleaderboardᚋleaderboardᚋgraphᚋmodelᚐScore(ctx, v)
		case "eventId":
			it.EventID, err = ec.unmarshalOID2ᚖstring(ctx, v)
		case "displayName":
			it.DisplayName, err = ec.unmarshalOString2ᚖstring(ctx, v)
		case "metadata":
			it.Metadata, err = ec.unmarshalOJSON2encodingᚋjsonᚐRawMessage(ctx, v)
		case "achievedAt":
			it.AchievedAt, err = ec.unmarshalOTime2ᚖtimeᚐTime(ctx, v)
		default:
			return it, false
		}
		if err != nil {
			return it, false
		}
	}
	return it, true
}
