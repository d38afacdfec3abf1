package model

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/99designs/gqlgen/graphql"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// ScoreInput is the schema's ScoreInput (bound in gqlgen.yml): as gqlgen would generate it, but for Score.
type ScoreInput struct {
	Board string `json:"board"`
	// 1 to 128 bytes of UTF-8.
	PlayerID string `json:"playerId"`
	// Finite, and at most 2^53 in magnitude. On SUM boards a delta (may be negative).
	Score Score `json:"score"`
	// Idempotency key: the same eventId on the same board is applied once; a retry gets the first result back.
	EventID *string `json:"eventId,omitempty"`
	// At most 128 bytes; stored with the player and shown in every entry.
	DisplayName *string `json:"displayName,omitempty"`
	// A JSON object of at most 1 KiB; stored with the player and shown in every entry.
	Metadata json.RawMessage `json:"metadata,omitempty"`
	// When the score was achieved. Inside the board's grace window a late score still counts for the period it was achieved in.
	AchievedAt *time.Time `json:"achievedAt,omitempty"`
}

// Score is a submitted score as coerced: its value, or the score rule's refusal of the number the client wrote.
// A number out of range does not fail coercion, so that one bad item of submitScores is refused alone, at its
// path, while the others apply; a value that is not a number at all (a string) still fails it.
type Score struct {
	Value float64
	Err   error // non-nil: the score rule refuses it (a *leaderboard.Error, BAD_USER_INPUT); Value is meaningless
}

// MarshalScore writes a Score's value (gqlgen requires a marshaler; ScoreInput is never written).
func MarshalScore(s Score) graphql.Marshaler { return MarshalFloat(s.Value) }

// UnmarshalScore is UnmarshalFloat, with the score rule's refusal kept in the Score instead of failing.
func UnmarshalScore(v any) (Score, error) {
	f, err := UnmarshalFloat(v)
	var rule *leaderboard.Error
	if errors.As(err, &rule) {
		return Score{Err: err}, nil
	}
	return Score{Value: f}, err
}
