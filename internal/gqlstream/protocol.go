package gqlstream

import (
	"encoding/json"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/leaderboard/leaderboard/graph"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// The graphql-transport-ws protocol (https://github.com/enisdenjo/graphql-ws/blob/master/PROTOCOL.md), enforced
// by wsConn before the session reads a message ("gqlgen" below: the session of wsTransport, which follows
// gqlgen's transport message for message). gqlgen accepts duplicate and empty operation ids, subscribe before
// connection_ack, repeated connection_init, any JSON it can decode (Go turns invalid UTF-8 and lone surrogate
// escapes into U+FFFD, so different ids collide) and any number of operations at once; it closes every violation
// it does see with 1000 or 1002. transportState checks each message from the peer, closes with the protocol's own
// codes, bounds the operations in flight and hands gqlgen only messages it has checked, re-encoded.
const (
	closeBadRequest        = 4400 // an invalid message
	closeUnauthorized      = 4401 // subscribe before connection_ack
	closeInitTimeout       = 4408 // no connection_init in time
	closeSubscriberExists  = 4409 // subscribe with the id of an operation that is still running
	closeTooManyInitialise = 4429 // a second connection_init
)

// rateLimitedPayload answers a subscribe beyond the connection's operations in flight (MAX_SUBSCRIPTIONS_PER_CONN).
var rateLimitedPayload = []byte(`[{"message":"too many operations in flight on this connection",` +
	`"extensions":{"code":"` + string(leaderboard.RateLimited) + `"}}]`)

// transportState is the graphql-transport-ws state of one connection.
//
// Operation ids: gqlgen keeps its operations in a map by id and deletes an operation's entry after writing its
// complete, so an id reused at the wrong moment replaces a running operation that then cannot be stopped. gqlgen
// therefore never sees the peer's ids: every operation gets one of its own ("1", "2", ... in ops), mapped back to
// the peer's id in what gqlgen writes.
//
// An operation counts against maxOps from the peer's subscribe until gqlgen writes its complete or error, also
// after the peer's complete (gqlgen has cancelled it then, but it may still be running). The peer's id is free
// again at once after the peer's complete, or when gqlgen ended the operation.
type transportState struct {
	maxOps int // 0: no bound

	mu       sync.Mutex
	initSeen bool // connection_init received (and handed to gqlgen)
	acked    bool // gqlgen wrote connection_ack
	expired  bool // the init timeout closed the connection
	seq      uint64
	ops      opTable[*wsOp]  // by gqlgen's id
	byClient opTable[string] // the peer's id of a running operation that it has not completed -> gqlgen's id
}

type wsOp struct {
	client    string // the peer's id
	completed bool   // the peer sent complete (gqlgen was asked to stop it)
	ended     bool   // gqlgen wrote its complete or error
}

func newTransportState(maxOps int) *transportState {
	return &transportState{maxOps: maxOps}
}

// inbound is what to do with one message from the peer: hand forward to gqlgen, send reply to the peer, or close
// the connection with closeCode. All zero: drop the message.
type inbound struct {
	forward     []byte
	reply       []byte
	closeCode   int
	closeReason string
	initialised bool // forward is the connection_init
}

func closeWith(code int, reason string) inbound { return inbound{closeCode: code, closeReason: reason} }

// inbound checks one message from the peer against the protocol and the connection's state.
func (s *transportState) inbound(data []byte) inbound {
	m, problem := parseClientMessage(data)
	if problem != "" {
		return closeWith(closeBadRequest, "Invalid message received: "+problem)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch m.typ {
	case "connection_init":
		if s.initSeen {
			return closeWith(closeTooManyInitialise, "Too many initialisation requests")
		}
		if s.expired {
			return inbound{}
		}
		s.initSeen = true
		return inbound{forward: appendProtocolMessage(nil, m.payload, "", m.typ), initialised: true}
	case "ping", "pong":
		if !s.initSeen {
			// The protocol allows them at any time; gqlgen would close a connection whose first message is
			// not connection_init.
			if m.typ == "ping" {
				return inbound{reply: appendProtocolMessage(nil, m.payload, "", "pong")}
			}
			return inbound{}
		}
		return inbound{forward: appendProtocolMessage(nil, m.payload, "", m.typ)}
	case "subscribe":
		if !s.acked {
			return closeWith(closeUnauthorized, "Unauthorized")
		}
		if _, running := s.byClient.get(m.id); running {
			return closeWith(closeSubscriberExists, "Subscriber for "+m.id+" already exists")
		}
		if s.maxOps > 0 && len(s.ops) >= s.maxOps {
			return inbound{reply: appendProtocolMessage(nil, rateLimitedPayload, m.id, "error")}
		}
		s.seq++
		gid := strconv.FormatUint(s.seq, 10)
		s.ops.set(gid, &wsOp{client: m.id})
		s.byClient.set(m.id, gid)
		return inbound{forward: appendProtocolMessage(nil, m.payload, gid, "subscribe")}
	default: // complete
		if !s.acked {
			// Before connection_init: gqlgen closes the connection (1002) as it did.
			return inbound{forward: appendProtocolMessage(nil, nil, m.id, "complete")}
		}
		gid, running := s.byClient.get(m.id)
		if !running {
			return inbound{} // over already, or never started: nothing to stop
		}
		op, _ := s.ops.get(gid)
		op.completed = true
		s.byClient.remove(m.id)
		return inbound{forward: appendProtocolMessage(nil, nil, gid, "complete")}
	}
}

// outbound records a message that gqlgen is about to write and returns the id the peer knows it by; send is false
// for a message the peer must not get: a second end of an operation (gqlgen writes complete after some errors),
// or anything of an operation that the peer completed and whose id it has already used again.
//
// It is called before the message is written, so that the peer, once it has the end of an operation, finds its
// id free.
func (s *transportState) outbound(typ, id string) (peerID string, send bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if typ == "connection_ack" {
		s.acked = true
	}
	if id == "" {
		return "", true
	}
	op, _ := s.ops.get(id)
	if op == nil {
		return "", false
	}
	if typ == "complete" || typ == "error" {
		s.ops.remove(id)
		op.ended = true
		if !op.completed {
			s.byClient.remove(op.client)
		}
	}
	if op.completed && s.reused(op) {
		return "", false
	}
	return op.client, true
}

// reused reports whether the peer has started another operation with op's id. s.mu is held.
func (s *transportState) reused(op *wsOp) bool {
	_, ok := s.byClient.get(op.client)
	return ok
}

// op returns the state of gqlgen's operation id (nil when it has ended), for streamSend.
func (s *transportState) op(id string) *wsOp {
	s.mu.Lock()
	defer s.mu.Unlock()
	op, _ := s.ops.get(id)
	return op
}

// streamSend is outbound for a data message of op (from op, taken when its stream was bound): whether it may go
// out. It is called for every streamed response, so it looks nothing up unless the peer has completed op.
func (s *transportState) streamSend(op *wsOp) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !op.ended && !(op.completed && s.reused(op))
}

// expire marks the connection as timed out waiting for connection_init; false if connection_init came first.
func (s *transportState) expire() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.initSeen {
		return false
	}
	s.expired = true
	return true
}

