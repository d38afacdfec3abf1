package gqlstream

import (
	"encoding/json"
	"testing"
)

// encodeMessage writes one of gqlgen's protocol messages ({payload, id, type}) as the connections do (conn.go:
// protocolFields, then appendProtocolMessage, without encoding/json, which would validate and compact the payload
// again for every subscriber). Any other value, or a message type it does not recognise, is left to encoding/json
// (ok false).
func encodeMessage(v any) ([]byte, bool) {
	m, ok := protocolFields(v)
	if !ok {
		return nil, false
	}
	return appendProtocolMessage(make([]byte, 0, len(m.payload)+64), m.payload, m.id, m.typ), true
}

type textType string

func (t textType) MarshalText() ([]byte, error) { return []byte("text:" + string(t)), nil }

// encodeMessage writes protocol messages exactly as encoding/json would, and leaves anything else to it.
func TestEncodeMessageMatchesEncodingJSON(t *testing.T) {
	type plainMsg struct {
		Payload json.RawMessage `json:"payload,omitempty"`
		ID      string          `json:"id,omitempty"`
		Type    string          `json:"type"`
		noOp    bool            //lint:ignore U1000 mirrors the unexported field of gqlgen's message structs
	}
	type textMsg struct {
		Payload json.RawMessage `json:"payload,omitempty"`
		ID      string          `json:"id,omitempty"`
		Type    textType        `json:"type"`
	}
	payload, _ := json.Marshal(map[string]any{"data": map[string]any{"s": "<a & b>\u2028", "n": 1.5}})
	for _, v := range []any{
		plainMsg{Payload: payload, ID: "1<&>", Type: "next"},
		&plainMsg{Type: "pong"},
		textMsg{Payload: payload, ID: "sub-é", Type: "next"},
		textMsg{Type: "ka"},
	} {
		got, ok := encodeMessage(v)
		if !ok {
			t.Fatalf("%T not recognised", v)
		}
		want, _ := json.Marshal(v)
		if string(got) != string(want) {
			t.Fatalf("%T:\n got %s\nwant %s", v, got, want)
		}
	}
	type other struct {
		Payload json.RawMessage `json:"payload"`
		ID      string          `json:"id,omitempty"`
		Type    string          `json:"type"`
	}
	for _, v := range []any{other{}, map[string]string{"type": "x"}, "s", nil} {
		if _, ok := encodeMessage(v); ok {
			t.Fatalf("%T must be left to encoding/json", v)
		}
	}
}
