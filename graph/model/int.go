package model

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/99designs/gqlgen/graphql"
)

// MarshalInt writes an Int (gqlgen's own marshaler).
func MarshalInt(i int) graphql.Marshaler { return graphql.MarshalInt(i) }

// UnmarshalInt accepts whole numbers only: unlike gqlgen's default it refuses strings such as "10" (as
// UnmarshalFloat does for scores), and numbers with a fraction or beyond the 32-bit range of GraphQL's Int.
func UnmarshalInt(v any) (int, error) {
	n, err := UnmarshalInt64(v)
	if err != nil {
		return 0, err
	}
	if n > math.MaxInt32 || n < math.MinInt32 {
		return 0, fmt.Errorf("an Int must be between %d and %d", math.MinInt32, math.MaxInt32)
	}
	return int(n), nil
}

// MarshalInt64 writes an Int from an int64 (gqlgen's own marshaler).
func MarshalInt64(i int64) graphql.Marshaler {
	return graphql.WriterFunc(func(w io.Writer) { _, _ = io.WriteString(w, strconv.FormatInt(i, 10)) })
}

// UnmarshalInt64 accepts whole numbers only (see UnmarshalInt).
func UnmarshalInt64(v any) (int64, error) {
	switch x := v.(type) {
	case int:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case int64:
		return x, nil
	case json.Number:
		n, err := strconv.ParseInt(string(x), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not a whole number", x.String())
		}
		return n, nil
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
			return 0, fmt.Errorf("%v is not a whole number", x)
		}
		return int64(x), nil
	}
	return 0, fmt.Errorf("an Int must be a number, got %T", v)
}
