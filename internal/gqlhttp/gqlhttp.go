// Package gqlhttp holds what the server's GraphQL transports over HTTP share: the error body the HTTP layer writes
// itself (outside gqlgen's execution), the reading of a GraphQL request from a URL or a POST's JSON body (body.go;
// its JSON reader, jsonreader.go), the Content-Type of a response, and the rule that a GET never runs a mutation.
// The plain GET transport (internal/server), the shortcuts in front of gqlgen's POST transport (internal/topcache,
// internal/fastpath) and the event-stream and websocket transports (internal/gqlstream) use it alike.
package gqlhttp

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// WriteError answers with a GraphQL-shaped error body: {"errors":[{"message":..., "extensions":{"code":...}}]}.
func WriteError(w http.ResponseWriter, status int, code, message string) {
	body, _ := json.Marshal(map[string]any{"errors": []map[string]any{
		{"message": message, "extensions": map[string]any{"code": code}}}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}

// URLParams reads a GraphQL request from a GET's URL (query, operationName, variables, extensions), as gqlgen's
// GET transport reads it: the same errors for a URL query or a JSON object that does not decode.
func URLParams(r *http.Request) (*graphql.RawParams, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, err
	}
	params := &graphql.RawParams{Query: q.Get("query"), OperationName: q.Get("operationName")}
	if v := q.Get("variables"); v != "" {
		if JSONDecode(strings.NewReader(v), &params.Variables) != nil {
			return nil, errors.New("variables could not be decoded")
		}
	}
	if e := q.Get("extensions"); e != "" {
		if JSONDecode(strings.NewReader(e), &params.Extensions) != nil {
			return nil, errors.New("extensions could not be decoded")
		}
	}
	return params, nil
}

// JSONDecode decodes r into v as gqlgen's transports decode requests (numbers kept as json.Number).
func JSONDecode(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	return dec.Decode(v)
}

// IsMutation reports whether rc's operation is a mutation, whatever carried its document (query text, a persisted
// query's hash).
func IsMutation(rc *graphql.OperationContext) bool {
	return rc != nil && rc.Operation != nil && rc.Operation.Operation == ast.Mutation
}

// RefuseGETMutation answers a GET whose operation is a mutation, before anything runs: 405, as GraphQL over HTTP
// asks, and the method that may carry it.
func RefuseGETMutation(w http.ResponseWriter) {
	w.Header().Set("Allow", http.MethodPost)
	WriteError(w, http.StatusMethodNotAllowed, string(leaderboard.Invalid), "mutations are not allowed over GET: use POST")
}

// ResponseContentType is the Content-Type gqlgen's POST transport answers with for an Accept header (its
// determineResponseContentType, with no configured headers and application/json by default); its GET transport
// follows the same rule.
func ResponseContentType(accept string) string {
	if accept == "" {
		return "application/json"
	}
	for part := range strings.SplitSeq(accept, ",") {
		mediaType, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch mediaType {
		case "*/*", "application/*", "application/json":
			return "application/json"
		case "application/graphql-response+json":
			return "application/graphql-response+json"
		}
	}
	return "application/graphql-response+json"
}