// inFlight returns the number of operations counted against maxOps.
func (s *transportState) inFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ops)
}

// clientMessage is a checked message from the peer.
type clientMessage struct {
	typ     string          // connection_init, ping, pong, subscribe or complete
	id      string          // subscribe and complete: non-empty
	payload json.RawMessage // a JSON object, or nil
}

// parseClientMessage checks a message from the peer; problem says what is wrong with it ("" if nothing). The
// message must be valid UTF-8 without escapes of lone surrogates, one JSON object (nothing after it) whose "type"
// (exactly that key; the last one if repeated, as JSON.parse) is a message the peer may send; subscribe and
// complete need a non-empty string id, subscribe an object payload; the other messages' payload, if any, must be
// an object or null.
func parseClientMessage(data []byte) (m clientMessage, problem string) {
	if msg := graph.CheckText(data); msg != "" {
		return m, msg
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil || fields == nil {
		return m, "not a JSON object"
	}
	var ok bool
	if m.typ, ok = wsJSONString(fields["type"]); !ok {
		return m, "no type"
	}
	payload, hasPayload := fields["payload"]
	switch m.typ {
	case "connection_init", "ping", "pong":
		if hasPayload && !isJSONNull(payload) {
			if !isJSONObject(payload) {
				return m, m.typ + " payload is not an object"
			}
			m.payload = payload
		}
	case "subscribe", "complete":
		if m.id, ok = wsJSONString(fields["id"]); !ok || m.id == "" {
			return m, m.typ + " without an id"
		}
		if m.typ == "subscribe" {
			if !hasPayload || !isJSONObject(payload) {
				return m, "subscribe without an object payload"
			}
			m.payload = payload
		}
	default:
		return m, "unknown type " + strconv.Quote(truncateString(m.typ, 40))
	}
	return m, ""
}

// jsonString decodes raw if it is a JSON string.
func wsJSONString(raw json.RawMessage) (string, bool) {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

func isJSONObject(raw json.RawMessage) bool { return len(raw) > 0 && raw[0] == '{' }
func isJSONNull(raw json.RawMessage) bool   { return string(raw) == "null" }

// truncateString cuts s to at most n bytes without splitting a UTF-8 sequence.
func truncateString(s string, n int) string {
	for len(s) > n {
		_, size := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-size]
	}
	return s
}
