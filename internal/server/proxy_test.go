package server

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/wstest"
)

// The client address comes from the one header CLIENT_ADDR_HEADER names, only when the peer is a trusted proxy,
// and then it is the nearest hop that is not itself a trusted proxy. Any other header is the client's own claim,
// passed through by its proxy, and changes nothing.
func TestClientAddr(t *testing.T) {
	list := []string{"10.0.0.0/8", "192.0.2.1", "2001:db8::/32"}
	byHeader := map[string]proxies{}
	for _, h := range []string{"", "Forwarded", "x-real-ip"} {
		p, err := parseProxies(list, h, 128)
		if err != nil {
			t.Fatal(err)
		}
		byHeader[h] = p
	}
	untrusted, err := parseProxies(nil, "", 128)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, setting, peer string // setting: CLIENT_ADDR_HEADER ("": the default, X-Forwarded-For)
		header              http.Header
		none, with          string // without TRUSTED_PROXIES, and with the list above
	}{
		{"no headers", "", "10.1.2.3:5000", nil, "10.1.2.3", "10.1.2.3"},
		{"untrusted peer may not name a client", "", "198.51.100.9:5000",
			http.Header{"X-Forwarded-For": {"203.0.113.7"}}, "198.51.100.9", "198.51.100.9"},
		{"one proxy", "", "10.1.2.3:5000", http.Header{"X-Forwarded-For": {"203.0.113.7"}}, "10.1.2.3", "203.0.113.7"},
		{"two proxies", "", "10.1.2.3:5000", http.Header{"X-Forwarded-For": {"203.0.113.7, 10.9.9.9"}}, "10.1.2.3",
			"203.0.113.7"},
		{"a client's own claim is ignored", "", "10.1.2.3:5000",
			http.Header{"X-Forwarded-For": {"1.1.1.1, 203.0.113.7"}}, "10.1.2.3", "203.0.113.7"},
		{"several header lines", "", "10.1.2.3:5000",
			http.Header{"X-Forwarded-For": {"1.1.1.1", "203.0.113.7, 192.0.2.1"}}, "10.1.2.3", "203.0.113.7"},
		{"garbage stops at the last trusted hop", "", "10.1.2.3:5000",
			http.Header{"X-Forwarded-For": {"203.0.113.7, not-an-ip, 10.4.4.4"}}, "10.1.2.3", "10.4.4.4"},
		{"only proxies", "", "10.1.2.3:5000", http.Header{"X-Forwarded-For": {"10.5.5.5"}}, "10.1.2.3", "10.5.5.5"},
		{"Forwarded is a client's claim under X-Forwarded-For", "", "10.1.2.3:5000",
			http.Header{"Forwarded": {"for=203.0.113.7"}}, "10.1.2.3", "10.1.2.3"},
		{"Forwarded does not win over X-Forwarded-For", "", "10.1.2.3:5000",
			http.Header{"Forwarded": {"for=203.0.113.7"}, "X-Forwarded-For": {"198.51.100.1"}}, "10.1.2.3",
			"198.51.100.1"},
		{"Forwarded", "Forwarded", "10.1.2.3:5000",
			http.Header{"Forwarded": {`for=203.0.113.7;proto=https;by=10.1.2.3`}}, "10.1.2.3", "203.0.113.7"},
		{"Forwarded IPv6 with port, quoted", "Forwarded", "10.1.2.3:5000",
			http.Header{"Forwarded": {`for="[2001:db9::17]:4711", for=10.2.2.2`}}, "10.1.2.3", "2001:db9::17"},
		{"X-Forwarded-For is a client's claim under Forwarded", "Forwarded", "10.1.2.3:5000",
			http.Header{"Forwarded": {"for=203.0.113.7"}, "X-Forwarded-For": {"198.51.100.1"}}, "10.1.2.3",
			"203.0.113.7"},
		{"Forwarded obfuscated", "Forwarded", "10.1.2.3:5000", http.Header{"Forwarded": {`for=_hidden, for=10.3.3.3`}},
			"10.1.2.3", "10.3.3.3"},
		{"X-Real-IP", "x-real-ip", "10.1.2.3:5000",
			http.Header{"X-Real-Ip": {"203.0.113.9"}, "X-Forwarded-For": {"198.51.100.1"}}, "10.1.2.3", "203.0.113.9"},
		{"X-Real-IP absent", "x-real-ip", "10.1.2.3:5000",
			http.Header{"X-Forwarded-For": {"198.51.100.1"}}, "10.1.2.3", "10.1.2.3"},
		{"IPv6 peer", "", "[2001:db8::1]:5000", http.Header{"X-Forwarded-For": {"203.0.113.7"}}, "2001:db8::1",
			"203.0.113.7"},
		{"IPv4-mapped client", "", "10.1.2.3:5000", http.Header{"X-Forwarded-For": {"::ffff:203.0.113.7"}}, "10.1.2.3",
			"203.0.113.7"},
	}
	for _, c := range cases {
		r := &http.Request{RemoteAddr: c.peer, Header: c.header}
		if got := untrusted.clientAddr(r); got != c.none {
			t.Errorf("%s, no trusted proxies: %q, want %q", c.name, got, c.none)
		}
		if got := byHeader[c.setting].clientAddr(r); got != c.with {
			t.Errorf("%s, trusted proxies: %q, want %q", c.name, got, c.with)
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "example.com", "10.0.0"} {
		if _, err := parseProxies([]string{bad}, "", 64); err == nil {
			t.Errorf("TRUSTED_PROXIES=%s accepted", bad)
		}
	}
	for name, value := range map[string]string{"TRUSTED_PROXIES": "10.0.0.0/8, nonsense",
		"CLIENT_ADDR_HEADER": "X-Forwarded-For: 1", "IPV6_PREFIX": "129"} {
		if _, err := LoadConfig(nil, func(k string) string {
			if k == name {
				return value
			}
			return ""
		}); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("LoadConfig with %s=%q: %v", name, value, err)
		}
	}
	if _, err := parseProxies(nil, "", 0); err == nil {
		t.Error("IPV6_PREFIX=0 accepted")
	}
}

