package mediatype

import (
	"net/http"
	"strconv"
	"strings"
)

// EventStream is the media type of server-sent events.
const EventStream = "text/event-stream"

// PrefersEventStream reports whether a request's Accept header asks for an event stream rather than JSON: by
// quality first and, between equal qualities, by which the client listed first. Only a range that names
// text/event-stream itself counts for the stream (a stream is a way of talking, not a representation that a
// wildcard picks); JSON (application/json, application/graphql-response+json) counts with its wildcards. A q=0
// stream is never chosen. urql's default, "application/graphql-response+json, …, text/event-stream", lists JSON
// first: JSON. Every request asks this, so the common Accept headers without "event-stream" cost no parsing.
func PrefersEventStream(h http.Header) bool {
	values := h["Accept"] // canonical, as net/http keeps it: no CanonicalMIMEHeaderKey per request
	named := false
	for _, v := range values {
		named = named || containsFold(v, "event-stream")
	}
	if !named {
		return false
	}
	var stream, appJSON, gqlJSON preference
	pos := 0
	for _, v := range values {
		for part := range strings.SplitSeq(v, ",") {
			typ, q, ok := parseRange(part)
			if !ok {
				continue
			}
			switch typ {
			case EventStream:
				stream.offer(q, specificExact, pos)
			case "application/json":
				appJSON.offer(q, specificExact, pos)
			case "application/graphql-response+json":
				gqlJSON.offer(q, specificExact, pos)
			case "application/*":
				appJSON.offer(q, specificType, pos)
				gqlJSON.offer(q, specificType, pos)
			case "*/*":
				appJSON.offer(q, specificAny, pos)
				gqlJSON.offer(q, specificAny, pos)
			}
			pos++
		}
	}
	json := appJSON.better(gqlJSON)
	if stream.q <= 0 {
		return false
	}
	return stream.q > json.q || stream.q == json.q && stream.pos < json.pos
}

// How specific a range is: the most specific range that matches a type gives its quality (RFC 9110, 12.5.1).
const (
	specificAny = iota + 1
	specificType
	specificExact
)

// preference is how much a client wants one type (its quality; 0: not at all, or not named) and the position of
// the range that says so.
type preference struct {
	q        float64
	specific int // 0: no range matched
	pos      int
}

// offer takes a range at pos that matches the type: a more specific one decides over a less specific one, and
// among equally specific ones the first stands.
func (p *preference) offer(q float64, specific, pos int) {
	if specific > p.specific {
		*p = preference{q: q, specific: specific, pos: pos}
	}
}

// better is the preferred of two types: the higher quality, then the one listed first.
func (p preference) better(o preference) preference {
	if o.q > p.q || o.q == p.q && o.pos < p.pos {
		return o
	}
	return p
}

// parseRange reads one media range of an Accept header: its type, lower case, and its quality (1 without q). A
// range that is not type/subtype, or whose q is not a number from 0 to 1, is skipped (ok false).
func parseRange(part string) (typ string, q float64, ok bool) {
	typ, params, _ := strings.Cut(part, ";")
	typ = strings.ToLower(strings.TrimSpace(typ))
	if slash := strings.IndexByte(typ, '/'); slash <= 0 || slash == len(typ)-1 {
		return "", 0, false
	}
	q = 1
	for params != "" {
		var p string
		p, params, _ = strings.Cut(params, ";")
		name, val, _ := strings.Cut(p, "=")
		if !strings.EqualFold(strings.TrimSpace(name), "q") {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil || v < 0 || v > 1 {
			return "", 0, false
		}
		q = v
	}
	return typ, q, true
}

// containsFold reports whether s contains sub (lower case ASCII letters first), ignoring ASCII case, without
// allocating.
func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i]|0x20 == sub[0] && strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}
