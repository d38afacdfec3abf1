package gqlstream

import (
	"bytes"
	"strconv"
	"sync"

	"github.com/leaderboard/leaderboard/graph"
)

// heldPayloads are the data bytes of subscription responses that gqlgen is about to write on a connection, by
// token (graph.PayloadHolder): the response's data is the token, and the writer puts the bytes back in its place.
type heldPayloads struct {
	mu   sync.Mutex
	next uint64
	m    map[uint64]heldPayload
}

type heldPayload struct {
	data   []byte
	stream *graph.LiveStream // the rest of the subscription, for the connection to write (HoldStream)
}

var _ graph.PayloadHolder = (*wsConn)(nil)

// Hold keeps data until the response that carries its token is written (graph.PayloadHolder).
func (c *wsConn) Hold(data []byte) uint64 { return c.hold(heldPayload{data: data}) }

var _ graph.StreamHolder = (*wsConn)(nil)

// holder is what the connection's subscriptions hand their responses to (graph.WithPayloadHolder).
func (c *wsConn) holder() graph.PayloadHolder {
	if c.noStreams {
		return heldOnly{c}
	}
	return c
}

// heldOnly is a connection as a PayloadHolder only: gqlgen writes every response of its subscriptions.
type heldOnly struct{ c *wsConn }

func (h heldOnly) Hold(data []byte) uint64 { return h.c.Hold(data) }

// HoldStream is Hold for the first response of a stream that the connection writes the rest of once it has
// written this response (graph.StreamHolder).
func (c *wsConn) HoldStream(data []byte, s *graph.LiveStream) uint64 {
	return c.hold(heldPayload{data: data, stream: s})
}

func (c *wsConn) hold(p heldPayload) uint64 {
	h := &c.held
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[uint64]heldPayload{}
	}
	h.next++
	h.m[h.next] = p
	return h.next
}

var dataKey = []byte(`"data":`)

// unhold returns payload (a response as gqlgen marshaled it) with the token that stands for its data replaced by
// the held bytes, which it forgets, and the stream held with them; payload itself when it carries no held token. Every message passes here
// before the transport decides whether to send it, so a response that is dropped does not leave its bytes held.
func (c *wsConn) unhold(payload []byte) ([]byte, *graph.LiveStream) {
	h := &c.held
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.m) == 0 {
		return payload, nil
	}
	// The data member: `"data":` and digits, last but for `}` (encoding/json writes errors, then data). No
	// other `"data":` can follow it unescaped: error messages are strings.
	i := bytes.LastIndex(payload, dataKey)
	if i < 0 {
		return payload, nil
	}
	start := i + len(dataKey)
	end := start
	for end < len(payload) && payload[end] >= '0' && payload[end] <= '9' {
		end++
	}
	if end == start || end != len(payload)-1 || payload[end] != '}' {
		return payload, nil
	}
	tok, err := strconv.ParseUint(string(payload[start:end]), 10, 64)
	if err != nil {
		return payload, nil
	}
	p, ok := h.m[tok]
	if !ok {
		return payload, nil
	}
	delete(h.m, tok)
	if len(h.m) == 0 {
		h.m = nil // a map keeps its table when emptied: ~340 bytes that an idle connection held for its life
	}
	out := make([]byte, 0, len(payload)-(end-start)+len(p.data))
	out = append(out, payload[:start]...)
	out = append(out, p.data...)
	return append(out, payload[end:]...), p.stream
}
