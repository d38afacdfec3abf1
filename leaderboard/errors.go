package leaderboard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Code classifies an error for clients. The values are the contract's extensions.code strings.
type Code string

const (
	Invalid      Code = "BAD_USER_INPUT"
	NotFound     Code = "NOT_FOUND"
	Conflict     Code = "CONFLICT"
	PeriodClosed Code = "PERIOD_CLOSED"
	Unavailable  Code = "UNAVAILABLE"
	RateLimited  Code = "RATE_LIMITED" // this server is overloaded (not Redis), or a player's submission limit
	Internal     Code = "INTERNAL"
)

// Error is an application error with a code. Message is safe to show to clients; Err (if any) is the cause,
// for logs only.
type Error struct {
	Code    Code
	Message string
	Err     error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

func errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of err: the code of an *Error in its chain, Unavailable for errors that mean Redis
// could not be reached, and Internal for anything else. A nil error has no code ("").
func ErrorCode(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}

// ErrorMessage returns the client-safe message of err: the message of an *Error, or "internal error".
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}

// errStaleDef is the cause of the error of a script that found the board re-created with another definition than
// the caller's (Store.fresh reloads it and tries again).
var errStaleDef = errors.New("the leaderboard definition changed")

// errLayout is errStaleDef of a read whose path does not fit the board it found: a plain read of a board that is
// sharded now, or a sharded read of one that is not (the board was created again with another shard count since
// its definition was cached). Store.byLayout chooses the path again.
var errLayout = fmt.Errorf("%w: its shard count changed", errStaleDef)

// redisError wraps an error returned by go-redis. Replies of our scripts that start with "LB_<CODE> " become
// typed errors; connection failures become Unavailable; the rest is Internal.
func redisError(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if i := strings.Index(msg, "LB_"); i >= 0 {
		rest := msg[i+3:]
		code, text, _ := strings.Cut(rest, " ")
		switch Code(code) {
		case Invalid, NotFound, Conflict, PeriodClosed:
			return &Error{Code: Code(code), Message: text}
		case "STALE":
			return &Error{Code: Internal, Message: "internal error", Err: errStaleDef}
		case "OTHER":
			return &Error{Code: Unavailable, Message: "the data store holds a deleted board of this id; the board " +
				"is being restored from the ledger", Err: errOtherBoard}
		}
	}
	if isUnavailable(err) {
		return &Error{Code: Unavailable, Message: "the data store is unavailable", Err: err}
	}
	return &Error{Code: Internal, Message: "internal error", Err: err}
}

// errRestoring is the error of a request on a board that Redis lost and the ledger holds, while it is restored.
// Its outcome is known: nothing was applied (a write the ledger recorded meanwhile is applied by the restore,
// and a retry with its eventId finds it).
func errRestoring(board string) error {
	return &Error{Code: Unavailable, Message: fmt.Sprintf("leaderboard %q is being restored from the ledger; try again", board),
		Err: errRestoringNow}
}

// errRestoringNow is in the chain of errRestoring: a restore of the board runs (in this process or another).
var errRestoringNow = fmt.Errorf("a restore of the board runs: %w", ErrNotApplied)

// errOtherBoard is in the chain of the error of a ledgered call whose board's keys hold another board of the
// ledger (the gate's LB_OTHER: a failover to a replica that lagged behind a deletion and creation of the id).
// Nothing was applied; the caller restores the board (sequencer.lost).
var errOtherBoard = fmt.Errorf("the keys hold another board of the ledger: %w", errRestoringNow)

// errRecordedRestoring is the error of a write the ledger recorded while its board is being restored: Redis did not
// take it, the restore will (it applies every event recorded until it switches the board in). So its outcome is
// not known to be "not applied" (OutcomeUnknown holds: a retry must carry the same eventId), unlike errRestoring's.
func errRecordedRestoring(board string) error {
	return &Error{Code: Unavailable, Message: fmt.Sprintf("leaderboard %q is being restored from the ledger, which "+
		"recorded the write (the restore applies it)", board), Err: errRecorded}
}

var errRecorded = errors.New("recorded in the ledger, to be applied by the board's restore")

// ErrNotApplied is in the chain of an UNAVAILABLE error whose write is known not to have been applied (see
// OutcomeUnknown).
var ErrNotApplied = errors.New("not applied")

// OutcomeUnknown reports whether err, returned by a write, leaves open whether the write was applied: Redis may
// have run the script and its answer was lost (a timeout, a connection reset after the call was sent). A retry with
// the same eventId is safe; without one it may apply the write twice. Refusals, overload and failures to connect
// are known not to have applied anything.
func OutcomeUnknown(err error) bool {
	if ErrorCode(err) != Unavailable || errors.Is(err, ErrNotApplied) {
		return false
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" {
		return false
	}
	if errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrClosed) || errors.Is(err, errNotSent) {
		return false
	}
	return !containsAny(err.Error(), refusedBeforeRun)
}

// refusedBeforeRun are the errors of Redis or the connection that say a command was refused before it ran:
// UNAVAILABLE, with a known outcome. cutOff are those that may come after a command was sent: UNAVAILABLE, outcome
// unknown. Both lists have this one owner.
var (
	refusedBeforeRun = []string{"connection refused", "no such host", "CLUSTERDOWN", "LOADING", "TRYAGAIN",
		"MASTERDOWN", "got no slots", oom, busy}
	cutOff = []string{"broken pipe", "connection reset", "i/o timeout"}
)

func containsAny(msg string, subs []string) bool {
	for _, s := range subs {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// oom starts Redis's refusal of a write while it is over maxmemory (before the write's script changed anything).
const oom = "OOM command not allowed"

// busy starts the error Redis answers while a script (or a module command) has run longer than its
// busy-reply-threshold (5 s by default): the command was refused, not run, and Redis answers again when the script
// ends or is killed.
const busy = "BUSY Redis is busy"

func isUnavailable(err error) bool {
	var ne net.Error
	switch {
	case errors.As(err, &ne), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, redis.ErrClosed), errors.Is(err, redis.ErrPoolTimeout),
		errors.Is(err, context.DeadlineExceeded):
		return true
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return true
	}
	msg := err.Error()
	return containsAny(msg, refusedBeforeRun) || containsAny(msg, cutOff)
}
