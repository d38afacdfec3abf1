package graph

import (
	"context"
	"errors"
	"log/slog"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// Codes the server adds to those of leaderboard (leaderboard.Invalid, NotFound, Conflict, PeriodClosed,
// Unavailable, RateLimited, Internal). All are values of the contract's extensions.code.
const (
	Unauthenticated leaderboard.Code = "UNAUTHENTICATED"
	Forbidden       leaderboard.Code = "FORBIDDEN"
	RateLimited                      = leaderboard.RateLimited
)

// OutcomeUnknown is the extensions.outcome of a write error after which the write may or may not have been
// applied (see leaderboard.OutcomeUnknown): retry it with the same eventId.
const OutcomeUnknown = "UNKNOWN"

// CodePersistedQueryNotFound is what automatic persisted query clients wait for to resend the full query; it
// is the one code outside the contract's list that the server sends, because the APQ protocol requires it.
const CodePersistedQueryNotFound = "PERSISTED_QUERY_NOT_FOUND"

// Codes lists every extensions.code the server sends.
var Codes = []leaderboard.Code{leaderboard.Invalid, leaderboard.NotFound, leaderboard.Conflict,
	leaderboard.PeriodClosed, Unauthenticated, Forbidden, leaderboard.RateLimited, leaderboard.Unavailable,
	leaderboard.Internal, CodePersistedQueryNotFound}

// Errorf-like constructor for coded errors with a client-safe message.
func newError(code leaderboard.Code, msg string) error {
	return &leaderboard.Error{Code: code, Message: msg}
}

// ErrorPresenter returns gqlgen's error presenter: the one place where errors become extensions.code.
//
//   - *leaderboard.Error (from the store, pubsub, or this package): its code and message; INTERNAL errors are
//     logged with their detail and shown as "internal error".
//   - gqlgen's own errors (parse, validation, argument coercion, complexity): BAD_USER_INPUT, with gqlgen's
//     code, if any, kept in extensions.reason. PERSISTED_QUERY_NOT_FOUND stays as it is (the APQ protocol).
//   - anything else is a bug: INTERNAL, logged.
func ErrorPresenter(log *slog.Logger) graphql.ErrorPresenterFunc {
	return func(ctx context.Context, err error) *gqlerror.Error {
		gqlErr := graphql.DefaultErrorPresenter(ctx, err)
		if gqlErr.Extensions == nil {
			gqlErr.Extensions = map[string]any{}
		}
		var lbErr *leaderboard.Error
		if errors.As(err, &lbErr) {
			gqlErr.Message = lbErr.Message
			if lbErr.Code == leaderboard.Internal || lbErr.Code == "" {
				gqlErr.Message = "internal error"
				lbErr = &leaderboard.Error{Code: leaderboard.Internal, Err: lbErr}
				logInternal(ctx, log, gqlErr, err)
			} else if lbErr.Code == leaderboard.Unavailable {
				log.LogAttrs(ctx, slog.LevelWarn, "data store unavailable", slog.String("path", gqlErr.Path.String()),
					slog.String("err", err.Error()))
				if isMutation(ctx) && leaderboard.OutcomeUnknown(err) {
					// The store's message says why (a lost answer, a restore that will apply the recorded write).
					gqlErr.Message = lbErr.Message + ": the write may or may not have been applied; " +
						"retry it with the same eventId"
					gqlErr.Extensions["outcome"] = OutcomeUnknown
				}
			}
			gqlErr.Extensions["code"] = string(lbErr.Code)
			return gqlErr
		}
		if code, ok := gqlErr.Extensions["code"].(string); ok {
			if code != CodePersistedQueryNotFound {
				gqlErr.Extensions["reason"] = code
				gqlErr.Extensions["code"] = string(leaderboard.Invalid)
			}
			return gqlErr
		}
		// gqlgen reports bad arguments (a value the type rejects, a JSON that is not an object) as a gqlerror
		// around the unmarshaler's error; resolvers of this package only return *leaderboard.Error, so an error
		// that reaches here with a path and no code is input coercion.
		var raw *gqlerror.Error
		if errors.As(err, &raw) {
			gqlErr.Extensions["code"] = string(leaderboard.Invalid)
			return gqlErr
		}
		gqlErr.Message = "internal error"
		gqlErr.Extensions["code"] = string(leaderboard.Internal)
		logInternal(ctx, log, gqlErr, err)
		return gqlErr
	}
}

func logInternal(ctx context.Context, log *slog.Logger, gqlErr *gqlerror.Error, err error) {
	if errors.Is(err, context.Canceled) {
		// The client went away; nothing went wrong on our side.
		log.LogAttrs(ctx, slog.LevelDebug, "request canceled", slog.String("path", gqlErr.Path.String()))
		return
	}
	log.LogAttrs(ctx, slog.LevelError, "internal error", slog.String("path", gqlErr.Path.String()),
		slog.String("err", err.Error()))
}

// Recover returns gqlgen's recover function: a panic in a resolver is logged with its stack by the caller of
// ErrorPresenter and answered as INTERNAL.
func Recover(log *slog.Logger) graphql.RecoverFunc {
	return func(ctx context.Context, p any) error {
		log.LogAttrs(ctx, slog.LevelError, "panic in resolver", slog.Any("panic", p),
			slog.String("stack", stack()))
		return &leaderboard.Error{Code: leaderboard.Internal, Message: "internal error"}
	}
}

// internal wraps an error that is not a *leaderboard.Error as INTERNAL, so the presenter never mistakes a bug
// for bad input.
func internal(err error) error {
	if err == nil {
		return nil
	}
	var lbErr *leaderboard.Error
	if errors.As(err, &lbErr) {
		return err
	}
	return &leaderboard.Error{Code: leaderboard.Internal, Message: "internal error", Err: err}
}

func isMutation(ctx context.Context) bool {
	return graphql.HasOperationContext(ctx) && graphql.GetOperationContext(ctx).Operation != nil &&
		graphql.GetOperationContext(ctx).Operation.Operation == ast.Mutation
}
