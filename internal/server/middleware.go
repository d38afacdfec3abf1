package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/leaderboard/leaderboard/graph"
	"github.com/leaderboard/leaderboard/internal/gqlhttp"
)

// limitBody reads request bodies of at most max bytes before any handler sees them: a larger one is refused with
// 413 whether it was declared (Content-Length) or not (chunked). Bodies and URL parameters that are not valid
// UTF-8 or escape lone surrogates are refused with 400 (graph.CheckText): decoding would silently turn them into
// U+FFFD. Websocket upgrades pass (their messages are checked one by one).
func limitBody(max int64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tooLarge := func() {
			gqlhttp.WriteError(w, http.StatusRequestEntityTooLarge, codeInvalid,
				"request body too large: at most "+strconv.FormatInt(max, 10)+" bytes")
		}
		if r.ContentLength > max {
			tooLarge()
			return
		}
		if r.URL.RawQuery != "" && r.Header.Get("Upgrade") == "" { // most requests have none: no parse of nothing
			if msg := graph.CheckText([]byte(r.URL.RawQuery)); msg != "" {
				gqlhttp.WriteError(w, http.StatusBadRequest, codeInvalid, msg)
				return
			}
			for _, vs := range r.URL.Query() {
				for _, v := range vs {
					if msg := graph.CheckText([]byte(v)); msg != "" {
						gqlhttp.WriteError(w, http.StatusBadRequest, codeInvalid, msg)
						return
					}
				}
			}
		}
		if r.Body != nil && r.Body != http.NoBody && r.Header.Get("Upgrade") == "" {
			done := markUpload(r.Context())
			body, err := readAtMost(r.Body, r.ContentLength, max)
			done()
			if err != nil {
				gqlhttp.WriteError(w, http.StatusBadRequest, codeInvalid, "could not read the request body")
				return
			}
			if int64(len(body)) > max {
				tooLarge()
				return
			}
			if msg := graph.CheckText(body); msg != "" {
				gqlhttp.WriteError(w, http.StatusBadRequest, codeInvalid, msg)
				return
			}
			r.Body = newReadBody(body)
			r.ContentLength = int64(len(body))
		}
		next.ServeHTTP(w, r)
	})
}

// readAtMost reads body whole, or max+1 bytes of it when it is longer. A declared length (n >= 0, at most max) is
// read into a buffer of its size at once; net/http's body ends there.
func readAtMost(body io.Reader, n, max int64) ([]byte, error) {
	if n < 0 || n > max {
		return io.ReadAll(io.LimitReader(body, max+1))
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(body, b); err != nil {
		return nil, err
	}
	return b, nil
}

// readBody is a request body that limitBody has read whole. Bytes returns what is still unread of it without
// a copy, so that the handlers after limitBody that look at the whole body first (batches, the top cache) need
// not read it and put a copy back.
type readBody struct {
	bytes.Reader // by value: one allocation a request
	b            []byte
}

func newReadBody(b []byte) *readBody {
	rb := &readBody{b: b}
	rb.Reset(b)
	return rb
}

func (r *readBody) Bytes() []byte { return r.b[len(r.b)-r.Len():] }
func (r *readBody) Close() error  { return nil }

// maxErrorMessage is the longest transport error message sent, in bytes.
const maxErrorMessage = 300

// codeErrors makes sure every error gqlgen's transports write on their own (undecodable JSON, a body over the
// limit, a mutation over GET) carries extensions.code: such errors are the client's, so BAD_USER_INPUT. Only
// error responses (status >= 400) are buffered; websocket upgrades pass untouched.
func codeErrors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "" {
			next.ServeHTTP(w, r)
			return
		}
		cw := &codingWriter{ResponseWriter: w}
		next.ServeHTTP(cw, r)
		cw.finish()
	})
}

type codingWriter struct {
	http.ResponseWriter
	status int
	buf    *bytes.Buffer // set for error statuses
}

func (c *codingWriter) WriteHeader(status int) {
	if c.status != 0 {
		return
	}
	c.status = status
	if status >= 400 {
		c.buf = &bytes.Buffer{}
		return
	}
	c.ResponseWriter.WriteHeader(status)
}

func (c *codingWriter) Write(p []byte) (int, error) {
	if c.status == 0 {
		c.WriteHeader(http.StatusOK)
	}
	if c.buf != nil {
		return c.buf.Write(p)
	}
	return c.ResponseWriter.Write(p)
}

func (c *codingWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok && c.buf == nil {
		f.Flush()
	}
}

// FlushError is Flush with the error of the write (http.ResponseController prefers it): event streams end on it.
func (c *codingWriter) FlushError() error {
	if c.buf != nil {
		return nil
	}
	return http.NewResponseController(c.ResponseWriter).Flush()
}

func (c *codingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

func (c *codingWriter) finish() {
	if c.buf == nil {
		return
	}
	body := c.buf.Bytes()
	var resp map[string]any
	if json.Unmarshal(body, &resp) == nil {
		if errs, ok := resp["errors"].([]any); ok {
			for _, e := range errs {
				if em, ok := e.(map[string]any); ok {
					ext, _ := em["extensions"].(map[string]any)
					if ext == nil {
						ext = map[string]any{}
						em["extensions"] = ext
					}
					if _, ok := ext["code"]; !ok {
						ext["code"] = codeInvalid
					}
					// gqlgen quotes the whole undecodable body in its message: never echo a request back at length.
					if msg, ok := em["message"].(string); ok && len(msg) > maxErrorMessage {
						em["message"] = strings.ToValidUTF8(msg[:maxErrorMessage], "") + "…"
					}
				}
			}
			if b, err := json.Marshal(resp); err == nil {
				body = b
			}
		}
	}
	c.Header().Set("Content-Length", strconv.Itoa(len(body)))
	c.ResponseWriter.WriteHeader(c.status)
	c.ResponseWriter.Write(body)
}

// statusWriter records the status of a response for logs; it lets websocket upgrades hijack the connection.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(status int) {
	if s.status == 0 {
		s.status = status
	}
	s.ResponseWriter.WriteHeader(status)
}

func (s *statusWriter) Write(p []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(p)
}

func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// FlushError is Flush with the error of the write, as codingWriter's.
func (s *statusWriter) FlushError() error {
	return http.NewResponseController(s.ResponseWriter).Flush()
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := s.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("hijacking not supported")
	}
	s.status = http.StatusSwitchingProtocols
	return h.Hijack()
}

// logRequests logs one line per request at debug level (never headers: they carry keys), and recovers panics
// outside gqlgen (which recovers its own) as a 500 with code INTERNAL.
func logRequests(log *slog.Logger, clientAddr func(*http.Request) string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The request line is logged at debug level only: without it, nothing of it is computed (the client
		// address, two clock reads).
		debug := log.Enabled(r.Context(), slog.LevelDebug)
		var start time.Time
		if debug {
			start = time.Now()
		}
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				log.Error("panic in handler", "panic", p, "path", r.URL.Path)
				if sw.status == 0 {
					gqlhttp.WriteError(sw, http.StatusInternalServerError, codeInternal, "internal error")
				}
			}
			if debug {
				log.LogAttrs(r.Context(), slog.LevelDebug, "request", slog.String("method", r.Method),
					slog.String("path", r.URL.Path), slog.Int("status", sw.status),
					slog.Duration("duration", time.Since(start)), slog.String("remote", clientAddr(r)))
			}
		}()
		next.ServeHTTP(sw, r)
	})
}
