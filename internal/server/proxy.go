package server

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Defaults of CLIENT_ADDR_HEADER and IPV6_PREFIX.
const (
	defaultClientAddrHeader = "X-Forwarded-For"
	defaultIPv6Prefix       = 64
)

// proxies decides a request's client address. Only a peer inside one of the trusted prefixes (TRUSTED_PROXIES:
// the load balancers in front of the server) may name another client, and only in the one header their proxy
// sets (CLIENT_ADDR_HEADER): a proxy passes every other header of the client's through unchanged, so any other
// header is the client's own claim and is never read. The client is the nearest address in that header's chain
// that is not itself a trusted proxy (the rightmost untrusted one): the only hop not written by a proxy we trust
// is the client's own claim, so everything to its left is ignored.
type proxies struct {
	trusted []netip.Prefix
	header  string // canonical name of the header that names the client; "Forwarded" is read as RFC 7239
	// ipv6Bits is the prefix length that groups IPv6 clients for per-client limits (IPV6_PREFIX): one host has a
	// whole /64 to pick addresses from. 0 (the zero value): no grouping.
	ipv6Bits int
}

// parseProxies reads TRUSTED_PROXIES (comma-separated CIDR prefixes or single addresses), CLIENT_ADDR_HEADER
// (a header name; "" is X-Forwarded-For) and IPV6_PREFIX (1 to 128).
func parseProxies(list []string, header string, ipv6Prefix int) (proxies, error) {
	if header == "" {
		header = defaultClientAddrHeader
	}
	if !validHeaderName(header) {
		return proxies{}, fmt.Errorf("CLIENT_ADDR_HEADER: %q is not a header name", header)
	}
	if ipv6Prefix < 1 || ipv6Prefix > 128 {
		return proxies{}, fmt.Errorf("IPV6_PREFIX: want a prefix length from 1 to 128, got %d", ipv6Prefix)
	}
	p := proxies{header: http.CanonicalHeaderKey(header), ipv6Bits: ipv6Prefix}
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

// validHeaderName reports whether s is an HTTP field name (RFC 9110 token).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
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

// clientAddr is the address the request log names for r.
func (p proxies) clientAddr(r *http.Request) string {
	a, ok := p.client(r)
	if !ok {
		return remoteHost(r.RemoteAddr)
	}
	return a.String()
}

// limitAddr is the address per-client limits (MAX_CONNS_PER_ADDR) count r against: the client address, and for
// IPv6 the prefix of IPV6_PREFIX bits around it ("2001:db8:0:1::/64"), so that one host cannot take a fresh share
// with every address of its subnet.
func (p proxies) limitAddr(r *http.Request) string {
	a, ok := p.client(r)
	if !ok {
		return remoteHost(r.RemoteAddr)
	}
	if a.Is6() && p.ipv6Bits > 0 && p.ipv6Bits < 128 {
		pre, _ := a.WithZone("").Prefix(p.ipv6Bits)
		return pre.String()
	}
	return a.String()
}

// client returns r's client address; ok is false when the peer address is not an IP address (a test's
// RemoteAddr, a unix socket).
func (p proxies) client(r *http.Request) (netip.Addr, bool) {
	peer, err := netip.ParseAddr(remoteHost(r.RemoteAddr))
	if err != nil {
		return netip.Addr{}, false
	}
	client := peer.Unmap()
	if len(p.trusted) == 0 || !p.trusts(client) {
		return client, true
	}
	hops := p.hops(r.Header)
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
	return client, true
}

func remoteHost(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		return remoteAddr
	}
	return host
}

// hops returns the client chain CLIENT_ADDR_HEADER names, nearest hop last: the for= parameters of Forwarded
// (RFC 7239), or the comma-separated addresses of any other header (X-Forwarded-For; X-Real-IP and its kind hold
// just one). Every header line counts, in order.
func (p proxies) hops(h http.Header) []string {
	lines := h.Values(p.header)
	var hops []string
	for _, line := range lines {
		for _, elem := range strings.Split(line, ",") {
			if p.header != "Forwarded" {
				hops = append(hops, elem)
				continue
			}
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
	return hops
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
