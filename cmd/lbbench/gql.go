package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// checkErrors returns the first GraphQL error of a response body, if any. Cheap check first: the load generator
// shares the machine, so it decodes only what it must.
func checkErrors(data []byte) error {
	if bytes.Contains(data, []byte(`"errors"`)) {
		var r struct {
			Errors []struct {
				Message    string         `json:"message"`
				Extensions map[string]any `json:"extensions"`
			} `json:"errors"`
		}
		if json.Unmarshal(data, &r) == nil && len(r.Errors) > 0 {
			return fmt.Errorf("%v: %s (%d errors)", r.Errors[0].Extensions["code"], r.Errors[0].Message,
				len(r.Errors))
		}
	}
	return nil
}

// scoreInput appends one ScoreInput object as JSON: the submit steps build bodies by hand because
// encoding/json of a map per request would cost the shared CPU more than the server's own parsing.
func scoreInput(b []byte, board, player string, score float64) []byte {
	b = append(b, `{"board":`...)
	b = strconv.AppendQuote(b, board)
	b = append(b, `,"playerId":`...)
	b = strconv.AppendQuote(b, player)
	b = append(b, `,"score":`...)
	b = strconv.AppendFloat(b, score, 'f', -1, 64)
	return append(b, '}')
}

// request wraps a query and raw variables JSON into a request body.
func request(query string, vars []byte) []byte {
	b := make([]byte, 0, len(query)+len(vars)+32)
	b = append(b, `{"query":`...)
	b = strconv.AppendQuote(b, query)
	b = append(b, `,"variables":`...)
	b = append(b, vars...)
	return append(b, '}')
}

// rawHTTP is a minimal HTTP/1.1 keep-alive client for the hot load steps: one connection per worker, requests
// written from prebuilt bytes, responses read with http.ReadResponse. net/http's Client costs the shared CPU
// several times more per request (transport goroutines, pooling, header maps), and that CPU is taken from the
// server being measured. Each worker index must be used by one goroutine at a time.
type rawHTTP struct {
	addr, path string
	mu         sync.Mutex
	conns      map[int]*rawConn
}

type rawConn struct {
	c   net.Conn
	br  *bufio.Reader
	req []byte
	out bytes.Buffer
	// closing: the server said Connection: close; the next call dials again.
	closing bool
	used    time.Time // when the last call ended
}

// rawIdleReuse is how long a connection may have been idle and still be used: the server closes keep-alive
// connections idle for its IDLE_TIMEOUT (60 s by default), and a request written to one that it has just closed
// fails. A step that follows a long one on another server (the cluster step, then the rank watchers) found all
// of its connections closed.
var rawIdleReuse = 20 * time.Second

func newRawHTTP(addr, path string) *rawHTTP {
	return &rawHTTP{addr: addr, path: path, conns: map[int]*rawConn{}}
}

// closeAll closes every connection; a later post dials again.
func (h *rawHTTP) closeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for w, rc := range h.conns {
		rc.c.Close()
		delete(h.conns, w)
	}
}

// post sends body as a GraphQL request on worker w's connection and returns the response body (valid until the
// worker's next call). A non-200 status or a response with GraphQL errors is an error.
func (h *rawHTTP) post(ctx context.Context, w int, key string, body []byte) ([]byte, error) {
	rc, err := h.conn(ctx, w)
	if err != nil {
		return nil, err
	}
	data, err := rc.do(ctx, h.addr, h.path, key, body)
	rc.used = time.Now()
	if err != nil || rc.closing {
		rc.c.Close()
		h.mu.Lock()
		delete(h.conns, w)
		h.mu.Unlock()
	}
	return data, err
}

// conn returns worker w's connection, dialed now if it has none or its connection has been idle too long.
func (h *rawHTTP) conn(ctx context.Context, w int) (*rawConn, error) {
	h.mu.Lock()
	rc := h.conns[w]
	h.mu.Unlock()
	if rc != nil && time.Since(rc.used) > rawIdleReuse {
		rc.c.Close()
		rc = nil
	}
	if rc == nil {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", h.addr)
		if err != nil {
			return nil, err
		}
		rc = &rawConn{c: c, br: bufio.NewReaderSize(c, 16<<10), used: time.Now()}
		h.mu.Lock()
		h.conns[w] = rc
		h.mu.Unlock()
	}
	return rc, nil
}

func (rc *rawConn) do(ctx context.Context, host, path, key string, body []byte) ([]byte, error) {
	// Not the context's deadline: a request in flight when a load phase ends completes and counts; only a hung
	// server fails it.
	rc.c.SetDeadline(time.Now().Add(30 * time.Second))
	b := rc.req[:0]
	b = append(b, "POST "...)
	b = append(b, path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, host...)
	b = append(b, "\r\nContent-Type: application/json\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	if key != "" {
		b = append(b, "\r\nAuthorization: Bearer "...)
		b = append(b, key...)
	}
	b = append(b, "\r\n\r\n"...)
	b = append(b, body...)
	rc.req = b
	if _, err := rc.c.Write(b); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(rc.br, nil)
	if err != nil {
		return nil, err
	}
	rc.out.Reset()
	_, err = rc.out.ReadFrom(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	data := rc.out.Bytes()
	if resp.StatusCode != http.StatusOK {
		return data, fmt.Errorf("HTTP %d: %s", resp.StatusCode, truncate(string(data), 200))
	}
	rc.closing = resp.Close
	return data, checkErrors(data)
}
