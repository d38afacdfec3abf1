package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// row is one entry of a subscriber's list.
type row struct {
	id    string
	rank  int64
	score float64
}

// update is a decoded topUpdates message without its version (shared by every subscriber that got the same
// content).
type update struct {
	snapshot bool
	entries  []row
	removed  []string
	maxSeq   int64 // the newest submission among the entries (0: none)
	err      string
}

// fanout is the subscriber side of the fan-out scenario.
type fanout struct {
	board   string
	subs    []*subscriber
	resp    []atomic.Int64 // submission k -> unix ns of its HTTP response: slot slot of times
	times   *respTimes
	slot    int
	window  atomic.Pointer[[2]int64]
	decoded *decodeCache
	lat     histogram // per (subscriber, sampled submission)
	newest  histogram // per message: the newest submission it carries
	msgs    atomic.Int64
	gaps    atomic.Int64 // version gaps
	errs    atomic.Int64 // error/complete messages, dropped connections, undecodable messages
	sources []net.IP     // local addresses to connect from, in turn (none: the system's choice)
}

type subscriber struct {
	ws      *websocket.Conn
	mu      sync.Mutex
	list    []row
	version int64
	seen    int64 // newest submission seen
}

// newFanout is the subscriber side of board, its submissions' response times in slot slot of times.
func newFanout(board string, times *respTimes, slot int) *fanout {
	return &fanout{board: board, resp: times.board(slot), times: times, slot: slot, decoded: newDecodeCache()}
}

// connect opens n subscribers, subscriber i on urls[i % len(urls)].
func (f *fanout) connect(ctx context.Context, urls []string, n int) error {
	f.subs = make([]*subscriber, n)
	d := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}, HandshakeTimeout: 30 * time.Second,
		ReadBufferSize: 2048, WriteBufferSize: 512}
	if len(f.sources) > 0 {
		// Connections from several loopback source addresses: one address has ~28,000 ephemeral ports.
		var next atomic.Uint32
		d.NetDialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			src := f.sources[int(next.Add(1))%len(f.sources)]
			return (&net.Dialer{LocalAddr: &net.TCPAddr{IP: src}}).DialContext(ctx, network, addr)
		}
	}
	sub := mustJSON(map[string]any{"type": "subscribe", "id": "1",
		"payload": map[string]any{"query": topSubscription, "variables": map[string]any{"b": f.board}}})
	var next atomic.Int64
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				s, err := f.dial(ctx, d, urls[i%len(urls)], sub)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("subscriber %d: %w", i, err)
					}
					mu.Unlock()
					return
				}
				f.subs[i] = s
			}
		}()
	}
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	if firstErr != nil {
		return firstErr
	}
	// Every subscriber has its snapshot before the first submission.
	deadline := time.Now().Add(30 * time.Second)
	for _, s := range f.subs {
		for {
			s.mu.Lock()
			v := s.version
			s.mu.Unlock()
			if v >= 1 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("a subscriber got no snapshot within 30s")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return nil
}

// dial opens one connection, completes connection_init/ack, subscribes and starts its reader.
func (f *fanout) dial(ctx context.Context, d websocket.Dialer, url string, sub []byte) (*subscriber, error) {
	ws, _, err := d.DialContext(ctx, url, nil)
	if err != nil {
		return nil, err
	}
	ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"connection_init"}`)); err != nil {
		ws.Close()
		return nil, err
	}
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			ws.Close()
			return nil, fmt.Errorf("waiting for connection_ack: %w", err)
		}
		if bytes.Contains(data, []byte(`"connection_ack"`)) {
			break
		}
		if !bytes.Contains(data, []byte(`"ping"`)) && !bytes.Contains(data, []byte(`"pong"`)) {
			ws.Close()
			return nil, fmt.Errorf("unexpected before connection_ack: %s", truncate(string(data), 200))
		}
	}
	ws.SetReadDeadline(time.Time{})
	if err := ws.WriteMessage(websocket.TextMessage, sub); err != nil {
		ws.Close()
		return nil, err
	}
	s := &subscriber{ws: ws}
	go f.read(s)
	return s, nil
}

// read handles one subscriber's messages until its connection closes.
func (f *fanout) read(s *subscriber) {
	var buf bytes.Buffer // one message at a time, reused: the load generator shares the CPU with the server
	for {
		_, r, err := s.ws.NextReader()
		if err == nil {
			buf.Reset()
			_, err = buf.ReadFrom(r)
		}
		if err != nil {
			if !closedByUs(err) {
				f.errs.Add(1)
			}
			return
		}
		data := buf.Bytes()
		now := time.Now().UnixNano()
		switch {
		case bytes.Contains(data, typeNext):
		case bytes.Contains(data, typePing):
			_ = s.ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"pong"}`))
			continue
		default: // error, complete, or anything unexpected on a subscription that should run forever
			if !bytes.Contains(data, []byte(`"type":"pong"`)) {
				f.errs.Add(1)
			}
			continue
		}
		f.msgs.Add(1)
		version, u := f.decode(data)
		if u.err != "" {
			f.errs.Add(1)
			continue
		}
		s.mu.Lock()
		if version != s.version+1 {
			f.gaps.Add(1)
		}
		s.version = version
		s.list = apply(s.list, u)
		prev := s.seen
		if u.maxSeq > s.seen {
			s.seen = u.maxSeq
		}
		s.mu.Unlock()
		w := f.window.Load()
		if w == nil || u.maxSeq <= prev {
			continue
		}
		if u.maxSeq >= w[0] && u.maxSeq <= w[1] {
			if r := f.resp[u.maxSeq].Load(); r > 0 {
				f.newest.add(time.Duration(max(now-r, 0)))
			} else {
				f.newest.add(0)
			}
		}
		// Every sampled submission in (prev, maxSeq] became visible to this subscriber now.
		from := max(prev+1, w[0])
		from += (sampleEvery - from%sampleEvery) % sampleEvery
		for k := from; k <= min(u.maxSeq, w[1]); k += sampleEvery {
			r := f.resp[k].Load()
			if r == 0 {
				// The update arrived before the mutation's response: the submit script publishes before it
				// replies. Zero is the honest latency from the response.
				f.lat.add(0)
				continue
			}
			f.lat.add(time.Duration(max(now-r, 0)))
		}
	}
}

