package gqlstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
	"unique"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/leaderboard/leaderboard/graph"
)

// wsTransport serves GraphQL over websockets (graphql-transport-ws and the legacy graphql-ws) with gqlgen's
// executor. It answers message for message as gqlgen's transport.Websocket (v0.17.98) does — the same messages,
// errors and close codes; wsConn enforces the graphql-transport-ws rules before a message gets here — with fewer
// goroutines: one per connection (its reader), none for its keep-alives (Streams.pingAll sends them), and none
// for a subscription whose responses the connection writes itself (graph.StreamHolder) once its first response is
// out: its end is taken up when the stream ends or the subscription is stopped. An idle screen costs one goroutine,
// not three.
type wsTransport struct {
	ws          *Streams
	initFunc    transport.WebsocketInitFunc
	initTimeout time.Duration // a backstop: wsConn closes first (4408; 1002 on graphql-ws); 2 * Config.InitTimeout
	readLimit   int64         // bytes of one message from the peer
	onError     func(ctx context.Context, err error)
}

var _ graphql.Transport = wsTransport{}

func (t wsTransport) Supports(r *http.Request) bool { return r.Header.Get("Upgrade") != "" }

// Protocol message types, as each protocol names them.
const (
	msgInit      = "connection_init"
	msgAck       = "connection_ack"
	msgKeepAlive = "ka"               // graphql-ws
	msgConnError = "connection_error" // graphql-ws
	msgTerminate = "connection_terminate"
	msgStart     = "start" // graphql-ws; graphql-transport-ws: subscribe
	msgSubscribe = "subscribe"
	msgStop      = "stop" // graphql-ws; graphql-transport-ws: complete
	msgData      = "data" // graphql-ws; graphql-transport-ws: next
	msgNext      = "next"
	msgError     = "error"
	msgComplete  = "complete"
	msgPing      = "ping"
	msgPong      = "pong"
	closeNormal  = 1000
	closeProto   = 1002
	wsSubprotoTW = "graphql-transport-ws"
	wsSubprotoWS = "graphql-ws"
)

// The message types each protocol knows (gqlgen decodes any of them and refuses the rest as invalid JSON).
var (
	legacyTypes    = map[string]bool{msgInit: true, msgTerminate: true, msgStart: true, msgStop: true, msgAck: true, msgConnError: true, msgData: true, msgError: true, msgComplete: true, msgKeepAlive: true}
	transportTypes = map[string]bool{msgInit: true, msgAck: true, msgSubscribe: true, msgNext: true, msgError: true, msgComplete: true, msgPing: true, msgPong: true}
)

var (
	errInvalidWSMessage = errors.New("invalid message received")
	errWSReadTimeout    = errors.New("read timeout")
)

// wsCloseAs is what an init function's refusal closes the connection with (WithCloseCode).
type wsCloseKey struct{}

type wsCloseAs struct {
	code   int
	reason string
}

// WithCloseCode returns ctx from which a refused connection_init (Config.Init returns it with its error) closes
// the connection with code and reason.
func WithCloseCode(ctx context.Context, code int, reason string) context.Context {
	return context.WithValue(ctx, wsCloseKey{}, wsCloseAs{code, reason})
}

func wsCloseFor(ctx context.Context) (int, string) {
	if c, ok := ctx.Value(wsCloseKey{}).(wsCloseAs); ok {
		return c.code, c.reason
	}
	return closeNormal, ""
}

// clientMsg is one message from the peer: its type as the protocol names it and, for the session, what it means.
type clientMsg struct {
	payload json.RawMessage
	id      string
	typ     string // the protocol's name
	op      string // msgInit, msgStart, msgStop, msgTerminate, msgPing, msgPong; "" for a type a client may not send
}

// wsSession is one websocket connection's GraphQL session.
type wsSession struct {
	t      wsTransport
	c      *wsConn
	legacy bool // graphql-ws
	exec   graphql.GraphExecutor

	ctx         context.Context // the connection's, from the init function on
	initPayload transport.InitPayload

	mu     sync.Mutex
	active opTable[context.CancelFunc]
	closed bool
}

func (t wsTransport) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	conn, err := t.ws.Accept(w, r, transport.WebsocketAcceptOptions{ResponseHeader: http.Header{},
		Subprotocols: []string{wsSubprotoWS, wsSubprotoTW}})
	if err != nil {
		transport.SendErrorf(w, http.StatusBadRequest, "unable to upgrade")
		return
	}
	c := conn.(*wsConn)
	// The session keeps no reference to the upgrade request: its headers (~0.5 KiB) stayed in memory as long as the
	// connection, for operations that never read them (gqlgen's transport hands them to each operation).
	s := &wsSession{t: t, c: c, exec: exec, ctx: r.Context()}
	switch c.Subprotocol() {
	case wsSubprotoWS, "":
		// Clients are required to send a subprotocol; as gqlgen, graphql-ws is the one without.
		s.legacy = true
	case wsSubprotoTW:
	default:
		_ = c.WriteClose(closeProto, fmt.Sprintf("unsupported negotiated subprotocol %s", c.Subprotocol()))
		return
	}
	if t.readLimit > 0 {
		c.SetReadLimit(t.readLimit)
	}
	serve := func() {
		if s.init() {
			c.session.Store(s)
			s.run()
		}
	}
	if h, ok := s.ctx.Value(connHolderKey{}).(*connHolder); ok {
		h.handOff(serve)
		return
	}
	serve()
}

