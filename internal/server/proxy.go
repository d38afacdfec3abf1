package server

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// proxies decides a request's client address. Only a peer inside one of the trusted prefixes (TRUSTED_PROXIES:
// the load balancers in front of the server) may name another client in Forwarded or X-Forwarded-For; anyone else
// could put any address there, so for them the peer address is the client. The client is the nearest address in
// the chain that is not itself a trusted proxy (the rightmost untrusted one): the only hop not written by a proxy
// we trust is the client's own claim, so everything to its left is ignored.
type proxies struct {
	trusted []netip.Prefix
}

// parseProxies reads TRUSTED_PROXIES: comma-separated CIDR prefixes or single addresses.
func parseProxies(list []string) (proxies, error) {
	var p proxies
	for _, s := range list {
		if pre, err := netip.ParsePrefix(s); err == nil {
			p.trusted = append(p.trusted, pre.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return proxies{}, fmt.Errorf("TRUSTED_PROXIES: %q is neither a CIDR prefix nor an IP address", s)
		}
		p.trusted = append(p.trusted, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return p, nil
}

func (p proxies) trusts(a netip.Addr) bool {
	a = a.Unmap()
	for _, pre := range p.trusted {
		if pre.Contains(a) {
			return true
		}
	}
	return false
}

// clientAddr is the address that per-client limits, logs and metrics use for r.
func (p proxies) clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	peer, err := netip.ParseAddr(host)
	if err != nil || len(p.trusted) == 0 || !p.trusts(peer) {
		return host
	}
	hops, ok := forwardedFor(r.Header)
	if !ok {
		return peer.Unmap().String()
	}
	client := peer.Unmap()
	for i := len(hops) - 1; i >= 0; i-- {
		a, ok := parseHop(hops[i])
		if !ok {
			break // not an address (obfuscated, "unknown", garbage): the last trusted hop is all we know
		}
		client = a
		if !p.trusts(a) {
			break
		}
	}
	return client.String()
}

// forwardedFor returns the client chain of a request, nearest hop last: the for= parameters of Forwarded
// (RFC 7239) if the request has that header, else X-Forwarded-For. Every header line counts, in order.
func forwardedFor(h http.Header) ([]string, bool) {
	if lines := h.Values("Forwarded"); len(lines) > 0 {
		var hops []string
		for _, line := range lines {
			for _, elem := range strings.Split(line, ",") {
				hop := ""
				for _, pair := range strings.Split(elem, ";") {
					k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
					if ok && strings.EqualFold(k, "for") {
						hop = v
					}
				}
				hops = append(hops, hop) // an element without for= is a hop we cannot read
			}
		}
		return hops, true
	}
	lines := h.Values("X-Forwarded-For")
	if len(lines) == 0 {
		return nil, false
	}
	var hops []string
	for _, line := range lines {
		hops = append(hops, strings.Split(line, ",")...)
	}
	return hops, true
}

// parseHop reads one hop: an IP address, optionally quoted, with a port, or an IPv6 address in brackets.
func parseHop(s string) (netip.Addr, bool) {
	s = strings.Trim(strings.TrimSpace(s), `"`)
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		if a, err := netip.ParseAddr(s[1 : len(s)-1]); err == nil {
			return a.Unmap(), true
		}
	}
	return netip.Addr{}, false
}
