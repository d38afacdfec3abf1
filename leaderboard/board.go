// Package leaderboard is the domain and the Redis core of the service: board definitions, periods, key naming,
// and the Lua scripts that submit scores and read top lists, ranks, neighbours and friends atomically.
//
// It knows nothing of GraphQL or of live fan-out; those packages build on Store.
package leaderboard

import (
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // periods start at local midnight of IANA zones even on hosts without a zoneinfo database
	"unicode/utf8"
)

// Order says which way is better.
type Order string

const (
	Desc Order = "DESC" // a higher score ranks first (points)
	Asc  Order = "ASC"  // a lower score ranks first (lap times)
)

// Mode says how a submitted score combines with the stored one.
type Mode string

const (
	Best   Mode = "BEST"   // keep the better of the stored and the submitted score
	Latest Mode = "LATEST" // replace the stored score
	Sum    Mode = "SUM"    // add the submitted delta to the stored total
)

// Window is a time window of a board. The zero value means "the board's first window" wherever a Window is an
// argument of a read.
type Window string

const (
	AllTime Window = "ALL_TIME"
	Daily   Window = "DAILY"
	Weekly  Window = "WEEKLY"
	Monthly Window = "MONTHLY"
	// Season is a window whose periods an admin opens and closes (Store.StartSeason, Store.EndSeason), named by
	// admin-chosen season ids; see season.go.
	Season Window = "SEASON"
)

// Limits on what a client controls.
const (
	MaxIDBytes       = 128         // board, player and event ids: 1 to 128 bytes of UTF-8
	MaxTitleBytes    = 256         // board titles
	MaxNameBytes     = 128         // display names
	MaxMetadataBytes = 1024        // metadata JSON objects, serialized
	MaxScore         = 1 << 53     // largest accepted score magnitude; every integer up to it is exact
	MaxFirst         = 1000        // Top: largest page
	MaxOffset        = 100_000_000 // Top: largest offset
	LiveTop          = 100         // changes within ranks 1..LiveTop are published (all while a rank is watched)
	MaxRadius        = 100         // Around: largest radius
	MaxFriends       = 1000        // Friends: most friend ids
	MaxBulk          = 1000        // SubmitMany: most submissions in one call
	MaxExactTop      = 10_000_000  // largest exactTop
	MaxGrace         = 7 * 24 * time.Hour
	MaxRetention     = 1000
	DefaultGrace     = 5 * time.Minute // how late a score may arrive and still count for a closed period
	DefaultRetention = 3               // closed periods of each window kept readable
)

// MaxSubmitsPerMinute is the largest per-player submission limit of a board (Board.MaxSubmitsPerMinute).
const MaxSubmitsPerMinute = 100_000

// MinAchievedAt and MaxAchievedAt bound when a score may have been achieved (BAD_USER_INPUT outside; the records
// keep updatedAt in ten decimal digits). Besides, achievedAt may lie at most Config.ClockSkew after the store's
// clock.
var (
	MinAchievedAt = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	MaxAchievedAt = time.Unix(9_999_999_999, 0).UTC() // 2286-11-20T17:46:39Z
)

// Board is the definition of a leaderboard. It never changes after creation.
type Board struct {
	ID       string
	Title    string
	Order    Order    // default Desc
	Mode     Mode     // default Best
	Windows  []Window // default [AllTime]; the first one is the default for reads and the one a submit reports
	TimeZone string   // IANA name; default "UTC"
	// ExactTop, when above 0, keeps only the best ExactTop players in the exact ranking; the rest get ranks
	// estimated from a score histogram. 0: every rank is exact.
	ExactTop int
	MinScore *float64 // scores below are rejected; nil: no bound
	MaxScore *float64 // scores above are rejected; nil: no bound
	// Grace is how late a score for a closed period is still accepted. 0 means DefaultGrace; a negative value
	// means no grace at all.
	Grace     time.Duration
	Retention int // default DefaultRetention; closed periods of each window kept readable
	// MaxSubmitsPerMinute, when above 0, is how many submissions one player may make on this board per minute of
	// the store's clock (1 to MaxSubmitsPerMinute); past it a submission is RateLimited and changes nothing.
	// 0: no limit.
	MaxSubmitsPerMinute int
	// CloseEventTop is how many top ranks a period's close event carries (see close.go): 0 means
	// DefaultCloseEventTop, a negative value none; at most MaxCloseEventTop.
	CloseEventTop int
	// Shards is how many shards keep the board's players (shard.go): 1 (0 means 1) keeps them in one hash slot;
	// 2 to MaxShards spread them over that many slots, and so over the primaries of a Redis Cluster.
	Shards int

	loc *time.Location
	sum string // SHA-1 of the stored definition: the scripts check it (check_def in common.lua)
}

// Location returns the board's time zone.
func (b *Board) Location() *time.Location {
	if b.loc == nil {
		loc, err := time.LoadLocation(b.TimeZone)
		if err != nil {
			loc = time.UTC
		}
		b.loc = loc
	}
	return b.loc
}

// DefaultWindow returns the board's first window.
func (b *Board) DefaultWindow() Window { return b.Windows[0] }

