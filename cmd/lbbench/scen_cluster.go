package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// The cluster fan-out step (the live-at-scale issue): a 3-primary Redis Cluster started by the tool, two server
// processes on it, half the largest subscriber count on each (5,000 by default), boards on every primary, the fan-out's submission
// rate spread over the boards and both servers. Every subscriber of a board is on one of the two servers (they
// alternate), so each write reaches the other process through the cluster's sharded pub/sub.
const (
	clusterPrimaries = 3
	clusterServers   = 2
	clusterBoards    = 30 // clusterBoards / clusterPrimaries on each primary
)

// redisCluster is the tool's cluster: its nodes, a client and a Store on it (the new server's key format).
type redisCluster struct {
	nodes []*child
	addrs []string
	rdb   *redis.ClusterClient
	store *leaderboard.Store
}

func (c *redisCluster) stop() {
	if c.rdb != nil {
		c.rdb.Close()
	}
	for _, n := range c.nodes {
		n.stop()
	}
}

// usage sums the nodes' CPU and memory.
func (c *redisCluster) usage() procUsage {
	var u procUsage
	for _, n := range c.nodes {
		nu, _ := readProcUsage(n.pid())
		u.CPU, u.RSS = u.CPU+nu.CPU, u.RSS+nu.RSS
	}
	return u
}

