package leaderboard

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Entry is one player's place in a window period of a board.
type Entry struct {
	PlayerID    string
	DisplayName *string
	Rank        int64 // 1-based; equal scores rank by first arrival
	// TieRank is the competition rank: 1 + the number of players with a strictly better score (1, 2, 2, 4), so
	// equal scores share it. Estimated with Rank when Approximate: the estimated rank less the exact-tier players
	// with the same score.
	TieRank     int64
	Approximate bool // the rank is estimated (the player is beyond exactTop)
	Score       float64
	TopPercent  float64 // 100 * Rank / size
	UpdatedAt   time.Time
	Metadata    json.RawMessage // a JSON object, or nil
}

// Page is a slice of a ranking with the size of the window period it came from.
type Page struct {
	Board   string
	Order   Order
	Window  Window
	Period  string
	Size    int64
	Entries []Entry
	// Epoch and Version name the board's last change event the page reflects, when read WithVersion (Versioned).
	Epoch     string
	Version   int64
	Versioned bool
}

// playerMeta is the stored display name and metadata of a player.
type playerMeta struct {
	Name *string `json:"n,omitempty"`
	Meta *string `json:"m,omitempty"`
}

func decodeMeta(s string, e *Entry) {
	if s == "" {
		return
	}
	var m playerMeta
	if json.Unmarshal([]byte(s), &m) != nil {
		return
	}
	e.DisplayName = m.Name
	if m.Meta != nil {
		e.Metadata = json.RawMessage(*m.Meta)
	}
}

// parseEntry reads an entry reply of the scripts: {player, rank, approximate, internal score, updatedAt, meta,
// tieRank}. A reply without tieRank (a dedupe record stored by an older version) gets the rank as its tieRank.
func parseEntry(b *Board, v any, size int64) (Entry, error) {
	row, ok := v.([]any)
	if !ok || len(row) < 6 {
		return Entry{}, fmt.Errorf("unexpected entry reply %T", v)
	}
	var e Entry
	e.PlayerID, _ = row[0].(string)
	e.Rank = toInt(row[1])
	e.Approximate = toInt(row[2]) == 1
	x, err := strconv.ParseFloat(toString(row[3]), 64)
	if err != nil {
		return Entry{}, fmt.Errorf("bad score in reply: %w", err)
	}
	e.Score = b.userScore(x)
	if ts := toInt(row[4]); ts != 0 { // 0: not read (Fields)
		e.UpdatedAt = time.Unix(ts, 0).UTC()
	}
	decodeMeta(toString(row[5]), &e)
	e.TieRank = e.Rank
	if len(row) > 6 && row[6] != nil {
		e.TieRank = toInt(row[6])
	}
	e.TopPercent = TopPercent(e.Rank, size)
	return e, nil
}

// exactRow is the entry reply of an exact player at 0-based position pos of the sorted set, without a tie rank,
// as the scripts reply it (rank_of, append_rows): the rows of the reads without a script, which leave tie ranks to
// the scripts.
func exactRow(player string, pos int64, score string, ts int64, meta string) []any {
	return []any{player, pos + 1, int64(0), score, ts, meta, int64(0)}
}

// TopPercent is an entry's topPercent: 100 * rank / size, the players in its window period (0 when there are
// none). The hub derives it too, for watched ranks it brings up to date from change events.
func TopPercent(rank, size int64) float64 {
	if size <= 0 {
		return 0
	}
	return 100 * float64(rank) / float64(size)
}

// userScore converts a score of the index (negated on DESC boards) to the user's scale, and back. A zero comes
// out as 0 on either order (+ 0 turns -0 into 0): whether the index kept a submitted -0's sign depends on the
// encoding Redis chose for the sorted set (a listpack drops it, a skiplist keeps it), which differs between the
// shards of a board and an unsharded one.
func (b *Board) userScore(x float64) float64 {
	if b.Order == Desc {
		return -x + 0
	}
	return x + 0
}

func toInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case string:
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	case float64:
		return int64(x)
	}
	return 0
}

func toString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}