// next reads the peer's next message.
func (s *wsSession) next() (clientMsg, error) {
	_, r, err := s.c.NextReader()
	if err != nil {
		return clientMsg{}, err
	}
	var m struct {
		Payload json.RawMessage `json:"payload,omitempty"`
		ID      string          `json:"id,omitempty"`
		Type    json.RawMessage `json:"type"`
	}
	var derr error
	offStack(func() {
		dec := json.NewDecoder(r)
		dec.UseNumber()
		derr = dec.Decode(&m)
	})
	if derr != nil {
		return clientMsg{}, errInvalidWSMessage
	}
	var typ string
	if len(m.Type) > 0 && json.Unmarshal(m.Type, &typ) != nil {
		return clientMsg{}, errInvalidWSMessage // not a string
	}
	known := transportTypes
	if s.legacy {
		known = legacyTypes
	}
	if !known[typ] {
		return clientMsg{}, errInvalidWSMessage
	}
	msg := clientMsg{payload: m.Payload, id: m.ID, typ: typ}
	switch typ {
	case msgInit:
		msg.op = msgInit
	case msgStart, msgSubscribe:
		msg.op = msgStart
	case msgStop:
		msg.op = msgStop
	case msgComplete:
		if !s.legacy {
			msg.op = msgStop
		}
	case msgTerminate:
		msg.op = msgTerminate
	case msgPing, msgPong:
		msg.op = typ
	}
	if msg.op == "" {
		return msg, fmt.Errorf("invalid client->server message type %s", typ)
	}
	return msg, nil
}

// nextWithin is next with a timeout (the connection_init wait).
func (s *wsSession) nextWithin(d time.Duration) (clientMsg, error) {
	type result struct {
		m   clientMsg
		err error
	}
	ch := make(chan result, 1)
	go func() {
		m, err := s.next()
		ch <- result{m, err}
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case r := <-ch:
		return r.m, r.err
	case <-t.C:
		return clientMsg{}, errWSReadTimeout
	}
}

// send writes one message: typ is the generic type (msgAck, msgKeepAlive, msgConnError, msgData, msgComplete,
// msgError, msgPing, msgPong), named for the protocol; messages the protocol does not have are not sent.
func (s *wsSession) send(typ, id string, payload []byte) {
	if !s.legacy {
		switch typ {
		case msgKeepAlive, msgConnError:
			return
		case msgData:
			typ = msgNext
		}
	} else if typ == msgPing || typ == msgPong {
		return
	}
	s.mu.Lock()
	err := s.c.WriteJSON(&wsOut{Payload: payload, ID: id, Type: typ})
	s.mu.Unlock()
	if err != nil && s.t.onError != nil {
		s.t.onError(s.ctx, transport.WebsocketError{Err: err})
	}
}

// wsOut is a message to the peer, shaped as gqlgen's (wsConn.WriteJSON encodes it without encoding/json).
type wsOut struct {
	Payload json.RawMessage `json:"payload,omitempty"`
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
}

func (s *wsSession) init() bool {
	var m clientMsg
	var err error
	if s.t.initTimeout != 0 {
		m, err = s.nextWithin(s.t.initTimeout)
	} else {
		m, err = s.next()
	}
	if err != nil {
		if err == errWSReadTimeout {
			s.close(closeProto, "connection initialisation timeout")
			return false
		}
		if err == errInvalidWSMessage {
			s.sendConnectionError("invalid json")
		}
		s.close(closeProto, "decoding error")
		return false
	}
	switch m.op {
	case msgInit:
		if len(m.payload) > 0 {
			s.initPayload = make(transport.InitPayload)
			if err := json.Unmarshal(m.payload, &s.initPayload); err != nil {
				return false
			}
		}
		var ack *transport.InitPayload
		if s.t.initFunc != nil {
			ctx, p, err := s.t.initFunc(s.ctx, s.initPayload)
			if err != nil {
				s.sendConnectionError("%s", err.Error())
				code, reason := wsCloseFor(ctx)
				if reason == "" {
					reason = "terminated"
				}
				s.close(code, reason)
				return false
			}
			s.ctx, ack = ctx, p
		}
		if h, ok := s.ctx.Value(connHolderKey{}).(*connHolder); ok && h.c != nil {
			// topUpdates data is written as rendered, and the connection writes the streams' later responses
			// (graph.PayloadHolder, graph.StreamHolder)
			s.ctx = graph.WithPayloadHolder(s.ctx, h.c.holder())
		}
		var payload []byte
		if ack != nil {
			payload, _ = json.Marshal(*ack)
		}
		s.send(msgAck, "", payload)
		s.send(msgKeepAlive, "", nil)
	case msgTerminate:
		s.close(closeNormal, "terminated")
		return false
	default:
		s.sendConnectionError("unexpected message %s", m.typ)
		s.close(closeProto, "unexpected message")
		return false
	}
	return true
}

