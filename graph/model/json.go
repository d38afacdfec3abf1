// Package model holds the GraphQL input, enum and update types that gqlgen generates from schema.graphqls
// (models_gen.go), and the JSON scalar.
package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/99designs/gqlgen/graphql"
)

// MaxJSONBytes is the largest JSON scalar accepted, serialized (the contract's 1 KiB).
const MaxJSONBytes = 1024

// MarshalJSON writes a stored JSON object as is; nil and empty are null.
func MarshalJSON(v json.RawMessage) graphql.Marshaler {
	return graphql.WriterFunc(func(w io.Writer) {
		if len(v) == 0 || !json.Valid(v) {
			io.WriteString(w, "null")
			return
		}
		w.Write(v)
	})
}

// UnmarshalJSON accepts a JSON object (from a literal or a variable) of at most MaxJSONBytes serialized.
func UnmarshalJSON(v any) (json.RawMessage, error) {
	if v == nil {
		return nil, nil
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, fmt.Errorf("JSON must be an object")
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("JSON: %v", err)
	}
	data := bytes.TrimSpace(buf.Bytes())
	if len(data) > MaxJSONBytes {
		return nil, fmt.Errorf("JSON must be at most %d bytes serialized, got %d", MaxJSONBytes, len(data))
	}
	return data, nil
}
