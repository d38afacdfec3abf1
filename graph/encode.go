package graph

import (
	"encoding/json"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/vektah/gqlparser/v2/ast"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// The encoder of prepared results (prepared.go): an Entry or a ScoreResult written for a selection compiled once
// per document, byte for byte as the generated marshalers write it (graphql.MarshalString, model.MarshalFloat,
// graphql.MarshalTime, model.MarshalJSON, graphql.FieldSet), without their field contexts, closures and
// allocations per field. A value the generated code would answer with an error (a zero time, a non-finite
// float) is not encoded here: the caller hands the whole value to the generated marshaler instead.

// selKind is what a selected field writes.
type selKind uint8

const (
	selTypename selKind = iota
	selPlayerID
	selDisplayName
	selRank
	selTieRank
	selApproximate
	selScore
	selTopPercent
	selUpdatedAt
	selMetadata
	selEntry // ScoreResult.entry
	selPreviousRank
	selPreviousScore
	selUpdated
	selDuplicate
)

var entrySelKinds = map[string]selKind{"__typename": selTypename, "playerId": selPlayerID,
	"displayName": selDisplayName, "rank": selRank, "tieRank": selTieRank, "approximate": selApproximate,
	"score": selScore, "topPercent": selTopPercent, "updatedAt": selUpdatedAt, "metadata": selMetadata}

var scoreResultSelKinds = map[string]selKind{"__typename": selTypename, "entry": selEntry,
	"previousRank": selPreviousRank, "previousScore": selPreviousScore, "updated": selUpdated,
	"duplicate": selDuplicate}

// selField is one selected field: the bytes that open it (`"alias":`, after a comma unless it is the first) and
// what it writes.
type selField struct {
	open []byte
	kind selKind
	sub  []selField // entry's selection
}

// compileSelection compiles a selection set of plain fields of one type (kinds: the type's fields). ok is false
// for anything else: fragments, directives (@skip, @include: they depend on variables), an alias selected twice
// (gqlgen merges those), a field the encoder does not know.
func compileSelection(set ast.SelectionSet, kinds map[string]selKind) ([]selField, bool) {
	if len(set) == 0 {
		return nil, false
	}
	out := make([]selField, 0, len(set))
	seen := make(map[string]bool, len(set))
	for i, s := range set {
		f, ok := s.(*ast.Field)
		if !ok || len(f.Directives) > 0 || seen[f.Alias] {
			return nil, false
		}
		seen[f.Alias] = true
		kind, ok := kinds[f.Name]
		if !ok {
			return nil, false
		}
		sf := selField{kind: kind}
		if i > 0 {
			sf.open = append(sf.open, ',')
		}
		sf.open = append(appendQuoted(sf.open, f.Alias), ':')
		if kind == selEntry {
			if sf.sub, ok = compileSelection(f.SelectionSet, entrySelKinds); !ok {
				return nil, false
			}
		} else if len(f.SelectionSet) > 0 {
			return nil, false
		}
		out = append(out, sf)
	}
	return out, true
}

// appendEntry appends e as the generated _Entry writes it for sel. ok is false when a selected value is one the
// generated code answers with an error (a zero updatedAt, a score or topPercent that is not finite).
func appendEntry(dst []byte, sel []selField, e *leaderboard.Entry) (_ []byte, ok bool) {
	dst = append(dst, '{')
	for i := range sel {
		f := &sel[i]
		dst = append(dst, f.open...)
		switch f.kind {
		case selTypename:
			dst = append(dst, `"Entry"`...)
		case selPlayerID:
			dst = appendQuoted(dst, e.PlayerID)
		case selDisplayName:
			if e.DisplayName == nil {
				dst = append(dst, "null"...)
			} else {
				dst = appendQuoted(dst, *e.DisplayName)
			}
		case selRank:
			dst = strconv.AppendInt(dst, e.Rank, 10)
		case selTieRank:
			dst = strconv.AppendInt(dst, e.TieRank, 10)
		case selApproximate:
			dst = strconv.AppendBool(dst, e.Approximate)
		case selScore:
			if dst, ok = appendFloat(dst, e.Score); !ok {
				return dst, false
			}
		case selTopPercent:
			if dst, ok = appendFloat(dst, e.TopPercent); !ok {
				return dst, false
			}
		case selUpdatedAt:
			if e.UpdatedAt.IsZero() {
				return dst, false // graphql.MarshalTime: null, which Time! does not allow
			}
			dst = appendTime(dst, e.UpdatedAt)
		case selMetadata:
			if len(e.Metadata) == 0 || !json.Valid(e.Metadata) {
				dst = append(dst, "null"...) // model.MarshalJSON
			} else {
				dst = append(dst, e.Metadata...)
			}
		default:
			return dst, false
		}
	}
	return append(dst, '}'), true
}

// appendScoreResult appends r as the generated _ScoreResult writes it for sel (ok: as appendEntry).
func appendScoreResult(dst []byte, sel []selField, r *leaderboard.Result) (_ []byte, ok bool) {
	dst = append(dst, '{')
	for i := range sel {
		f := &sel[i]
		dst = append(dst, f.open...)
		switch f.kind {
		case selTypename:
			dst = append(dst, `"ScoreResult"`...)
		case selEntry:
			if dst, ok = appendEntry(dst, f.sub, &r.Entry); !ok {
				return dst, false
			}
		case selPreviousRank:
			if r.PreviousRank == nil {
				dst = append(dst, "null"...)
			} else {
				dst = strconv.AppendInt(dst, *r.PreviousRank, 10)
			}
		case selPreviousScore:
			if r.PreviousScore == nil {
				dst = append(dst, "null"...)
			} else if dst, ok = appendFloat(dst, *r.PreviousScore); !ok {
				return dst, false
			}
		case selUpdated:
			dst = strconv.AppendBool(dst, r.Updated)
		case selDuplicate:
			dst = strconv.AppendBool(dst, r.Duplicate)
		default:
			return dst, false
		}
	}
	return append(dst, '}'), true
}

// appendScoreResults appends a list of results as the generated [ScoreResult]! marshaler writes it (a failed
// item is null; its error is the resolver's).
func appendScoreResults(dst []byte, sel []selField, rs []*leaderboard.Result) (_ []byte, ok bool) {
	dst = append(dst, '[')
	for i, r := range rs {
		if i > 0 {
			dst = append(dst, ',')
		}
		if r == nil {
			dst = append(dst, "null"...)
		} else if dst, ok = appendScoreResult(dst, sel, r); !ok {
			return dst, false
		}
	}
	return append(dst, ']'), true
}

// appendEntries appends a list of entries as the generated [Entry!]! marshaler writes it.
func appendEntries(dst []byte, sel []selField, es []leaderboard.Entry) (_ []byte, ok bool) {
	dst = append(dst, '[')
	for i := range es {
		if i > 0 {
			dst = append(dst, ',')
		}
		if dst, ok = appendEntry(dst, sel, &es[i]); !ok {
			return dst, false
		}
	}
	return append(dst, ']'), true
}

// appendQuoted appends s quoted as graphql.MarshalString writes it: only '"', '\\' and control characters are
// escaped (HTML characters and U+2028 are the transport's encoding/json's business), invalid UTF-8 as it is.
func appendQuoted(dst []byte, s string) []byte {
	const hex = "0123456789ABCDEF" // graphql.encodeHex: upper case
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '\\' && c != '"' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '\t':
			dst = append(dst, `\t`...)
		case '\r':
			dst = append(dst, `\r`...)
		case '\n':
			dst = append(dst, `\n`...)
		case '\\':
			dst = append(dst, `\\`...)
		case '"':
			dst = append(dst, `\"`...)
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendFloat appends f as model.MarshalFloat writes it (fmt's %g, which is strconv's shortest 'g' form: 1e+06,
// 0.0001, 1e-05). ok is false for NaN and infinities.
func appendFloat(dst []byte, f float64) ([]byte, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return dst, false
	}
	return strconv.AppendFloat(dst, f, 'g', -1, 64), true
}

// appendTime appends t quoted as graphql.MarshalTime writes it (RFC 3339 with nanoseconds; nothing to escape).
func appendTime(dst []byte, t time.Time) []byte {
	dst = append(dst, '"')
	dst = t.AppendFormat(dst, time.RFC3339Nano)
	return append(dst, '"')
}

// encoded is a prepared value's bytes as a graphql.Marshaler.
type encoded []byte

func (e encoded) MarshalGQL(w io.Writer) { w.Write(e) }