// run reads the peer's messages until the connection ends, then ends it (its subscriptions are stopped).
func (s *wsSession) run() {
	defer s.close(closeNormal, "terminated")
	for {
		m, err := s.next()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) && !errors.Is(err, transport.ErrWebsocketClosed) && s.t.onError != nil {
				s.t.onError(s.ctx, transport.WebsocketError{Err: err, IsReadError: true})
			}
			return
		}
		switch m.op {
		case msgStart:
			offStack(func() { s.subscribe(&m) })
		case msgStop:
			s.mu.Lock()
			stop, _ := s.active.get(m.id)
			s.mu.Unlock()
			if stop != nil {
				stop()
			}
		case msgTerminate:
			return
		case msgPing:
			s.send(msgPong, "", m.payload)
		case msgPong:
		default:
			s.sendConnectionError("unexpected message %s", m.typ)
			s.close(closeProto, "unexpected message")
			return
		}
	}
}

// wsPings are the protocol keep-alives Streams.pingAll sends every interval: "ka" on graphql-ws, and the ping
// message on graphql-transport-ws when WS_PROTOCOL_PINGS is set (protocolPings).
func (s *wsSession) keepAlive(protocolPings bool) {
	if s.legacy {
		s.send(msgKeepAlive, "", nil)
	} else if protocolPings {
		s.send(msgPing, "", nil)
	}
}

func (s *wsSession) subscribe(msg *clientMsg) {
	start := graphql.Now()
	ctx := graphql.StartOperationTrace(s.ctx)
	params := &graphql.RawParams{}
	dec := json.NewDecoder(bytes.NewReader(msg.payload))
	dec.UseNumber()
	if err := dec.Decode(params); err != nil {
		s.sendError(msg.id, &gqlerror.Error{Message: "invalid json"})
		s.send(msgComplete, msg.id, nil)
		return
	}
	params.ReadTime = graphql.TraceTiming{Start: start, End: graphql.Now()}
	rc, err := s.exec.CreateOperationContext(ctx, params)
	if err != nil {
		resp := s.exec.DispatchError(graphql.WithOperationContext(ctx, rc), err)
		switch errcode.GetErrorKind(err) {
		case errcode.KindProtocol:
			s.sendError(msg.id, resp.Errors...)
		default:
			s.sendResponse(msg.id, &graphql.Response{Errors: err})
		}
		s.send(msgComplete, msg.id, nil)
		return
	}
	// The document's text stays with the operation as long as it runs: thousands of screens send the same one,
	// and keep one copy of it (unique: the copy goes when the last of them ends).
	rc.RawQuery = unique.Make(rc.RawQuery).Value()
	// The operation's lifetime is a context above its operation context, so that what lasts as long as the
	// operation (graph.WithLifetime) does not keep gqlgen's state of it.
	life, cancel := context.WithCancel(ctx)
	ctx = graphql.WithOperationContext(graph.WithLifetime(life, life), rc)
	s.mu.Lock()
	s.active.set(msg.id, cancel)
	s.mu.Unlock()
	op := &wsOperation{s: s, id: msg.id, recoverFunc: rc.RecoverFunc, life: life, cancel: cancel}
	go op.run(ctx, rc)
}

func (s *wsSession) sendResponse(id string, resp *graphql.Response) {
	b, err := json.Marshal(resp)
	if err != nil {
		panic(err)
	}
	s.send(msgData, id, b)
}

func (s *wsSession) sendError(id string, errs ...*gqlerror.Error) {
	list := make([]error, len(errs))
	for i, e := range errs {
		list[i] = e
	}
	b, err := json.Marshal(list)
	if err != nil {
		panic(err)
	}
	s.send(msgError, id, b)
}

func (s *wsSession) sendConnectionError(format string, args ...any) {
	b, err := json.Marshal(&gqlerror.Error{Message: fmt.Sprintf(format, args...)})
	if err != nil {
		panic(err)
	}
	s.send(msgConnError, "", b)
}

// close sends a close frame with code and message (the first time), stops every operation and closes the
// connection.
func (s *wsSession) close(code int, message string) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	_ = s.c.WriteClose(code, message)
	for _, e := range s.active {
		e.v()
	}
	s.closed = true
	s.mu.Unlock()
	_ = s.c.Close()
}
