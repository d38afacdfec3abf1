package redistest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/internal/childproc"
)

const (
	// clusterNodes is the number of masters in a test cluster (no replicas).
	clusterNodes = 3
	// clusterSlots is the number of hash slots in Redis Cluster.
	clusterSlots = 16384
	// clusterCreateTimeout bounds `redis-cli --cluster create`.
	clusterCreateTimeout = 30 * time.Second
	// clusterOKTimeout bounds the wait for every node to report a healthy,
	// fully covered cluster after creation.
	clusterOKTimeout = 10 * time.Second
)

// RedisCluster is a real 3-master Redis Cluster (no replicas, node timeout
// 2000 ms) on 127.0.0.1, with all 16384 slots assigned. (The type cannot be
// called Cluster because the constructor is.)
//
// A RedisCluster returned by Cluster belongs to one test and is stopped in
// its cleanup; one returned by SharedCluster lives until Main returns and
// must not be stopped by tests.
type RedisCluster struct {
	// Addrs are the "127.0.0.1:port" addresses of the master nodes.
	Addrs []string

	nodes  []*Server
	dir    string
	shared bool
}

// Cluster starts a fresh 3-node Redis Cluster (each node a redis-server with
// the same flags as Standalone plus --cluster-enabled yes, --cluster-node-timeout
// 2000 and an explicit --cluster-port), joins it with
// `redis-cli --cluster create ... --cluster-replicas 0 --cluster-yes`, and
// returns once every node reports cluster_state:ok and CLUSTER SLOTS on every
// node covers all 16384 slots (waiting at most 10 s). The nodes are stopped
// in tb's cleanup. It fails tb with the node logs if anything goes wrong.
func Cluster(tb testing.TB) *RedisCluster {
	tb.Helper()
	requireBinaries(tb, true)
	c, err := newCluster()
	if err != nil {
		tb.Fatalf("redistest: starting redis cluster: %v", err)
	}
	for _, n := range c.nodes {
		n.owner = tb
	}
	tb.Cleanup(c.stop)
	return c
}

func newCluster() (*RedisCluster, error) {
	dir, err := os.MkdirTemp("", "redistest-cluster-")
	if err != nil {
		return nil, err
	}
	c := &RedisCluster{dir: dir, nodes: make([]*Server, clusterNodes)}
	errs := make([]error, clusterNodes)
	var wg sync.WaitGroup
	for i := range clusterNodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.nodes[i], errs[i] = newServer(dir, fmt.Sprintf("node%d", i), true)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.stop()
		return nil, err
	}
	for _, n := range c.nodes {
		c.Addrs = append(c.Addrs, n.Addr)
	}

	ctx, cancel := context.WithTimeout(context.Background(), clusterCreateTimeout)
	defer cancel()
	args := append([]string{"--cluster", "create"}, c.Addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	out, err := runCmd(exec.CommandContext(ctx, redisCLIPath, args...))
	if err != nil {
		err = fmt.Errorf("redis-cli %s: %v\n--- output ---\n%s%s", childproc.QuoteArgs(args), err, out, c.logs())
		c.stop()
		return nil, err
	}
	if err := c.waitOK(time.Now().Add(clusterOKTimeout)); err != nil {
		err = fmt.Errorf("%v\n--- redis-cli --cluster create output ---\n%s%s", err, out, c.logs())
		c.stop()
		return nil, err
	}
	return c, nil
}

