package mediatype

import (
	"net/http"
	"testing"
)

// The Accept negotiation between an event stream and JSON: quality first, then the order the client listed them
// in; only a range naming text/event-stream asks for a stream.
func TestPrefersEventStream(t *testing.T) {
	for _, c := range []struct {
		accept []string
		stream bool
	}{
		{nil, false},
		{[]string{""}, false},
		{[]string{"text/event-stream"}, true},                // EventSource, graphql-sse's client, curl -H
		{[]string{"TEXT/Event-Stream; charset=utf-8"}, true}, // case and parameters do not matter
		{[]string{"text/event-stream;q=0"}, false},
		{[]string{"text/event-stream; q=0.0"}, false},
		{[]string{"text/event-stream;q=0.001"}, true},
		// urql's default Accept: JSON first.
		{[]string{"application/graphql-response+json, application/graphql+json, application/json, text/event-stream, multipart/mixed"}, false},
		{[]string{"application/json, text/event-stream"}, false},
		{[]string{"text/event-stream, application/json"}, true},
		{[]string{"application/json;q=0.9, text/event-stream"}, true},
		{[]string{"text/event-stream;q=0.5, application/json"}, false},
		{[]string{"text/event-stream;q=0.5, application/json;q=0.4"}, true},
		{[]string{"application/json;q=0, text/event-stream;q=0.1"}, true},
		{[]string{"application/graphql-response+json;q=0, */*, text/event-stream"}, false}, // application/json via */*
		{[]string{"application/json;q=0, application/graphql-response+json;q=0, */*, text/event-stream"}, true},
		{[]string{"*/*"}, false},
		{[]string{"text/*"}, false}, // a wildcard never asks for a stream
		{[]string{"text/event-stream, */*"}, true},
		{[]string{"*/*, text/event-stream"}, false},
		{[]string{"application/*, text/event-stream"}, false},
		{[]string{"text/event-stream", "application/json"}, true}, // two header lines: one list
		{[]string{"application/json", "text/event-stream"}, false},
		{[]string{"text/event-stream;q=2"}, false},   // not a quality: the range is skipped
		{[]string{"text/event-stream;q=abc"}, false}, // likewise
		{[]string{"text/event-streams"}, false},
		{[]string{"x-text/event-stream"}, false},
		{[]string{"event-stream"}, false},
		{[]string{",,;,text/event-stream,"}, true},
		{[]string{"text/event-stream;q=0, text/event-stream"}, false}, // the first of equally specific ranges stands
	} {
		h := http.Header{}
		for _, v := range c.accept {
			h.Add("Accept", v)
		}
		if got := PrefersEventStream(h); got != c.stream {
			t.Errorf("Accept %q: stream %v, want %v", c.accept, got, c.stream)
		}
	}
}

func FuzzPrefersEventStream(f *testing.F) {
	f.Add("text/event-stream;q=0.5, application/json")
	f.Fuzz(func(t *testing.T, accept string) {
		PrefersEventStream(http.Header{"Accept": {accept}}) // never panics
	})
}
