package server

import (
	"log/slog"

	"github.com/alicebob/miniredis/v2"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// embeddedRedis starts an in-memory Redis (miniredis, which runs the same Lua scripts) for a server started
// without REDIS_URL or REDIS_CLUSTER_ADDRS, so `make run` works on a machine that has only Go.
//
// miniredis has no sharded pub/sub, so the store publishes with plain PUBLISH there (pubsub follows
// Store.PublishCommand and subscribes with SUBSCRIBE).
func embeddedRedis(log *slog.Logger) (*miniredis.Miniredis, string, error) {
	mr, err := miniredis.Run()
	if err != nil {
		return nil, "", err
	}
	log.Warn("NO REDIS CONFIGURED: using an embedded in-memory Redis. NOTHING IS PERSISTED; data is lost when the "+
		"server stops. Set REDIS_URL or REDIS_CLUSTER_ADDRS for real use.", "addr", mr.Addr())
	return mr, leaderboard.PublishPlain, nil
}
