package redistest

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// SlotOwner returns the address of the master that serves slot, as the first node sees it.
func (c *RedisCluster) SlotOwner(ctx context.Context, slot int) (string, error) {
	ids, err := c.nodeIDs(ctx)
	if err != nil {
		return "", err
	}
	n := redis.NewClient(&redis.Options{Addr: c.Addrs[0]})
	defer n.Close()
	id, err := ownerSeenBy(ctx, n, slot)
	if err != nil {
		return "", err
	}
	for addr, nid := range ids {
		if nid == id {
			return addr, nil
		}
	}
	return "", fmt.Errorf("slot %d: owner %s is not a node of the cluster", slot, id)
}

func (c *RedisCluster) nodeIDs(ctx context.Context) (map[string]string, error) {
	ids := map[string]string{}
	for _, a := range c.Addrs {
		n := redis.NewClient(&redis.Options{Addr: a})
		id, err := n.Do(ctx, "CLUSTER", "MYID").Text()
		n.Close()
		if err != nil {
			return nil, err
		}
		ids[a] = id
	}
	return ids, nil
}

// moveKeys migrates every key of a slot (ARGV: slot, host, port, timeout ms) in one script, so that no other
// command runs on the source while some of the slot's keys have moved and others have not: the service's scripts
// declare one key of a board (its definition) and find the others where it is (see leaderboard/script.go).
// redis-cli --cluster reshard moves keys in batches (--cluster-pipeline), with commands running in between.
var moveKeys = redis.NewScript(`
local n = 0
while true do
  local keys = redis.call('CLUSTER', 'GETKEYSINSLOT', ARGV[1], 1000)
  if #keys == 0 then return n end
  redis.call('MIGRATE', ARGV[2], ARGV[3], '', 0, ARGV[4], 'KEYS', unpack(keys))
  n = n + #keys
end`)

// MoveSlot migrates slot, with its keys, to the master at addr as a reshard does: SETSLOT IMPORTING on the target,
// MIGRATING on the source, MIGRATE of every key (all in one step, moveKeys), then SETSLOT NODE on the target, the
// source and the other masters. It returns when every master names addr as the slot's owner.
func (c *RedisCluster) MoveSlot(ctx context.Context, slot int, addr string) error {
	ids, err := c.nodeIDs(ctx)
	if err != nil {
		return err
	}
	from, err := c.SlotOwner(ctx, slot)
	if err != nil {
		return err
	}
	if from == addr {
		return nil
	}
	clients := map[string]*redis.Client{}
	for _, a := range c.Addrs {
		clients[a] = redis.NewClient(&redis.Options{Addr: a})
		defer clients[a].Close()
	}
	src, dst := clients[from], clients[addr]
	if err := dst.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", ids[from]).Err(); err != nil {
		return fmt.Errorf("SETSLOT IMPORTING: %w", err)
	}
	if err := src.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", ids[addr]).Err(); err != nil {
		return fmt.Errorf("SETSLOT MIGRATING: %w", err)
	}
	host, port, _ := net.SplitHostPort(addr)
	if err := moveKeys.Run(ctx, src, nil, slot, host, port, 10000).Err(); err != nil {
		return fmt.Errorf("MIGRATE: %w", err)
	}
	for _, a := range append([]string{addr, from}, c.Addrs...) {
		if err := clients[a].Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", ids[addr]).Err(); err != nil {
			return fmt.Errorf("SETSLOT NODE on %s: %w", a, err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		agree := true
		for _, a := range c.Addrs {
			if owner, err := ownerSeenBy(ctx, clients[a], slot); err != nil || owner != ids[addr] {
				agree = false
			}
		}
		if agree {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("slot %d: the masters do not agree on its new owner", slot)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ownerSeenBy returns the node id that n believes serves slot.
func ownerSeenBy(ctx context.Context, n *redis.Client, slot int) (string, error) {
	lines, err := n.ClusterNodes(ctx).Result()
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(lines, "\n") {
		f := strings.Fields(line)
		if len(f) < 9 {
			continue
		}
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") {
				continue // a slot being imported or migrated
			}
			lo, hi, _ := strings.Cut(r, "-")
			if hi == "" {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 == nil && err2 == nil && slot >= a && slot <= b {
				return f[0], nil
			}
		}
	}
	return "", fmt.Errorf("no owner of slot %d", slot)
}
