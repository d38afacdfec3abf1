package server

import (
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/wstest"
)

// The client address comes from Forwarded / X-Forwarded-For only when the peer is a trusted proxy, and then it is
// the nearest hop that is not itself a trusted proxy.
func TestClientAddr(t *testing.T) {
	trusted, err := parseProxies([]string{"10.0.0.0/8", "192.0.2.1", "2001:db8::/32"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, peer string
		header     http.Header
		none, with string // without TRUSTED_PROXIES, and with the list above
	}{
		{"no headers", "10.1.2.3:5000", nil, "10.1.2.3", "10.1.2.3"},
		{"untrusted peer may not name a client", "198.51.100.9:5000",
			http.Header{"X-Forwarded-For": {"203.0.113.7"}}, "198.51.100.9", "198.51.100.9"},
		{"one proxy", "10.1.2.3:5000", http.Header{"X-Forwarded-For": {"203.0.113.7"}}, "10.1.2.3", "203.0.113.7"},
		{"two proxies", "10.1.2.3:5000", http.Header{"X-Forwarded-For": {"203.0.113.7, 10.9.9.9"}}, "10.1.2.3",
			"203.0.113.7"},
		{"a client's own claim is ignored", "10.1.2.3:5000",
			http.Header{"X-Forwarded-For": {"1.1.1.1, 203.0.113.7"}}, "10.1.2.3", "203.0.113.7"},
		{"several header lines", "10.1.2.3:5000",
			http.Header{"X-Forwarded-For": {"1.1.1.1", "203.0.113.7, 192.0.2.1"}}, "10.1.2.3", "203.0.113.7"},
		{"garbage stops at the last trusted hop", "10.1.2.3:5000",
			http.Header{"X-Forwarded-For": {"203.0.113.7, not-an-ip, 10.4.4.4"}}, "10.1.2.3", "10.4.4.4"},
		{"only proxies", "10.1.2.3:5000", http.Header{"X-Forwarded-For": {"10.5.5.5"}}, "10.1.2.3", "10.5.5.5"},
		{"Forwarded", "10.1.2.3:5000",
			http.Header{"Forwarded": {`for=203.0.113.7;proto=https;by=10.1.2.3`}}, "10.1.2.3", "203.0.113.7"},
		{"Forwarded IPv6 with port, quoted", "10.1.2.3:5000",
			http.Header{"Forwarded": {`for="[2001:db9::17]:4711", for=10.2.2.2`}}, "10.1.2.3", "2001:db9::17"},
		{"Forwarded wins over X-Forwarded-For", "10.1.2.3:5000",
			http.Header{"Forwarded": {"for=203.0.113.7"}, "X-Forwarded-For": {"198.51.100.1"}}, "10.1.2.3",
			"203.0.113.7"},
		{"Forwarded obfuscated", "10.1.2.3:5000", http.Header{"Forwarded": {`for=_hidden, for=10.3.3.3`}},
			"10.1.2.3", "10.3.3.3"},
		{"IPv6 peer", "[2001:db8::1]:5000", http.Header{"X-Forwarded-For": {"203.0.113.7"}}, "2001:db8::1",
			"203.0.113.7"},
		{"IPv4-mapped client", "10.1.2.3:5000", http.Header{"X-Forwarded-For": {"::ffff:203.0.113.7"}}, "10.1.2.3",
			"203.0.113.7"},
	}
	for _, c := range cases {
		r := &http.Request{RemoteAddr: c.peer, Header: c.header}
		if got := (proxies{}).clientAddr(r); got != c.none {
			t.Errorf("%s, no trusted proxies: %q, want %q", c.name, got, c.none)
		}
		if got := trusted.clientAddr(r); got != c.with {
			t.Errorf("%s, trusted proxies: %q, want %q", c.name, got, c.with)
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "example.com", "10.0.0"} {
		if _, err := parseProxies([]string{bad}); err == nil {
			t.Errorf("TRUSTED_PROXIES=%s accepted", bad)
		}
	}
	if _, err := LoadConfig(nil, func(k string) string {
		if k == "TRUSTED_PROXIES" {
			return "10.0.0.0/8, nonsense"
		}
		return ""
	}); err == nil || !strings.Contains(err.Error(), "TRUSTED_PROXIES") {
		t.Errorf("LoadConfig with a bad TRUSTED_PROXIES: %v", err)
	}
}

// Behind a load balancer every connection comes from the balancer: with TRUSTED_PROXIES naming it,
// MAX_CONNS_PER_ADDR counts the clients it forwards and the request log names them; without, the forwarded
// header is ignored and the balancer's address is the one client.
func TestTrustedProxies(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t, 20*time.Second)
	xff := func(a string) http.Header { return http.Header{"X-Forwarded-For": {a}} }
	for _, trusted := range []bool{false, true} {
		cfg := testConfig(t)
		cfg.MaxConnsPerAddr = 1
		if trusted {
			cfg.TrustedProxies = []string{"127.0.0.1/32"}
		}
		logs := &syncBuffer{}
		s := startServerLog(t, cfg, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
		a, _, err := wstest.DialContext(ctx, s.WSURL, wstest.TransportWS, xff("203.0.113.7"), nil)
		if err != nil {
			t.Fatalf("trusted %v: first connection: %v", trusted, err)
		}
		b, resp, err := wstest.DialContext(ctx, s.WSURL, wstest.TransportWS, xff("203.0.113.8"), nil)
		if trusted {
			if err != nil {
				t.Fatalf("a second client behind the trusted proxy was refused: %v %v", resp, err)
			}
			b.Close()
			_, resp, err = wstest.DialContext(ctx, s.WSURL, wstest.TransportWS, xff("203.0.113.7"), nil)
			if err == nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests {
				t.Fatalf("the first client's second connection: want 429, got %v %v", resp, err)
			}
		} else if err == nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("without TRUSTED_PROXIES the header counted: want 429, got %v %v", resp, err)
		}
		a.Close()

		req, _ := http.NewRequest(http.MethodGet, s.URL+"/healthz", nil)
		req.Header.Set("X-Forwarded-For", "198.51.100.4")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		want, notWant := "remote=127.0.0.1", "remote=198.51.100.4"
		if trusted {
			want, notWant = notWant, want
		}
		// The line is written once the handler has returned, which may be just after the client has the response.
		for deadline := time.Now().Add(5 * time.Second); !strings.Contains(logs.String(), "path=/healthz"); {
			if time.Now().After(deadline) {
				t.Fatalf("trusted %v: no request log line for /healthz:\n%s", trusted, logs.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
		if !strings.Contains(logs.String(), want) {
			t.Errorf("trusted %v: the log does not name %s:\n%s", trusted, want, logs.String())
		}
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, "path=/healthz") && strings.Contains(line, notWant) {
				t.Errorf("trusted %v: log line %q", trusted, line)
			}
		}
	}
}

// FuzzClientAddr: any Forwarded / X-Forwarded-For a client (through a trusted proxy) sends gives an IP address,
// never a panic or a string taken from the header as it is.
func FuzzClientAddr(f *testing.F) {
	f.Add("203.0.113.7, 10.9.9.9", `for="[2001:db9::17]:4711";proto=https, for=10.2.2.2`)
	f.Add("", "for=_hidden;by=x,,;for=")
	f.Add(`"[::1]"`, `for="`)
	trusted, _ := parseProxies([]string{"10.0.0.0/8"})
	f.Fuzz(func(t *testing.T, xff, fwd string) {
		h := http.Header{}
		if xff != "" {
			h.Set("X-Forwarded-For", xff)
		}
		if fwd != "" {
			h.Set("Forwarded", fwd)
		}
		got := trusted.clientAddr(&http.Request{RemoteAddr: "10.1.2.3:5000", Header: h})
		if _, err := netip.ParseAddr(got); err != nil {
			t.Fatalf("client address %q from X-Forwarded-For %q, Forwarded %q", got, xff, fwd)
		}
	})
}
