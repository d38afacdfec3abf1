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

// MoveSlot migrates slot, with its keys, to the master at addr the way a reshard does (redis-cli --cluster
// reshard): SETSLOT IMPORTING on the target, MIGRATING on the source, MIGRATE of every key, then SETSLOT NODE on
// the target, the source and the other masters. It returns when every master names addr as the slot's owner.
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
	for {
		keys, err := src.ClusterGetKeysInSlot(ctx, slot, 100).Result()
		if err != nil {
			return fmt.Errorf("GETKEYSINSLOT: %w", err)
		}
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", host, port, "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		if err := src.Do(ctx, args...).Err(); err != nil {
			return fmt.Errorf("MIGRATE: %w", err)
		}
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