// Definition identifies the board's stored definition (its SHA-1): a board deleted and created again with other
// settings has another.
func (b *Board) Definition() string { return b.sum }

// HasWindow reports whether the board keeps window w.
func (b *Board) HasWindow(w Window) bool { return slices.Contains(b.Windows, w) }

// WindowOrDefault returns w, or the board's default window when w is "", and an Invalid error when the board does
// not keep w.
func (b *Board) WindowOrDefault(w Window) (Window, error) {
	if w == "" {
		return b.DefaultWindow(), nil
	}
	if !b.HasWindow(w) {
		return "", errNoWindow(b.ID, w)
	}
	return w, nil
}

// errNoWindow is the refusal of window w on a board that does not keep it.
func errNoWindow(board string, w Window) error {
	return errorf(Invalid, "board %q has no %s window", board, w)
}

// normalize fills defaults and validates the definition.
func (b *Board) normalize() error {
	if err := checkID("board id", b.ID); err != nil {
		return err
	}
	if len(b.Title) > MaxTitleBytes || !utf8.ValidString(b.Title) {
		return errorf(Invalid, "title must be valid UTF-8 of at most %d bytes", MaxTitleBytes)
	}
	if b.Order == "" {
		b.Order = Desc
	}
	if b.Order != Desc && b.Order != Asc {
		return errorf(Invalid, "order must be DESC or ASC")
	}
	if b.Mode == "" {
		b.Mode = Best
	}
	if b.Mode != Best && b.Mode != Latest && b.Mode != Sum {
		return errorf(Invalid, "mode must be BEST, LATEST or SUM")
	}
	if len(b.Windows) == 0 {
		b.Windows = []Window{AllTime}
	}
	seen := map[Window]bool{}
	for _, w := range b.Windows {
		if _, ok := windowCodes[w]; !ok {
			return errorf(Invalid, "unknown window %q", string(w))
		}
		if seen[w] {
			return errorf(Invalid, "window %s is listed twice", w)
		}
		seen[w] = true
	}
	if b.TimeZone == "" {
		b.TimeZone = "UTC"
	}
	if b.TimeZone == "Local" || strings.ContainsAny(b.TimeZone, "\x00\\") || len(b.TimeZone) > 64 {
		return errorf(Invalid, "timezone must be an IANA time zone name such as Europe/Berlin")
	}
	loc, err := time.LoadLocation(b.TimeZone)
	if err != nil {
		return errorf(Invalid, "unknown time zone %q", b.TimeZone)
	}
	b.loc = loc
	if b.ExactTop < 0 || b.ExactTop > MaxExactTop {
		return errorf(Invalid, "exactTop must be between 1 and %d", MaxExactTop)
	}
	for _, v := range []*float64{b.MinScore, b.MaxScore} {
		if v != nil {
			if err := checkScore(*v); err != nil {
				return err
			}
		}
	}
	if b.MinScore != nil && b.MaxScore != nil && *b.MinScore > *b.MaxScore {
		return errorf(Invalid, "minScore must not be above maxScore")
	}
	if err := defaulted(&b.Grace, DefaultGrace, MaxGrace, "grace"); err != nil {
		return err
	}
	b.Grace = b.Grace.Truncate(time.Millisecond) // as stored (graceMs), and as periods close (Board.closedAt)
	if b.Retention == 0 {
		b.Retention = DefaultRetention
	}
	if b.Retention < 0 || b.Retention > MaxRetention {
		return errorf(Invalid, "retention must be between 1 and %d periods", MaxRetention)
	}
	if b.MaxSubmitsPerMinute < 0 || b.MaxSubmitsPerMinute > MaxSubmitsPerMinute {
		return errorf(Invalid, "maxSubmitsPerMinute must be between 1 and %d", MaxSubmitsPerMinute)
	}
	if err := b.normalizeShards(); err != nil {
		return err
	}
	return b.normalizeCloseEventTop()
}

// boardJSON is the stored form of a Board. Two creations are the same definition when these encode equally.
type boardJSON struct {
	ID        string   `json:"id"`
	Title     string   `json:"title,omitempty"`
	Order     Order    `json:"order"`
	Mode      Mode     `json:"mode"`
	Windows   []Window `json:"windows"`
	TimeZone  string   `json:"tz"`
	ExactTop  int      `json:"exactTop,omitempty"`
	MinScore  *float64 `json:"min,omitempty"`
	MaxScore  *float64 `json:"max,omitempty"`
	GraceMS   int64    `json:"graceMs"`
	Retention int      `json:"retention"`
	// Omitted when 0, so definitions without a limit keep their stored form (and SHA-1).
	MaxSubmitsPerMinute int  `json:"maxPerMin,omitempty"`
	CloseTop            *int `json:"closeTop,omitempty"` // nil: DefaultCloseEventTop (definitions from before it match)
	Shards              int  `json:"shards,omitempty"`   // 0: one (definitions from before it match)
}