// Per-client limits count an IPv6 client by the prefix of IPV6_PREFIX bits around its address (a host picks its
// addresses from a whole /64), an IPv4 client by its address; the request log still names the address.
func TestLimitAddr(t *testing.T) {
	trusted, _ := parseProxies([]string{"10.0.0.0/8"}, "", 64)
	for _, c := range []struct {
		peer, xff  string
		prefix     int
		log, limit string
	}{
		{"[2001:db8:1:2:3:4:5:6]:5000", "", 64, "2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"},
		{"[2001:db8:1:2:3:4:5:6]:5000", "", 48, "2001:db8:1:2:3:4:5:6", "2001:db8:1::/48"},
		{"[2001:db8:1:2:3:4:5:6]:5000", "", 128, "2001:db8:1:2:3:4:5:6", "2001:db8:1:2:3:4:5:6"},
		{"10.1.2.3:5000", "2001:db8:9:9::77", 64, "2001:db8:9:9::77", "2001:db8:9:9::/64"},
		{"10.1.2.3:5000", "203.0.113.7", 64, "203.0.113.7", "203.0.113.7"},
		{"10.1.2.3:5000", "::ffff:203.0.113.7", 64, "203.0.113.7", "203.0.113.7"},
		{"[::ffff:198.51.100.2]:5000", "", 64, "198.51.100.2", "198.51.100.2"},
	} {
		p := trusted
		p.ipv6Bits = c.prefix
		r := &http.Request{RemoteAddr: c.peer, Header: http.Header{}}
		if c.xff != "" {
			r.Header.Set("X-Forwarded-For", c.xff)
		}
		if got := p.clientAddr(r); got != c.log {
			t.Errorf("%s %s: client %q, want %q", c.peer, c.xff, got, c.log)
		}
		if got := p.limitAddr(r); got != c.limit {
			t.Errorf("%s %s /%d: limit address %q, want %q", c.peer, c.xff, c.prefix, got, c.limit)
		}
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

// Behind a stock httputil.ReverseProxy (it appends X-Forwarded-For and passes the client's own Forwarded through),
// a client's Forwarded claims do not buy it more streams: MAX_CONNS_PER_ADDR=5 lets 5 of 8 through, as a model
// of one cap per real client says, and another real client still gets its own. IPv6 clients of one /64 share one
// cap. Nothing leaks once the streams are closed.
func TestPerAddressLimitBehindProxies(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	const perAddr = 5
	// dial opens n websockets through the URL with the headers header(i) makes, and returns the open ones and
	// the statuses of the refused ones.
	dial := func(t *testing.T, wsURL string, n int, header func(i int) http.Header) ([]*wstest.Conn, []int) {
		t.Helper()
		var open []*wstest.Conn
		var refused []int
		for i := range n {
			c, resp, err := wstest.DialContext(ctx, wsURL, wstest.TransportWS, header(i), nil)
			if err == nil {
				open = append(open, c)
				continue
			}
			if resp == nil {
				t.Fatalf("dial %d: %v", i, err)
			}
			refused = append(refused, resp.StatusCode)
		}
		return open, refused
	}
	closeAll := func(conns []*wstest.Conn) {
		for _, c := range conns {
			c.Close()
			<-c.Done()
		}
	}
	// model: one cap per real client, whatever the streams claim; held of it are open already.
	model := func(held, streams int) (open, refused int) {
		open = min(streams, max(0, perAddr-held))
		return open, streams - open
	}
	wantRefused := func(t *testing.T, what string, held int, open []*wstest.Conn, refused []int, streams int) {
		t.Helper()
		wantOpen, wantRef := model(held, streams)
		if len(open) != wantOpen || len(refused) != wantRef {
			t.Errorf("%s: %d of %d streams open, %d refused (%v); want %d open, %d refused", what, len(open), streams,
				len(refused), refused, wantOpen, wantRef)
		}
		for _, st := range refused {
			if st != http.StatusTooManyRequests {
				t.Errorf("%s: refused with %d, want 429", what, st)
			}
		}
	}

	t.Run("ReverseProxy", func(t *testing.T) {
		cfg := testConfig(t)
		cfg.MaxConnsPerAddr = perAddr
		cfg.TrustedProxies = []string{"127.0.0.9"} // the proxy's address toward the server; its clients dial from 127.0.0.1
		s := startServer(t, cfg)
		target, _ := url.Parse(s.URL)
		rp := httputil.NewSingleHostReverseProxy(target)
		rp.Transport = &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 9)}}).DialContext}
		proxy := httptest.NewServer(rp)
		defer proxy.Close()
		proxyWS := "ws" + strings.TrimPrefix(proxy.URL, "http") + "/graphql"

		// Warm up (the server's and the proxy's first connections start goroutines that stay), then the baseline.
		warm, refused := dial(t, proxyWS, 1, func(int) http.Header { return nil })
		if len(warm) != 1 {
			t.Fatalf("warm-up refused: %v", refused)
		}
		closeAll(warm)
		waitMetric(t, s, "lb_websocket_connections", 0, 5*time.Second)
		time.Sleep(300 * time.Millisecond)
		base := runtime.NumGoroutine()

		const streams = 8
		open, refused := dial(t, proxyWS, streams, func(i int) http.Header {
			return http.Header{"Forwarded": {fmt.Sprintf("for=10.0.0.%d", i)}}
		})
		wantRefused(t, "Forwarded: for=10.0.0.i", 0, open, refused, streams)
		more, refused := dial(t, proxyWS, 2, func(i int) http.Header {
			return http.Header{"X-Forwarded-For": {fmt.Sprintf("10.0.1.%d", i)}}
		})
		wantRefused(t, "X-Forwarded-For: 10.0.1.i", len(open), more, refused, 2)
		open = append(open, more...)

		// Another real client (the proxy names it in X-Forwarded-For) has a cap of its own.
		other := &httputil.ReverseProxy{Transport: rp.Transport, Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Header.Set("X-Forwarded-For", "203.0.113.50") // a proxy that writes the header anew
		}}
		otherProxy := httptest.NewServer(other)
		defer otherProxy.Close()
		theirs, refused := dial(t, "ws"+strings.TrimPrefix(otherProxy.URL, "http")+"/graphql", 1,
			func(int) http.Header { return http.Header{"Forwarded": {"for=10.0.0.1"}} })
		if len(theirs) != 1 {
			t.Errorf("another client behind the proxy was refused: %v", refused)
		}
		open = append(open, theirs...)

		closeAll(open)
		otherProxy.Close()
		waitMetric(t, s, "lb_websocket_connections", 0, 5*time.Second)
		again, refused := dial(t, proxyWS, 1, func(int) http.Header { return nil })
		if len(again) != 1 {
			t.Errorf("after every stream closed, a new one was refused: %v", refused)
		}
		closeAll(again)
		waitMetric(t, s, "lb_websocket_connections", 0, 5*time.Second)
		rp.Transport.(*http.Transport).CloseIdleConnections()
		n := runtime.NumGoroutine()
		for deadline := time.Now().Add(5 * time.Second); n > base && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
			n = runtime.NumGoroutine()
		}
		if n > base {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines after the streams closed, baseline %d\n%s", n, base, buf[:runtime.Stack(buf, true)])
		}
	})

	t.Run("IPv6 /64", func(t *testing.T) {
		cfg := testConfig(t)
		cfg.MaxConnsPerAddr = perAddr
		cfg.TrustedProxies = []string{"127.0.0.1"} // this test is the proxy
		s := startServer(t, cfg)
		const streams = perAddr + 1
		open, refused := dial(t, s.WSURL, streams, func(i int) http.Header {
			return http.Header{"X-Forwarded-For": {fmt.Sprintf("2001:db8:1:2:%x::%x", i, i+1)}}
		})
		wantRefused(t, "addresses of 2001:db8:1:2::/64", 0, open, refused, streams)
		next, refused := dial(t, s.WSURL, 1, func(int) http.Header {
			return http.Header{"X-Forwarded-For": {"2001:db8:1:3::1"}}
		})
		if len(next) != 1 {
			t.Errorf("a client of the next /64 was refused: %v", refused)
		}
		closeAll(append(open, next...))
	})
}

