package graph

import (
	"context"
	"unicode/utf8"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// CheckText reports what is wrong with client text (a JSON request body or message, a GraphQL document) that
// would otherwise be rewritten silently: invalid UTF-8, or a \u escape of a lone UTF-16 surrogate (\ud800 without
// its pair). encoding/json and gqlparser both turn those into U+FFFD, so "\ud800", a raw 0xff and "lit\xc3" would
// all become the same id. It returns "" for good text.
func CheckText(b []byte) string {
	if !utf8.Valid(b) {
		return "the request is not valid UTF-8"
	}
	if loneSurrogate(b) {
		return `the request escapes a lone UTF-16 surrogate (such as \ud800)`
	}
	return ""
}

// loneSurrogate finds \uD800-\uDFFF escapes that are not a high surrogate directly followed by an escaped low one.
// A backslash escapes only when an odd number of backslashes precedes the u (JSON and GraphQL strings agree).
func loneSurrogate(b []byte) bool {
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		j := i
		for j < len(b) && b[j] == '\\' {
			j++
		}
		if (j-i)%2 == 1 && j < len(b) && b[j] == 'u' {
			if hi, ok := hex4(b, j+1); ok && hi >= 0xD800 && hi <= 0xDFFF {
				if hi >= 0xDC00 {
					return true // a low surrogate alone
				}
				if lo, ok := hex4(b, j+7); !ok || b[j+5] != '\\' || b[j+6] != 'u' || lo < 0xDC00 || lo > 0xDFFF {
					return true
				}
				j += 11
			}
		}
		i = j - 1
	}
	return false
}

func hex4(b []byte, at int) (int, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	n := 0
	for _, c := range b[at : at+4] {
		switch {
		case c >= '0' && c <= '9':
			n = n*16 + int(c-'0')
		case c >= 'a' && c <= 'f':
			n = n*16 + int(c-'a'+10)
		case c >= 'A' && c <= 'F':
			n = n*16 + int(c-'A'+10)
		default:
			return 0, false
		}
	}
	return n, true
}

// TextCheck is a gqlgen extension that applies CheckText to the document of every operation, before gqlparser's
// rewriting of escapes is final: every transport (POST, GET, websocket) goes through it. Request bodies and
// variables are checked by the transports' callers (their JSON is decoded before any extension runs).
type TextCheck struct{}

var (
	_ graphql.HandlerExtension          = TextCheck{}
	_ graphql.OperationParameterMutator = TextCheck{}
)

func (TextCheck) ExtensionName() string                   { return "TextCheck" }
func (TextCheck) Validate(graphql.ExecutableSchema) error { return nil }

// MutateOperationParameters runs before the document is parsed.
func (TextCheck) MutateOperationParameters(ctx context.Context, p *graphql.RawParams) *gqlerror.Error {
	if msg := CheckText([]byte(p.Query)); msg != "" {
		err := gqlerror.Errorf("%s", msg)
		err.Extensions = map[string]any{"code": string(leaderboard.Invalid)}
		return err
	}
	return nil
}
