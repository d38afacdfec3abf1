package model

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/99designs/gqlgen/graphql"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// MarshalFloat writes a Float (gqlgen's own marshaler).
func MarshalFloat(f float64) graphql.Marshaler { return graphql.MarshalFloat(f) }

// UnmarshalFloat accepts numbers only: unlike gqlgen's default it rejects strings such as "12", so a client that
// sends a score as text learns it instead of having it silently converted. Every Float input of the schema is a
// score or a score bound, so the score rule applies to the exact value the client wrote: JSON numbers arrive as
// their text (json.Number; graph.ExactFloats gives top-level Float variables theirs back after gqlparser's
// coercion rounded them) and are checked with leaderboard.CheckScoreText; literals in the document are checked
// the same way by graph.ExactFloats before they are parsed to float64. A value the score rule refuses is a
// *leaderboard.Error (see UnmarshalScore); one that is no number at all, a plain error.
func UnmarshalFloat(v any) (float64, error) {
	var f float64
	switch x := v.(type) {
	case float64:
		f = x
	case float32:
		f = float64(x)
	case int:
		f = float64(x)
	case int32:
		f = float64(x)
	case int64:
		if x > leaderboard.MaxScore || x < -leaderboard.MaxScore {
			return 0, &leaderboard.Error{Code: leaderboard.Invalid, Message: "a Float must be at most 2^53 in magnitude"}
		}
		f = float64(x)
	case json.Number:
		if err := leaderboard.CheckScoreText(x.String()); err != nil {
			return 0, err
		}
		f, _ = strconv.ParseFloat(x.String(), 64) // checked above; an underflow rounds to 0

	default:
		return 0, fmt.Errorf("a Float must be a number, got %T", v)
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, &leaderboard.Error{Code: leaderboard.Invalid, Message: "a Float must be finite"}
	}
	return f, nil
}
