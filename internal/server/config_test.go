package server

import (
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
