// Package mediatype owns the rules on media types that the HTTP layers share: whether a request's Content-Type is
// JSON, as gqlgen's POST transport decides it (mime.ParseMediaType, parameters ignored), and whether its Accept
// header asks for an event stream (PrefersEventStream).
package mediatype

import "mime"

// IsJSON reports whether contentType is application/json, with or without parameters. The bare type, which
// nearly every client sends, is answered without parsing: mime.ParseMediaType allocates a map of parameters,
// and a request asks three times (the batch check, the top cache and the fast path).
func IsJSON(contentType string) bool {
	if contentType == "application/json" {
		return true
	}
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}
