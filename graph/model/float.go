package model

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/99designs/gqlgen/graphql"
)

// MarshalFloat writes a Float (gqlgen's own marshaler).
func MarshalFloat(f float64) graphql.Marshaler { return graphql.MarshalFloat(f) }

// UnmarshalFloat accepts numbers only: unlike gqlgen's default it rejects strings such as "12", so a client that
// sends a score as text learns it instead of having it silently converted.
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
		f = float64(x)
	case json.Number:
		var err error
		if f, err = x.Float64(); err != nil {
			return 0, fmt.Errorf("%q is not a number", x.String())
		}
	default:
		return 0, fmt.Errorf("a Float must be a number, got %T", v)
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("a Float must be finite")
	}
	return f, nil
}
