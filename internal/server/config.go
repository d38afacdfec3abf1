package server

import (
	"flag"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/leaderboard/leaderboard/demo"
	"github.com/leaderboard/leaderboard/internal/periodclose"
	"github.com/leaderboard/leaderboard/leaderboard"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Config is the server's configuration: environment variables, overridden by flags for the common ones. Every
// setting is listed with its default in README.md ("Configuration").
type Config struct {
	ListenAddr        string   // LISTEN_ADDR, -listen: default ":8080"
	RedisURL          string   // REDIS_URL, -redis-url: redis:// or rediss:// URL; empty: see RedisClusterAddrs
	RedisClusterAddrs []string // REDIS_CLUSTER_ADDRS, -redis-cluster-addrs: host:port seeds; neither set: embedded
	RedisPassword     string   // REDIS_PASSWORD: for REDIS_CLUSTER_ADDRS (a REDIS_URL carries its own)
	DatabaseURL       string   // DATABASE_URL, -database-url: PostgreSQL URL of the ledger; empty: no ledger
	// LedgerCheckInterval (LEDGER_CHECK_INTERVAL): how often every board the ledger holds is compared with Redis
	// (lost boards restored, lagging ones caught up); default 5s.
	LedgerCheckInterval time.Duration
	// LedgerRestoreRate (LEDGER_RESTORE_RATE): the most events a second a restore from the ledger applies, so
	// that other boards' writes keep most of Redis and the machine; 0: no limit. Default 25000.
	LedgerRestoreRate float64
	// LedgerRestoreShare (LEDGER_RESTORE_SHARE): the share of its time a restore from the ledger spends applying
	// events, above 0 and at most 1; it rests the rest, so other boards' writes keep their turns. Default 1.
	LedgerRestoreShare float64
	KeyPrefix          string      // KEY_PREFIX: default "lb"; starts every Redis key
	APIKeys            string      // API_KEYS: comma-separated role:key pairs (no flag: keys must not show in ps)
	CORSOrigins        []string    // CORS_ORIGINS, -cors-origins: origins allowed cross-origin (and for websockets)
	PublicOrigins      []string    // PUBLIC_ORIGIN: the origins users open the dashboard at; default: the listen port on loopback
	TrustedProxies     []string    // TRUSTED_PROXIES: CIDRs/addresses of proxies whose CLIENT_ADDR_HEADER counts; default none
	ClientAddrHeader   string      // CLIENT_ADDR_HEADER: the one header the trusted proxies name the client in; default X-Forwarded-For
	IPv6Prefix         int         // IPV6_PREFIX: IPv6 clients in one prefix of this length count as one address; default 64
	Demo               bool        // DEMO, -demo: run the demo simulator and dashboard board
	DemoSettings       demo.Config // DEMO_RATE, DEMO_PLAYERS, DEMO_SEED (see demo.ConfigFromEnv)
	Introspection      bool        // INTROSPECTION, -introspection: default true
	LogLevel           slog.Level
	ShowVersion        bool   // -version: print the build (see Build) and exit
	LogFormat          string // LOG_FORMAT: "text" (default) or "json"

	MaxBodyBytes            int64         // MAX_BODY_BYTES: request body size; default 1 MiB
	MaxBatch                int           // MAX_BATCH: requests in one batched POST (a JSON array); default 10, 0: refused
	MaxResponseBytes        int           // MAX_RESPONSE_BYTES: bytes of one answer (a batch's answers together); default 4 MiB, 0: no bound
	MaxQueryDepth           int           // MAX_QUERY_DEPTH: nesting of selections; default 15
	MaxQueryComplexity      int           // MAX_QUERY_COMPLEXITY: default 50000 (one list field counts per row)
	MaxWSMessageBytes       int64         // MAX_WS_MESSAGE_BYTES: one websocket message from a client; default 64 KiB
	MaxSubscriptionsPerConn int           // MAX_SUBSCRIPTIONS_PER_CONN: default 100
	MaxConnsPerAddr         int           // MAX_CONNS_PER_ADDR: websockets, event streams and exports per client IP; default 200
	ExportConcurrency       int           // EXPORT_CONCURRENCY: exports running at once in this process; default 2, 0: none
	WSPingInterval          time.Duration // WS_PING_INTERVAL: websocket ping period; a peer that answers none for two is dropped; default 20s
	WSProtocolPings         bool          // WS_PROTOCOL_PINGS: also send graphql-transport-ws ping messages (never required); default false
	RequestTimeout          time.Duration // REQUEST_TIMEOUT: per HTTP GraphQL request; default 10s
	ReadTimeout             time.Duration // READ_TIMEOUT: to read a whole request, body included; default 15s
	WriteTimeout            time.Duration // WRITE_TIMEOUT: to answer a request; default REQUEST_TIMEOUT + 5s
	IdleTimeout             time.Duration // IDLE_TIMEOUT: keep-alive connections idle this long are closed; default 60s
	MaxConns                int           // MAX_CONNS: connections held at once (websockets too); default 10000
	MetricsAddr             string        // METRICS_ADDR: serve /metrics here instead of on LISTEN_ADDR; default none
	ShutdownTimeout         time.Duration // SHUTDOWN_TIMEOUT: graceful shutdown budget; default 8s
	MaxConcurrentReads      int           // MAX_CONCURRENT_READS: read calls in flight on Redis; default 32
	MaxConcurrentWrites     int           // MAX_CONCURRENT_WRITES: write calls in flight on Redis; default 32
	RedisPipelineLanes      int           // REDIS_PIPELINE_LANES: pipelines of concurrent script calls in flight; default 4, 0: off
	MaxQueryTokens          int           // MAX_QUERY_TOKENS: lexical tokens of one document; default 40000
	MaxQueryFields          int           // MAX_QUERY_FIELDS: field selections (aliases too) of one document; default 1000
	QueryCacheSize          int           // QUERY_CACHE_SIZE: parsed queries kept (LRU); default 1000
	QueryCacheBytes         int64         // QUERY_CACHE_BYTES: memory the kept documents may hold (estimate); default 64 MiB
	APQCacheSize            int           // APQ_CACHE_SIZE: automatic persisted queries kept (LRU); default 1000
	GCHeapFloor             int64         // GC_HEAP_FLOOR: bytes the heap may reach before a collection while the live heap is small; default 64 MiB, 0: GOGC alone (package heapfloor)

	// Closes are the period-close events' and their webhooks' settings (package periodclose; README
	// "Period-close events and webhooks"): CLOSE_CHECK_INTERVAL and WEBHOOK_*, each field's variable and
	// default named in periodclose.Config.
	Closes periodclose.Config

	// Clock tells the time that decides periods and closes (tests, programs embedding the server); no
	// variable. Default time.Now.
	Clock func() time.Time

	// TraceExporter receives the traces when set (programs embedding the server, tests); otherwise they go over
	// OTLP/HTTP when OTEL_EXPORTER_OTLP_ENDPOINT is set, and tracing is off without it (see tracing.go).
	TraceExporter sdktrace.SpanExporter

	// generatedOnly (tests only; no variable): every result is written by gqlgen's generated code and no request
	// takes the fast path, the other side of TestPreparedResultsMatchGqlgen and TestFastPathMatchesGqlgen.
	generatedOnly bool
}

// LoadConfig reads the configuration from getenv, then args (flags win).
func LoadConfig(args []string, getenv func(string) string) (Config, error) {
	var errs []string
	env := func(name, def string) string {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			return v
		}
		return def
	}
	envInt := func(name string, def int64) int64 {
		s := env(name, "")
		if s == "" {
			return def
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Sprintf("%s: want a non-negative integer, got %q", name, s))
			return def
		}
		return n
	}
	envDur := func(name string, def time.Duration) time.Duration {
		s := env(name, "")
		if s == "" {
			return def
		}
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Sprintf("%s: want a positive duration such as 10s, got %q", name, s))
			return def
		}
		return d
	}
	envShare := func(name string, def float64) float64 {
		s := env(name, "")
		if s == "" {
			return def
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || !(f > 0 && f <= 1) {
			errs = append(errs, fmt.Sprintf("%s: want a number above 0 and at most 1, got %q", name, s))
			return def
		}
		return f
	}
	envBool := func(name string, def bool) bool {
		s := env(name, "")
		if s == "" {
			return def
		}
		b, err := strconv.ParseBool(s)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: want true or false, got %q", name, s))
			return def
		}
		return b
	}

	c := Config{
		MaxBodyBytes:            envInt("MAX_BODY_BYTES", 1<<20),
		MaxBatch:                int(envInt("MAX_BATCH", 10)),
		MaxResponseBytes:        int(envInt("MAX_RESPONSE_BYTES", 4<<20)),
		MaxQueryDepth:           int(envInt("MAX_QUERY_DEPTH", 15)),
		MaxQueryComplexity:      int(envInt("MAX_QUERY_COMPLEXITY", 50_000)),
		MaxWSMessageBytes:       envInt("MAX_WS_MESSAGE_BYTES", 64<<10),
		MaxSubscriptionsPerConn: int(envInt("MAX_SUBSCRIPTIONS_PER_CONN", 100)),
		MaxConnsPerAddr:         int(envInt("MAX_CONNS_PER_ADDR", 200)),
		ExportConcurrency:       int(envInt("EXPORT_CONCURRENCY", 2)),
		WSPingInterval:          envDur("WS_PING_INTERVAL", 20*time.Second),
		WSProtocolPings:         envBool("WS_PROTOCOL_PINGS", false),
		RequestTimeout:          envDur("REQUEST_TIMEOUT", 10*time.Second),
		ShutdownTimeout:         envDur("SHUTDOWN_TIMEOUT", 8*time.Second),
		ReadTimeout:             envDur("READ_TIMEOUT", 15*time.Second),
		IdleTimeout:             envDur("IDLE_TIMEOUT", time.Minute),
		MaxConns:                int(envInt("MAX_CONNS", 10_000)),
		MetricsAddr:             env("METRICS_ADDR", ""),
		MaxConcurrentReads:      int(envInt("MAX_CONCURRENT_READS", 32)),
		MaxConcurrentWrites:     int(envInt("MAX_CONCURRENT_WRITES", 32)),
		RedisPipelineLanes:      int(envInt("REDIS_PIPELINE_LANES", 4)),
		MaxQueryTokens:          int(envInt("MAX_QUERY_TOKENS", 40_000)),
		MaxQueryFields:          int(envInt("MAX_QUERY_FIELDS", 1000)),
		QueryCacheSize:          int(envInt("QUERY_CACHE_SIZE", 1000)),
		QueryCacheBytes:         envInt("QUERY_CACHE_BYTES", 64<<20),
		APQCacheSize:            int(envInt("APQ_CACHE_SIZE", 1000)),
		GCHeapFloor:             envInt("GC_HEAP_FLOOR", 64<<20),
		KeyPrefix:               env("KEY_PREFIX", "lb"),
		RedisPassword:           env("REDIS_PASSWORD", ""),
		APIKeys:                 env("API_KEYS", ""),
		LogFormat:               env("LOG_FORMAT", "text"),
		LedgerCheckInterval:     envDur("LEDGER_CHECK_INTERVAL", 5*time.Second),
		LedgerRestoreShare:      envShare("LEDGER_RESTORE_SHARE", leaderboard.DefaultRestoreShare),
		LedgerRestoreRate:       float64(envInt("LEDGER_RESTORE_RATE", leaderboard.DefaultRestoreRate)),
		Closes: periodclose.Config{
			CheckInterval: envDur("CLOSE_CHECK_INTERVAL", periodclose.DefaultCheckInterval),
			URLs:          splitList(env("WEBHOOK_URLS", "")),
			Secret:        env("WEBHOOK_SECRET", ""),
			Timeout:       envDur("WEBHOOK_TIMEOUT", 10*time.Second),
			Concurrency:   int(envInt("WEBHOOK_CONCURRENCY", 4)),
			RetryMin:      envDur("WEBHOOK_RETRY_MIN", time.Second),
			RetryMax:      envDur("WEBHOOK_RETRY_MAX", 10*time.Minute),
			RetryFor:      envDur("WEBHOOK_RETRY_FOR", 24*time.Hour),
			ClaimIdle:     envDur("WEBHOOK_CLAIM_IDLE", time.Minute),
			PollInterval:  envDur("WEBHOOK_POLL_INTERVAL", time.Second),
		},
	}

	fs := flag.NewFlagSet("leaderboard", flag.ContinueOnError)
	fs.StringVar(&c.ListenAddr, "listen", env("LISTEN_ADDR", ":8080"), "address to listen on (LISTEN_ADDR)")
	fs.StringVar(&c.RedisURL, "redis-url", env("REDIS_URL", ""), "redis:// or rediss:// URL of a standalone Redis (REDIS_URL)")
	fs.StringVar(&c.DatabaseURL, "database-url", env("DATABASE_URL", ""), "PostgreSQL URL of the ledger, the durable record of every write (DATABASE_URL)")
	cluster := fs.String("redis-cluster-addrs", env("REDIS_CLUSTER_ADDRS", ""), "comma-separated host:port seeds of a Redis Cluster (REDIS_CLUSTER_ADDRS)")
	cors := fs.String("cors-origins", env("CORS_ORIGINS", ""), "comma-separated origins allowed cross-origin, or * (CORS_ORIGINS)")
	fs.BoolVar(&c.Demo, "demo", envBool("DEMO", false), "run the demo: a simulated game feeding a demo board (DEMO)")
	fs.BoolVar(&c.Introspection, "introspection", envBool("INTROSPECTION", true), "allow GraphQL introspection (INTROSPECTION)")
	level := fs.String("log-level", env("LOG_LEVEL", "info"), "debug, info, warn or error (LOG_LEVEL)")
	fs.BoolVar(&c.ShowVersion, "version", false, "print the version and revision of this build, and exit")
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Sprintf("unexpected arguments %q", fs.Args()))
	}
	c.WriteTimeout = envDur("WRITE_TIMEOUT", c.RequestTimeout+5*time.Second)
	if d, err := demo.ConfigFromEnv(getenv); err != nil {
		errs = append(errs, err.Error())
	} else {
		c.DemoSettings = d
	}
	c.RedisClusterAddrs = splitList(*cluster)
	c.CORSOrigins = splitList(*cors)
	c.PublicOrigins = splitList(env("PUBLIC_ORIGIN", ""))
	c.TrustedProxies = splitList(env("TRUSTED_PROXIES", ""))
	c.ClientAddrHeader = env("CLIENT_ADDR_HEADER", defaultClientAddrHeader)
	c.IPv6Prefix = int(envInt("IPV6_PREFIX", defaultIPv6Prefix))
	if _, err := parseProxies(c.TrustedProxies, c.ClientAddrHeader, c.IPv6Prefix); err != nil {
		errs = append(errs, err.Error())
	}
	if err := c.LogLevel.UnmarshalText([]byte(*level)); err != nil {
		errs = append(errs, fmt.Sprintf("LOG_LEVEL: want debug, info, warn or error, got %q", *level))
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		errs = append(errs, fmt.Sprintf("LOG_FORMAT: want text or json, got %q", c.LogFormat))
	}
	if c.RedisURL != "" && len(c.RedisClusterAddrs) > 0 {
		errs = append(errs, "set REDIS_URL or REDIS_CLUSTER_ADDRS, not both")
	}
	if strings.ContainsAny(c.KeyPrefix, "{}") || c.KeyPrefix == "" {
		errs = append(errs, "KEY_PREFIX must be non-empty and must not contain { or }")
	}
	errs = append(errs, c.Closes.Check()...)
	if len(errs) > 0 {
		return Config{}, fmt.Errorf("configuration: %s", strings.Join(errs, "; "))
	}
	return c, nil
}

// Embedded reports whether no Redis is configured, so the server runs an in-memory one.
func (c Config) Embedded() bool { return c.RedisURL == "" && len(c.RedisClusterAddrs) == 0 }

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