// startCluster starts clusterPrimaries redis-servers with cluster mode on, joins them with redis-cli --cluster
// create (no replicas) and waits until every node reports cluster_state:ok.
func startCluster(ctx context.Context, dir string) (*redisCluster, error) {
	c := &redisCluster{}
	for i := range clusterPrimaries {
		port, err := freePort()
		if err != nil {
			c.stop()
			return nil, err
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		ndir := filepath.Join(dir, fmt.Sprintf("cluster%d", i))
		// A node directory of an earlier run in the same -workdir holds that run's nodes.conf: the node would start
		// as a member of the old cluster, and --cluster create refuses nodes that are not empty.
		if err := os.RemoveAll(ndir); err != nil {
			c.stop()
			return nil, err
		}
		if err := os.MkdirAll(ndir, 0o755); err != nil {
			c.stop()
			return nil, err
		}
		n, err := spawn("redis-server", filepath.Join(dir, fmt.Sprintf("redis-cluster%d.log", i)), nil, "redis-server",
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", ndir, "--protected-mode", "no", "--maxclients", "20000",
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000")
		if err != nil {
			c.stop()
			return nil, err
		}
		c.nodes, c.addrs = append(c.nodes, n), append(c.addrs, addr)
		if err := waitRedis(ctx, n, addr); err != nil {
			c.stop()
			return nil, fmt.Errorf("%w\n%s", err, n.logTail())
		}
	}
	args := append(append([]string{"--cluster", "create"}, c.addrs...), "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput(); err != nil {
		c.stop()
		return nil, fmt.Errorf("redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	deadline := time.Now().Add(readyTimeout)
	for _, addr := range c.addrs {
		nc := redis.NewClient(&redis.Options{Addr: addr})
		for {
			info, err := nc.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				nc.Close()
				c.stop()
				return nil, fmt.Errorf("cluster node %s not ok: %v %s", addr, err, info)
			}
			time.Sleep(100 * time.Millisecond)
		}
		nc.Close()
	}
	c.rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.addrs, PoolSize: 256,
		ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second})
	c.store = leaderboard.New(c.rdb, leaderboard.Config{Prefix: prefixDefault})
	return c, nil
}

// clusterFanoutStep runs the cluster fan-out: it starts the cluster and the servers, creates boards until every
// primary holds clusterBoards/clusterPrimaries of them, connects the subscribers (alternating servers) and runs
// e.o.Runs submission phases; it returns the medians. n subscribers in all.
func (e *env) clusterFanoutStep(ctx context.Context, n, rate int) (Sample, error) {
	cl, err := startCluster(ctx, e.dir)
	if err != nil {
		return Sample{}, err
	}
	defer cl.stop()
	e.logf("cluster: %d primaries on %s", clusterPrimaries, strings.Join(cl.addrs, ", "))
	var servers []*service
	defer func() {
		for _, sv := range servers {
			sv.proc.stop()
			sv.hot.closeAll()
		}
	}()
	var pprofAddr string // with -profile: the first server's (see profileNext below)
	for i := range clusterServers {
		sv := &service{name: fmt.Sprintf("cluster%d", i), bin: e.newSvc().bin, prefix: prefixDefault}
		extra := append([]string{"KEY_PREFIX=" + prefixDefault}, e.o.ServerEnv...)
		if e.o.Profile && i == 0 {
			port, err := freePort()
			if err != nil {
				return Sample{}, err
			}
			pprofAddr = fmt.Sprintf("127.0.0.1:%d", port)
			extra = append(extra, "LBBENCH_PPROF_ADDR="+pprofAddr)
		}
		sv.proc, sv.addr, err = startServer(ctx, sv.bin, e.dir, fmt.Sprintf("server-cluster%d.log", i),
			"REDIS_CLUSTER_ADDRS="+strings.Join(cl.addrs, ","), extra...)
		if err != nil {
			return Sample{}, fmt.Errorf("cluster server %d: %w", i, err)
		}
		sv.hot = newRawHTTP(sv.addr, "/graphql")
		servers = append(servers, sv)
	}
	// Boards on every primary, the same number on each (-quick: one each, so that every board gets enough
	// submissions for latency to be sampled).
	nboards := clusterBoards
	if e.o.Quick {
		nboards = clusterPrimaries
	}
	perPrimary := map[string]int{}
	var boards []string
	for i := 0; len(boards) < nboards; i++ {
		id := fmt.Sprintf("cluster-fanout-%d", i)
		node, err := cl.rdb.MasterForKey(ctx, cl.store.Channel(id))
		if err != nil {
			return Sample{}, err
		}
		if addr := node.Options().Addr; perPrimary[addr] < nboards/clusterPrimaries {
			perPrimary[addr]++
			boards = append(boards, id)
		}
	}
	perBoard := int(math.Ceil(e.o.Duration.Seconds() * float64(rate) / float64(len(boards))))
	fs := make([]*fanout, len(boards))
	times, err := newRespTimes(e.dir, len(boards), perBoard*e.o.Runs+2)
	if err != nil {
		return Sample{}, err
	}
	defer func() {
		for _, f := range fs {
			if f != nil {
				f.close()
			}
		}
		times.remove()
	}()
	var urls []string
	for _, sv := range servers {
		urls = append(urls, "ws://"+sv.addr+"/graphql")
	}
	start := time.Now()
	for b, board := range boards {
		if _, err := cl.store.CreateBoard(ctx, leaderboard.Board{ID: board}); err != nil {
			return Sample{}, err
		}
		seed := make([]leaderboard.Submission, 100)
		for i := range seed {
			seed[i] = leaderboard.Submission{Board: board, Player: "seed-" + strconv.Itoa(i), Score: float64(i + 1)}
		}
		if _, err := cl.store.SubmitMany(ctx, seed); err != nil {
			return Sample{}, err
		}
		fs[b] = newFanout(board, times, b)
		m := n / len(boards)
		if b < n%len(boards) {
			m++
		}
		if err := fs[b].connect(ctx, urls, m); err != nil {
			return Sample{}, err
		}
	}
	e.logf("cluster fan-out: %d subscribers on %d servers, %d boards (%v per primary), connected in %s", n,
		len(servers), len(boards), perPrimary, time.Since(start).Round(time.Millisecond))
	tg := fanTarget{servers: servers, redis: cl.usage,
		top: func(ctx context.Context, board string) ([]row, error) { return storeTop(ctx, cl.store, board) }}
	if pprofAddr != "" { // the first run profiles the first cluster server
		defer func(addr string) { e.pprofAddr = addr }(e.pprofAddr)
		e.pprofAddr = pprofAddr
		e.profileNext("cluster")
	}
	var runs []Sample
	for r := 0; r < e.o.Runs; r++ {
		s, err := e.fanoutRun(ctx, fs, int64(r*perBoard+1), int64((r+1)*perBoard), rate, tg)
		if err != nil {
			return Sample{}, err
		}
		runs = append(runs, s)
	}
	s := medianSample(runs)
	s.Extra["boards"] = float64(len(boards))
	return s, nil
}