func (b *Board) encode() string {
	data, _ := json.Marshal(boardJSON{b.ID, b.Title, b.Order, b.Mode, b.Windows, b.TimeZone, b.ExactTop,
		b.MinScore, b.MaxScore, b.Grace.Milliseconds(), b.Retention, b.MaxSubmitsPerMinute,
		storedCloseEventTop(b.CloseEventTop), storedShards(b.Shards)})
	return string(data)
}

// decodeSharded decodes a stored definition only when it may be a sharded board's: one of a single shard omits
// its shards field (boardJSON), so most definitions are told apart without a decode. It returns nil for those.
func decodeSharded(def string) *Board {
	if !strings.Contains(def, `"shards":`) {
		return nil
	}
	if b, err := decodeBoard(def); err == nil && b.Sharded() {
		return b
	}
	return nil
}

func decodeBoard(s string) (*Board, error) {
	var j boardJSON
	if err := json.Unmarshal([]byte(s), &j); err != nil {
		return nil, fmt.Errorf("decode board: %w", err)
	}
	b := &Board{ID: j.ID, Title: j.Title, Order: j.Order, Mode: j.Mode, Windows: j.Windows, TimeZone: j.TimeZone,
		ExactTop: j.ExactTop, MinScore: j.MinScore, MaxScore: j.MaxScore,
		Grace: time.Duration(j.GraceMS) * time.Millisecond, Retention: j.Retention,
		MaxSubmitsPerMinute: j.MaxSubmitsPerMinute, CloseEventTop: loadedCloseEventTop(j.CloseTop),
		Shards: max(j.Shards, 1)}
	loc, err := time.LoadLocation(b.TimeZone)
	if err != nil || len(b.Windows) == 0 {
		return nil, fmt.Errorf("decode board %q: bad stored definition", j.ID)
	}
	b.loc = loc
	b.sum = defSum(s)
	return b, nil
}

func checkID(what, id string) error {
	if len(id) == 0 || len(id) > MaxIDBytes {
		return errorf(Invalid, "%s must be 1 to %d bytes", what, MaxIDBytes)
	}
	if !utf8.ValidString(id) {
		return errorf(Invalid, "%s must be valid UTF-8", what)
	}
	return nil
}

func checkScore(s float64) error {
	if math.IsNaN(s) || math.IsInf(s, 0) {
		return errorf(Invalid, "score must be a finite number")
	}
	if math.Abs(s) > MaxScore {
		return errorf(Invalid, "score magnitude must be at most 2^53")
	}
	return nil
}

// maxScoreText bounds the length of a decimal score (no real score needs more; the exact check below stays cheap).
const maxScoreText = 512

// CheckScoreText checks a score as a client wrote it in decimal (JSON or a GraphQL literal) against the bound on
// its exact value: a number with magnitude at most MaxScore (2^53). 9007199254740993 is refused although it
// rounds to the float64 2^53; within the bound a value is then rounded to the nearest float64.
func CheckScoreText(s string) error {
	if len(s) > maxScoreText {
		return errorf(Invalid, "a score must be a number of at most %d characters", maxScoreText)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return errorf(Invalid, "%q is not a number", s)
	}
	if math.IsInf(f, 0) && err != nil {
		return errorf(Invalid, "score magnitude must be at most 2^53")
	}
	if err := checkScore(f); err != nil {
		return err
	}
	if math.Abs(f) < MaxScore {
		return nil // the exact value rounds below 2^53, so it is below 2^53
	}
	// It rounds to exactly 2^53: only the exact value tells whether it is above.
	x, _, err := big.ParseFloat(s, 10, 1024, big.ToNearestEven)
	if err != nil {
		return errorf(Invalid, "%q is not a number", s)
	}
	if x.Abs(x).Cmp(big.NewFloat(MaxScore)) > 0 {
		return errorf(Invalid, "score magnitude must be at most 2^53")
	}
	return nil
}

// The close event's top (Board.CloseEventTop).
const (
	DefaultCloseEventTop = 100  // top ranks a close event carries unless the board says otherwise
	MaxCloseEventTop     = 1000 // most top ranks a close event may carry
)

func (b *Board) normalizeCloseEventTop() error {
	return defaulted(&b.CloseEventTop, DefaultCloseEventTop, MaxCloseEventTop, "closeEventTop")
}

// defaulted is the rule of a board's bounded settings: 0 stands for def, a negative value for none (0), and more
// than most is Invalid.
func defaulted[T int | time.Duration](v *T, def, most T, name string) error {
	switch {
	case *v == 0:
		*v = def
	case *v < 0:
		*v = 0
	}
	if *v > most {
		return errorf(Invalid, "%s must be between 0 and %v", name, most)
	}
	return nil
}

// storedCloseEventTop is the stored form of a normalized CloseEventTop: nil for the default, so definitions
// stored before the field existed stay equal to new ones.
func storedCloseEventTop(n int) *int {
	if n == DefaultCloseEventTop {
		return nil
	}
	return &n
}

func loadedCloseEventTop(p *int) int {
	if p == nil {
		return DefaultCloseEventTop
	}
	return *p
}

// defSum is the SHA-1 (hex) of a stored definition, as the scripts' check_def computes it.
func defSum(def string) string {
	h := sha1.Sum([]byte(def))
	return hex.EncodeToString(h[:])
}