// waitOK polls every node until each reports cluster_state:ok, knows all
// nodes, and its CLUSTER SLOTS covers every slot exactly once, served only
// by this cluster's nodes, with all nodes agreeing on the slot map.
func (c *RedisCluster) waitOK(deadline time.Time) error {
	clients := make([]*redis.Client, len(c.Addrs))
	for i, addr := range c.Addrs {
		clients[i] = redis.NewClient(&redis.Options{
			Addr:            addr,
			DialTimeout:     time.Second,
			ReadTimeout:     time.Second,
			WriteTimeout:    time.Second,
			MaxRetries:      -1,
			PoolSize:        1,
			Protocol:        2,
			DisableIdentity: true,
		})
	}
	defer func() {
		for _, cl := range clients {
			_ = cl.Close()
		}
	}()
	for {
		err := c.checkOK(clients)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster %v not healthy after %v: %w", c.Addrs, clusterOKTimeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *RedisCluster) checkOK(clients []*redis.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	known := map[string]bool{}
	for _, a := range c.Addrs {
		known[a] = true
	}
	var firstMap string
	for i, cl := range clients {
		addr := c.Addrs[i]
		info, err := cl.ClusterInfo(ctx).Result()
		if err != nil {
			return fmt.Errorf("%s: CLUSTER INFO: %v", addr, err)
		}
		fields := parseInfo(info)
		if fields["cluster_state"] != "ok" {
			return fmt.Errorf("%s: cluster_state:%s", addr, fields["cluster_state"])
		}
		if want := fmt.Sprint(clusterSlots); fields["cluster_slots_assigned"] != want || fields["cluster_slots_ok"] != want {
			return fmt.Errorf("%s: cluster_slots_assigned:%s cluster_slots_ok:%s", addr, fields["cluster_slots_assigned"], fields["cluster_slots_ok"])
		}
		if want := fmt.Sprint(len(c.Addrs)); fields["cluster_known_nodes"] != want || fields["cluster_size"] != want {
			return fmt.Errorf("%s: cluster_known_nodes:%s cluster_size:%s, want %s", addr, fields["cluster_known_nodes"], fields["cluster_size"], want)
		}
		//lint:ignore SA1019 CLUSTER SLOTS is deprecated in 7.0 but still served; it is the simplest slot map to check
		slots, err := cl.ClusterSlots(ctx).Result()
		if err != nil {
			return fmt.Errorf("%s: CLUSTER SLOTS: %v", addr, err)
		}
		var covered [clusterSlots]bool
		n := 0
		var ranges []string
		for _, r := range slots {
			if r.Start < 0 || r.End >= clusterSlots || r.Start > r.End || len(r.Nodes) == 0 {
				return fmt.Errorf("%s: CLUSTER SLOTS: bad range %+v", addr, r)
			}
			if !known[r.Nodes[0].Addr] {
				return fmt.Errorf("%s: CLUSTER SLOTS: slots %d-%d served by unknown node %q", addr, r.Start, r.End, r.Nodes[0].Addr)
			}
			for s := r.Start; s <= r.End; s++ {
				if covered[s] {
					return fmt.Errorf("%s: CLUSTER SLOTS: slot %d assigned twice", addr, s)
				}
				covered[s] = true
				n++
			}
			ranges = append(ranges, fmt.Sprintf("%d-%d@%s", r.Start, r.End, r.Nodes[0].Addr))
		}
		if n != clusterSlots {
			for s := range covered {
				if !covered[s] {
					return fmt.Errorf("%s: CLUSTER SLOTS covers %d of %d slots (first missing: %d)", addr, n, clusterSlots, s)
				}
			}
		}
		sort.Strings(ranges)
		m := strings.Join(ranges, " ")
		if i == 0 {
			firstMap = m
		} else if m != firstMap {
			return fmt.Errorf("slot maps differ: %s has [%s], %s has [%s]", c.Addrs[0], firstMap, addr, m)
		}
	}
	return nil
}

func parseInfo(s string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m
}

func (c *RedisCluster) logs() string {
	var b strings.Builder
	for _, n := range c.nodes {
		if n != nil {
			fmt.Fprintf(&b, "\n--- redis-server log %s (%s) ---\n%s", n.logPath, n.Addr, childproc.LogTail(n.logPath))
		}
	}
	return b.String()
}

// Options returns a new UniversalOptions with all node addresses and
// IsClusterMode set (so go-redis always builds a *redis.ClusterClient), and
// go-redis defaults otherwise; callers may modify it.
func (c *RedisCluster) Options() *redis.UniversalOptions {
	return &redis.UniversalOptions{
		Addrs:         append([]string(nil), c.Addrs...),
		IsClusterMode: true,
	}
}

// Client returns a new *redis.ClusterClient (as a redis.UniversalClient,
// via redis.NewUniversalClient(c.Options())) that is closed in tb's cleanup.
func (c *RedisCluster) Client(tb testing.TB) redis.UniversalClient {
	tb.Helper()
	cl := redis.NewUniversalClient(c.Options())
	tb.Cleanup(func() { _ = cl.Close() })
	return cl
}

// Stop stops all nodes (SIGTERM, SIGKILL after 3 s each, concurrently) and
// removes the cluster directory. It is idempotent and panics on a shared
// cluster, which other tests are using.
func (c *RedisCluster) Stop() {
	if c.shared {
		panic("redistest: Stop called on a shared cluster; use redistest.Cluster for a private one")
	}
	c.stop()
}

func (c *RedisCluster) stop() {
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		if n != nil {
			wg.Add(1)
			go func() { defer wg.Done(); n.stop() }()
		}
	}
	wg.Wait()
	os.RemoveAll(c.dir)
}

// runCmd runs cmd like CombinedOutput, but started through childproc.Start so that
// it too dies with the test binary.
func runCmd(cmd *exec.Cmd) ([]byte, error) {
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := childproc.Start(cmd); err != nil {
		return nil, err
	}
	err := cmd.Wait()
	return out.Bytes(), err
}
