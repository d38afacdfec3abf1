package gqlstream

import (
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// originPolicy decides which browser origins may open websockets: the CORS allow-list (CORS_ORIGINS), the
// server's own public origins (PUBLIC_ORIGIN), and, when none is configured, the listen address itself on a
// loopback name (http://localhost:8080, http://127.0.0.1:8080, http://[::1]:8080). It never trusts the request's
// Host header: under DNS rebinding a page of evil.example reaches this server with Host: evil.example and
// Origin: https://evil.example, which "same origin as Host" would accept.
type originPolicy struct {
	any     bool
	allowed []string // lower-case origins, e.g. "https://scores.example.com" (CORS_ORIGINS, PUBLIC_ORIGIN)
	public  bool     // PUBLIC_ORIGIN is set: only the listed origins are the server's own

	mu   sync.RWMutex
	port string // the listen port, once the server listens
}

func newOriginPolicy(cors, public []string) *originPolicy {
	p := &originPolicy{public: len(public) > 0}
	for _, o := range append(slices.Clone(cors), public...) {
		if o == "*" {
			p.any = true
			continue
		}
		p.allowed = append(p.allowed, normOrigin(o))
	}
	return p
}

func normOrigin(o string) string { return strings.ToLower(strings.TrimRight(o, "/")) }

// listening records the address the server listens on.
func (p *originPolicy) listening(addr net.Addr) {
	if _, port, err := net.SplitHostPort(addr.String()); err == nil {
		p.mu.Lock()
		p.port = port
		p.mu.Unlock()
	}
}

// allowWebsocket accepts requests without an Origin (not from a browser) and the origins above.
func (p *originPolicy) allowWebsocket(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" || p.any || slices.Contains(p.allowed, normOrigin(origin)) {
		return true
	}
	if p.public {
		return false
	}
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	p.mu.RLock()
	port := p.port
	p.mu.RUnlock()
	if port == "" || u.Port() != port {
		return false
	}
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// maxOriginShown bounds how much of a refused Origin header a message or the log repeats (client input).
const maxOriginShown = 200

// originRefusal says why a browser page at origin gets no websocket, and what to set: the text of the 403, of
// the dashboard's notice (POST /websocket-origin) and of the log line. A page opened under another name than
// localhost (a wall screen on the LAN) otherwise sees a websocket that never opens, for ever.
func originRefusal(origin string) string {
	if len(origin) > maxOriginShown {
		origin = origin[:maxOriginShown] + "…"
	}
	return "origin not allowed: this server accepts websockets from the origins in PUBLIC_ORIGIN and CORS_ORIGINS " +
		"(unset: its port on localhost), not from " + origin + "; to open the dashboard there, set PUBLIC_ORIGIN=" + origin
}

// originLogEvery bounds the log lines of refused websocket origins: a page retrying every second, or a client
// sending many, fills no log.
const originLogEvery = 10 * time.Second

// refusedOrigins logs refused websocket origins, at most one line every originLogEvery.
type refusedOrigins struct{ last atomic.Int64 } // unix nanoseconds of the last line

func (l *refusedOrigins) log(log *slog.Logger, origin string) {
	if log == nil {
		return
	}
	now := time.Now().UnixNano()
	last := l.last.Load()
	if now-last < int64(originLogEvery) || !l.last.CompareAndSwap(last, now) {
		return
	}
	log.Warn("websocket refused", "err", originRefusal(origin))
}