func closedByUs(err error) bool {
	return websocket.IsCloseError(err, websocket.CloseNormalClosure) || bytes.Contains([]byte(err.Error()),
		[]byte("use of closed network connection"))
}

// decode returns a message's version and its content, decoded once per distinct content: subscribers of one
// board get byte-identical messages except for the version, so the load generator parses each update once, not
// once per subscriber (it shares the two cores with the server it measures).
func (f *fanout) decode(data []byte) (int64, *update) {
	i := bytes.Index(data, versionField)
	if i < 0 {
		return 0, &update{err: "no version"}
	}
	j := i + len(versionField)
	k := j
	for k < len(data) && data[k] >= '0' && data[k] <= '9' {
		k++
	}
	version, err := strconv.ParseInt(string(data[j:k]), 10, 64)
	if err != nil {
		return 0, &update{err: "bad version"}
	}
	key := contentKey(data[:j], data[k:])
	if u := f.decoded.get(key); u != nil {
		return version, u
	}
	var m struct {
		Payload struct {
			Data struct {
				TopUpdates struct {
					Snapshot bool
					Entries  []struct {
						PlayerID string
						Rank     int64
						Score    float64
					}
					Removed []string
				}
			}
			Errors []json.RawMessage
		}
	}
	u := &update{}
	if err := json.Unmarshal(data, &m); err != nil {
		u.err = err.Error()
	} else if len(m.Payload.Errors) > 0 {
		u.err = string(m.Payload.Errors[0])
	}
	tu := m.Payload.Data.TopUpdates
	u.snapshot, u.removed = tu.Snapshot, tu.Removed
	for _, en := range tu.Entries {
		u.entries = append(u.entries, row{id: en.PlayerID, rank: en.Rank, score: en.Score})
		if seq := int64(en.Score) - fanoutBase; seq > u.maxSeq {
			u.maxSeq = seq
		}
	}
	f.decoded.put(key, u)
	return version, u
}

// apply returns list after update u: a snapshot replaces it; a diff drops the removed ids and upserts the rows.
func apply(list []row, u *update) []row {
	if u.snapshot {
		return slices.Clone(u.entries)
	}
	list = slices.DeleteFunc(list, func(r row) bool {
		return slices.Contains(u.removed, r.id) || slices.ContainsFunc(u.entries, func(n row) bool { return n.id == r.id })
	})
	list = append(list, u.entries...)
	slices.SortFunc(list, func(a, b row) int { return int(a.rank - b.rank) })
	return list
}

// waitConverged waits until every subscriber's list equals want, at most d; it returns how many did and how
// long it took all of them (or d).
func (f *fanout) waitConverged(ctx context.Context, want []row, d time.Duration) (int, time.Duration) {
	start := time.Now()
	for {
		n := 0
		for _, s := range f.subs {
			s.mu.Lock()
			if slices.Equal(s.list, want) {
				n++
			}
			s.mu.Unlock()
		}
		if n == len(f.subs) || time.Since(start) >= d || ctx.Err() != nil {
			return n, time.Since(start)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (f *fanout) close() {
	var wg sync.WaitGroup
	for _, s := range f.subs {
		if s == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = s.ws.WriteControl(websocket.CloseMessage,
				websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
			s.ws.Close()
		}()
	}
	wg.Wait()
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

var contentSeed = maphash.MakeSeed()

// contentKey is a 64-bit hash of a message without its version (two pieces): at the few thousand distinct
// contents of a run, a collision is a one in 10^12 event.
func contentKey(a, b []byte) uint64 {
	var h maphash.Hash
	h.SetSeed(contentSeed)
	h.Write(a)
	h.Write(b)
	return h.Sum64()
}

// decodeCache keeps decoded updates by content; it holds two generations and drops the older one when the newer
// fills up, so memory stays bounded however long the run.
type decodeCache struct {
	mu       sync.RWMutex
	cur, old map[uint64]*update
}

func newDecodeCache() *decodeCache {
	return &decodeCache{cur: map[uint64]*update{}, old: map[uint64]*update{}}
}

func (c *decodeCache) get(key uint64) *update {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if u := c.cur[key]; u != nil {
		return u
	}
	return c.old[key]
}

func (c *decodeCache) put(key uint64, u *update) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.cur) >= decodeCacheSize {
		c.old, c.cur = c.cur, map[uint64]*update{}
	}
	c.cur[key] = u
}
