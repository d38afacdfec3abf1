package gqlhttp

import (
	"bytes"
	"net/http"
	"slices"

	"github.com/99designs/gqlgen/graphql"

	"github.com/leaderboard/leaderboard/internal/mediatype"
)

// IsJSONPost reports whether gqlgen's POST transport takes r: a POST of JSON that does not ask for an event stream
// (the event-stream transport answers those).
func IsJSONPost(r *http.Request) bool {
	return r.Method == http.MethodPost && !mediatype.PrefersEventStream(r.Header) &&
		mediatype.IsJSON(r.Header.Get("Content-Type"))
}

// WholeBody returns what is left unread of a body that a middleware read whole before (the server's limitBody
// leaves one with a Bytes method), without consuming it. ok is false for a body that is still to be read.
func WholeBody(r *http.Request) (body []byte, ok bool) {
	rb, ok := r.Body.(interface{ Bytes() []byte })
	if !ok {
		return nil, false
	}
	return rb.Bytes(), true
}

// BodyParams reads a POST's JSON body into what gqlgen's POST transport reads it into, with JSONDecode's error
// for a body it refuses. FastBodyParams reads the bodies clients send; encoding/json reads the rest.
func BodyParams(body []byte) (*graphql.RawParams, error) {
	if p, ok := FastBodyParams(body); ok {
		return p, nil
	}
	p := &graphql.RawParams{}
	if err := JSONDecode(bytes.NewReader(body), p); err != nil {
		return nil, err
	}
	return p, nil
}

// FastBodyParams reads a POST body into what gqlgen's POST transport decodes it into (JSONDecode: one value read,
// whatever follows it ignored): the same query, operation name, variables (objects as map[string]any, arrays as
// []any, numbers as json.Number with their text, strings, booleans, nil) and extensions. It is several times
// cheaper than encoding/json's reflection. ok is false for anything it does not read exactly as encoding/json
// does: invalid JSON, a top-level key other than query, operationName, variables and extensions (encoding/json
// matches keys without regard to case), a key given twice (encoding/json merges repeated objects), a value of the
// wrong type. FuzzFastBodyParams holds it to encoding/json.
func FastBodyParams(body []byte) (*graphql.RawParams, bool) {
	d := jsonReader{b: body}
	d.space()
	p := &graphql.RawParams{}
	var seen [4]bool
	ok := d.members(func(key string) bool {
		k := slices.Index(requestKeys[:], key)
		if k < 0 || seen[k] {
			return false
		}
		seen[k] = true
		if d.null() {
			return true // a null leaves the field as it is (the zero value)
		}
		var ok bool
		switch k {
		case 0:
			p.Query, ok = d.str()
		case 1:
			p.OperationName, ok = d.str()
		case 2:
			p.Variables, ok = d.object()
		case 3:
			p.Extensions, ok = d.object()
		}
		return ok
	})
	return p, ok
}

// requestKeys are the keys of a request body, spelled as clients send them.
var requestKeys = [4]string{"query", "operationName", "variables", "extensions"}
