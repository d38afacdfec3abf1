package graph

import (
	"context"
	"runtime/debug"
	"sync/atomic"

	"github.com/99designs/gqlgen/graphql"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// Role is a set of permissions of an API key.
type Role uint8

const (
	RoleRead   Role = 1 << iota // read queries and subscriptions (only needed when the server requires a read key)
	RoleSubmit                  // submitScore, submitScores
	RoleAdmin                   // createLeaderboard, removePlayer; an admin key may do everything
)

// Principal is who sent a request, as far as the server could tell from its API key.
type Principal struct {
	// Presented: the request carried a key. Roles is zero when that key is unknown.
	Presented bool
	Roles     Role
	// Name identifies the key in logs without revealing it ("admin#1").
	Name string
}

// Has reports whether the principal may act in role r (admin may do everything).
// Any valid key may read.
func (p Principal) Has(r Role) bool {
	return p.Roles&RoleAdmin != 0 || p.Roles&r != 0 || (r == RoleRead && p.Roles != 0)
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal of ctx (the zero Principal, anonymous, when none).
func PrincipalFrom(ctx context.Context) Principal {
	p, _ := ctx.Value(principalKey{}).(Principal)
	return p
}

// require checks that the request's key has role r: no key (or an unknown one) is UNAUTHENTICATED, a key
// without the role FORBIDDEN.
func require(ctx context.Context, r Role) error {
	p := PrincipalFrom(ctx)
	switch {
	case !p.Presented:
		return newError(Unauthenticated, "an API key is required: send Authorization: Bearer <key>")
	case p.Roles == 0:
		return newError(Unauthenticated, "unknown API key")
	case !p.Has(r):
		return newError(Forbidden, "this API key may not do that")
	}
	return nil
}

// ReadGuard returns a root field middleware that, when readKey is true, lets queries (introspection included)
// and subscriptions through only with a valid key (any role). Mutations check their own roles.
func ReadGuard(readKey bool) graphql.RootFieldMiddleware {
	return func(ctx context.Context, next graphql.RootResolver) graphql.Marshaler {
		if readKey {
			fc := graphql.GetRootFieldContext(ctx)
			if fc != nil && fc.Object != "Mutation" && fc.Field.Name != "__typename" {
				if err := require(ctx, RoleRead); err != nil {
					graphql.AddError(ctx, err)
					return graphql.Null
				}
			}
		}
		return next(ctx)
	}
}

// Conn is the state of one websocket connection that subscriptions share: it bounds how many run at once.
type Conn struct {
	max    int32
	active atomic.Int32
}

// NewConn returns the state of a new connection allowing maxSubscriptions at once (0: unlimited).
func NewConn(maxSubscriptions int) *Conn { return &Conn{max: int32(maxSubscriptions)} }

// Active returns the number of running subscriptions.
func (c *Conn) Active() int { return int(c.active.Load()) }

type connKey struct{}

// WithConn returns ctx carrying the connection state c.
func WithConn(ctx context.Context, c *Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// acquire reserves a subscription slot on the connection of ctx and returns the connection (nil: no connection
// state, no websocket, no per-connection limit); the caller gives the slot back with release when the
// subscription ends.
func acquire(ctx context.Context) (*Conn, error) {
	c, _ := ctx.Value(connKey{}).(*Conn)
	if c == nil {
		return nil, nil
	}
	if n := c.active.Add(1); c.max > 0 && n > c.max {
		c.active.Add(-1)
		return nil, &leaderboard.Error{Code: RateLimited, Message: "too many subscriptions on this connection"}
	}
	return c, nil
}

// release gives back a slot that acquire reserved on c (nil: none).
func (c *Conn) release() {
	if c != nil {
		c.active.Add(-1)
	}
}

func stack() string { return string(debug.Stack()) }
