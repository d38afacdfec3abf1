package server

import (
	"io"
	"strings"
	"testing"
	"time"
)

func TestLoadConfig(t *testing.T) {
	env := map[string]string{"LISTEN_ADDR": ":9000", "REDIS_CLUSTER_ADDRS": "a:1, b:2,", "CORS_ORIGINS": "https://x.example",
		"MAX_BODY_BYTES": "2048", "WS_PING_INTERVAL": "5s", "INTROSPECTION": "false", "LOG_LEVEL": "debug",
		"DEMO_RATE": "12.5"}
	cfg, err := LoadConfig([]string{"-listen", "127.0.0.1:7000", "-introspection=true"}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ListenAddr != "127.0.0.1:7000" || strings.Join(cfg.RedisClusterAddrs, "|") != "a:1|b:2" ||
		cfg.MaxBodyBytes != 2048 || cfg.WSPingInterval != 5*time.Second || !cfg.Introspection ||
		cfg.LogLevel.String() != "DEBUG" || cfg.Embedded() || cfg.KeyPrefix != "lb" || cfg.MaxQueryDepth != 15 ||
		cfg.DemoSettings.Rate != 12.5 {
		t.Fatalf("config %+v", cfg)
	}
	def, err := LoadConfig(nil, func(string) string { return "" })
	if err != nil || def.ListenAddr != ":8080" || !def.Embedded() || !def.Introspection || def.Demo {
		t.Fatalf("defaults %+v %v", def, err)
	}
	for _, bad := range []map[string]string{
		{"MAX_BODY_BYTES": "lots"}, {"WS_PING_INTERVAL": "-1s"}, {"DEMO": "maybe"}, {"LOG_LEVEL": "loud"},
		{"REDIS_URL": "redis://x", "REDIS_CLUSTER_ADDRS": "a:1"}, {"KEY_PREFIX": "{x}"}, {"LOG_FORMAT": "xml"},
		{"DEMO_RATE": "fast"},
	} {
		if _, err := LoadConfig(nil, func(k string) string { return bad[k] }); err == nil {
			t.Errorf("%v: want an error", bad)
		}
	}
	if _, err := ParseAPIKeys("admin:a,writer:b"); err == nil {
		t.Error("unknown role: want an error")
	}
	if _, err := ParseAPIKeys("admin:"); err == nil {
		t.Error("empty key: want an error")
	}
}

func TestIntrospectionOff(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Introspection = false
	s := startServer(t, cfg)
	s.wantCode(t, "", "BAD_USER_INPUT", `{ __schema { queryType { name } } }`, nil)
	s.must(t, "", `{ leaderboards { id } }`, nil, nil)
}

// The close-event and webhook settings: documented defaults; WEBHOOK_URLS needs WEBHOOK_SECRET and http(s) URLs,
// and WEBHOOK_CLAIM_IDLE must exceed WEBHOOK_TIMEOUT, or the server refuses to start (LoadConfig and New).
func TestWebhookConfig(t *testing.T) {
	def, err := LoadConfig(nil, func(string) string { return "" })
	if err != nil || def.Closes.CheckInterval != 5*time.Second || len(def.Closes.URLs) != 0 || def.Closes.Timeout != 10*time.Second ||
		def.Closes.Concurrency != 4 || def.Closes.RetryMin != time.Second || def.Closes.RetryMax != 10*time.Minute ||
		def.Closes.RetryFor != 24*time.Hour || def.Closes.ClaimIdle != time.Minute || def.Closes.PollInterval != time.Second {
		t.Fatalf("defaults %+v %v", def, err)
	}
	env := map[string]string{"WEBHOOK_URLS": "https://a.example/hook, http://b.example:8080/x?t=1", "WEBHOOK_SECRET": "s",
		"WEBHOOK_RETRY_MIN": "2s", "CLOSE_CHECK_INTERVAL": "1s"}
	cfg, err := LoadConfig(nil, func(k string) string { return env[k] })
	if err != nil || strings.Join(cfg.Closes.URLs, "|") != "https://a.example/hook|http://b.example:8080/x?t=1" ||
		cfg.Closes.Secret != "s" || cfg.Closes.RetryMin != 2*time.Second || cfg.Closes.CheckInterval != time.Second {
		t.Fatalf("config %+v %v", cfg, err)
	}
	for _, bad := range []map[string]string{
		{"WEBHOOK_URLS": "https://a.example/hook"},
		{"WEBHOOK_URLS": "ftp://a.example/hook", "WEBHOOK_SECRET": "s"},
		{"WEBHOOK_URLS": "a.example/hook", "WEBHOOK_SECRET": "s"},
		{"WEBHOOK_URLS": "https://a.example/hook", "WEBHOOK_SECRET": "s", "WEBHOOK_CLAIM_IDLE": "10s"},
		{"WEBHOOK_URLS": "https://a.example/hook", "WEBHOOK_SECRET": "s", "WEBHOOK_RETRY_MAX": "500ms"},
		{"CLOSE_CHECK_INTERVAL": "0s"},
	} {
		if _, err := LoadConfig(nil, func(k string) string { return bad[k] }); err == nil {
			t.Errorf("%v: want an error", bad)
		}
	}
	def.Closes.URLs = []string{"https://a.example/hook"}
	if _, err := New(def, testLogger(t), io.Discard); err == nil || !strings.Contains(err.Error(), "WEBHOOK_SECRET") {
		t.Errorf("New without WEBHOOK_SECRET: %v", err)
	}
}

// README ("Configuration"): no ledger by default; DATABASE_URL (or -database-url) turns it on; the ledger check
// runs every 5 s unless LEDGER_CHECK_INTERVAL says otherwise.
func TestLedgerConfig(t *testing.T) {
	c, err := LoadConfig(nil, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if c.DatabaseURL != "" || c.LedgerCheckInterval != 5*time.Second {
		t.Fatalf("defaults: DatabaseURL %q, LedgerCheckInterval %v; want none and 5s", c.DatabaseURL, c.LedgerCheckInterval)
	}
	env := map[string]string{"DATABASE_URL": "postgres://a@b/c", "LEDGER_CHECK_INTERVAL": "750ms"}
	c, err = LoadConfig(nil, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if c.DatabaseURL != "postgres://a@b/c" || c.LedgerCheckInterval != 750*time.Millisecond {
		t.Fatalf("from the environment: %q %v", c.DatabaseURL, c.LedgerCheckInterval)
	}
	c, err = LoadConfig([]string{"-database-url", "postgres://x@y/z"}, func(k string) string { return env[k] })
	if err != nil || c.DatabaseURL != "postgres://x@y/z" {
		t.Fatalf("the flag wins: %q %v", c.DatabaseURL, err)
	}
}

// loadWith is LoadConfig with one environment variable set, name to value, and no flags.
func loadWith(name, value string) (Config, error) {
	return LoadConfig(nil, func(k string) string {
		if k == name {
			return value
		}
		return ""
	})
}

// README ("Configuration"): a restore applies at most 25,000 events a second by default (its row says so);
// LEDGER_RESTORE_RATE takes a non-negative integer, 0 for no limit (a negative rate in the store's Config), and
// refuses anything else.
func TestLedgerRestoreRateConfig(t *testing.T) {
	for v, want := range map[string]float64{"": 25_000, "1000": 1000, "0": 0} {
		if c, err := loadWith("LEDGER_RESTORE_RATE", v); err != nil || c.LedgerRestoreRate != want {
			t.Fatalf("LEDGER_RESTORE_RATE=%q: %v; want %v", v, err, want)
		}
	}
	if row := readmeRow(t, "Configuration", "`LEDGER_RESTORE_RATE`", ""); row[2] != "`25000`" {
		t.Errorf("README: LEDGER_RESTORE_RATE defaults to %s; LoadConfig: 25000", row[2])
	}
	if restoreRate(0) >= 0 || restoreRate(1000) != 1000 {
		t.Fatalf("restoreRate(0) = %v, restoreRate(1000) = %v; want no limit (negative) and 1000",
			restoreRate(0), restoreRate(1000))
	}
	for _, v := range []string{"-1", "fast", "1.5"} {
		if _, err := loadWith("LEDGER_RESTORE_RATE", v); err == nil || !strings.Contains(err.Error(), "LEDGER_RESTORE_RATE") {
			t.Fatalf("LEDGER_RESTORE_RATE=%q: %v; want an error that names it", v, err)
		}
	}
}

// README ("Configuration"): a restore does not rest by default (a share of 1); LEDGER_RESTORE_SHARE takes a number
// above 0 and at most 1, and anything else is a configuration error that names it.
func TestLedgerRestoreShareConfig(t *testing.T) {
	for v, want := range map[string]float64{"": 1, "0.25": 0.25, "0.5": 0.5} {
		if c, err := loadWith("LEDGER_RESTORE_SHARE", v); err != nil || c.LedgerRestoreShare != want {
			t.Fatalf("LEDGER_RESTORE_SHARE=%q: %v; want %v", v, err, want)
		}
	}
	for _, v := range []string{"0", "-0.5", "1.5", "half", "NaN"} {
		if _, err := loadWith("LEDGER_RESTORE_SHARE", v); err == nil || !strings.Contains(err.Error(), "LEDGER_RESTORE_SHARE") {
			t.Fatalf("LEDGER_RESTORE_SHARE=%q: %v; want an error that names it", v, err)
		}
	}
}
