package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"
)

// monitorCounts is what MONITOR saw on one Redis node: commands by name (lower case) that clients sent, and those
// that scripts ran (MONITOR's "[db lua]" lines, for EVAL and FCALL alike).
type monitorCounts struct {
	sent, inside map[string]int
}

// monitor runs fn while a MONITOR connection to every one of addrs counts the commands each node receives. It is
// for probes of a few operations (MONITOR costs Redis time on every command), never for a measured phase.
func monitor(ctx context.Context, addrs []string, fn func() error) ([]monitorCounts, error) {
	out := make([]monitorCounts, len(addrs))
	var conns []net.Conn
	var wg sync.WaitGroup
	defer func() {
		for _, c := range conns {
			c.Close()
		}
		wg.Wait()
	}()
	var mu sync.Mutex
	for i, addr := range addrs {
		out[i] = monitorCounts{sent: map[string]int{}, inside: map[string]int{}}
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		conns = append(conns, c)
		c.SetDeadline(time.Now().Add(time.Minute))
		if _, err := c.Write([]byte("MONITOR\r\n")); err != nil {
			return nil, err
		}
		br := bufio.NewReader(c)
		if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "+OK") {
			return nil, fmt.Errorf("MONITOR on %s: %q %v", addr, line, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					return
				}
				name, lua, ok := parseMonitorLine(line)
				if !ok {
					continue
				}
				mu.Lock()
				if lua {
					out[i].inside[name]++
				} else {
					out[i].sent[name]++
				}
				mu.Unlock()
			}
		}()
	}
	err := fn()
	// The last commands' lines may still be on their way.
	time.Sleep(200 * time.Millisecond)
	for _, c := range conns {
		c.Close()
	}
	wg.Wait()
	conns = nil
	mu.Lock()
	defer mu.Unlock()
	return out, err
}

// parseMonitorLine reads a MONITOR line, +<time> [<db> <client address>|lua] "<command>" "<arg>"...: the command's
// name in lower case, and whether a script ran it.
func parseMonitorLine(line string) (name string, lua, ok bool) {
	open := strings.IndexByte(line, '[')
	end := strings.Index(line, "] \"")
	if !strings.HasPrefix(line, "+") || open < 0 || end < open {
		return "", false, false
	}
	lua = strings.HasSuffix(line[open:end], " lua")
	rest := line[end+3:]
	q := strings.IndexByte(rest, '"')
	if q <= 0 {
		return "", false, false
	}
	return strings.ToLower(rest[:q]), lua, true
}