// FuzzClientAddr: any Forwarded / X-Forwarded-For / X-Real-IP a client (through a trusted proxy) sends gives an IP
// address, never a panic or a string taken from the header as it is; only the header CLIENT_ADDR_HEADER names is
// read (the result is the one of the request without the others: a second read path, not the function's own
// logic); and the limit address is the client's, or for IPv6 the /64 holding it.
func FuzzClientAddr(f *testing.F) {
	f.Add("203.0.113.7, 10.9.9.9", `for="[2001:db9::17]:4711";proto=https, for=10.2.2.2`, "2001:db8::1")
	f.Add("", "for=_hidden;by=x,,;for=", "")
	f.Add(`"[::1]"`, `for="`, "10.0.0.1, fe80::1%eth0")
	settings := map[string]string{"": "X-Forwarded-For", "Forwarded": "Forwarded", "X-Real-IP": "X-Real-Ip"}
	byHeader := map[string]proxies{}
	for h := range settings {
		byHeader[h], _ = parseProxies([]string{"10.0.0.0/8"}, h, 64)
	}
	f.Fuzz(func(t *testing.T, xff, fwd, real string) {
		all := http.Header{}
		for name, v := range map[string]string{"X-Forwarded-For": xff, "Forwarded": fwd, "X-Real-Ip": real} {
			if v != "" {
				all.Set(name, v)
			}
		}
		for setting, name := range settings {
			p := byHeader[setting]
			got := p.clientAddr(&http.Request{RemoteAddr: "10.1.2.3:5000", Header: all})
			a, err := netip.ParseAddr(got)
			if err != nil {
				t.Fatalf("%s: client address %q from X-Forwarded-For %q, Forwarded %q, X-Real-IP %q", name, got, xff,
					fwd, real)
			}
			only := http.Header{}
			if v := all.Values(name); len(v) > 0 {
				only[name] = v
			}
			if alone := p.clientAddr(&http.Request{RemoteAddr: "10.1.2.3:5000", Header: only}); alone != got {
				t.Fatalf("%s: %q with every header, %q with %s alone (X-Forwarded-For %q, Forwarded %q, X-Real-IP %q)",
					name, got, alone, name, xff, fwd, real)
			}
			limit := p.limitAddr(&http.Request{RemoteAddr: "10.1.2.3:5000", Header: all})
			want := a.String()
			if a.Is6() {
				want = netip.PrefixFrom(a.WithZone(""), 64).Masked().String()
			}
			if limit != want {
				t.Fatalf("%s: limit address %q for client %q, want %q", name, limit, got, want)
			}
		}
	})
}
