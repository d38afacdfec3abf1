package server

import (
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Redis client settings, one place for every client the server opens.
const (
	redisTimeout = 3 * time.Second // one command's socket reads and writes
	readyTimeout = time.Second     // /readyz's PING, socket reads included
	// embeddedTimeout replaces redisTimeout on the embedded store (`make run`): it runs in the process, one
	// command at a time, so a slow answer there is load (the demo seeding, the board listing's 16384 commands),
	// never a lost Redis. Requests are still bounded by REQUEST_TIMEOUT.
	embeddedTimeout = 15 * time.Second
)

// redisOptions returns the options of the server's Redis: a cluster (REDIS_CLUSTER_ADDRS), a standalone server
// (REDIS_URL), or the embedded store at embeddedAddr. Calls fail fast when Redis is down (UNAVAILABLE instead of
// hanging), a request's deadline reaches socket reads, and go-redis never retries (a retried script call could
// apply a SUM delta twice).
func redisOptions(cfg Config, embeddedAddr string) (*redis.UniversalOptions, error) {
	o := &redis.UniversalOptions{
		MaxRetries:            -1,
		ContextTimeoutEnabled: true,
		DisableIdentity:       true, // CLIENT SETINFO is Redis 7.2+; 7.0 answers it with an error
		// CLIENT MAINT_NOTIFICATIONS is a Redis Enterprise extension that open-source Redis answers with an error.
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
	switch {
	case len(cfg.RedisClusterAddrs) > 0:
		o.Addrs, o.Password, o.IsClusterMode = cfg.RedisClusterAddrs, cfg.RedisPassword, true
	case cfg.RedisURL != "":
		u, err := redis.ParseURL(cfg.RedisURL)
		if err != nil {
			return nil, fmt.Errorf("REDIS_URL: %w", err) // go-redis does not echo the password
		}
		o.Addrs, o.DB, o.Username, o.Password, o.TLSConfig = []string{u.Addr}, u.DB, u.Username, u.Password, u.TLSConfig
	default:
		o.Addrs = []string{embeddedAddr}
	}
	return o, nil
}

// newRedisClient returns a client over o with a pool of pool connections and timeout per command.
func newRedisClient(o *redis.UniversalOptions, pool int, timeout time.Duration) redis.UniversalClient {
	c := *o
	c.PoolSize = pool
	c.DialTimeout = min(2*time.Second, timeout)
	c.ReadTimeout, c.WriteTimeout = timeout, timeout
	return redis.NewUniversalClient(&c)
}
