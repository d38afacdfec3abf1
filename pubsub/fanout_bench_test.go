package pubsub

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// BenchmarkFanOut measures one refresh of a view with 10,000 subscribers to its top 10 (one diff, computed once,
// offered to every subscriber; consumers read concurrently). No Redis involved: the list is handed in.
func BenchmarkFanOut(b *testing.B) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never used
	defer rdb.Close()
	h := New(leaderboard.New(rdb, leaderboard.Config{}), Config{})
	brd := &board{h: h, def: &leaderboard.Board{ID: "b"}, views: map[viewKey]*view{}, watches: map[watchKey]*watch{}}
	vw := &view{key: viewKey{"b", leaderboard.AllTime, "all"}, board: brd, feeds: map[int]*feed{}}
	brd.views[vw.key] = vw
	list := func(shift int) *leaderboard.Page {
		p := &leaderboard.Page{Size: 1000}
		for i := range MaxFirst {
			p.Entries = append(p.Entries, leaderboard.Entry{PlayerID: fmt.Sprint("p", (i+shift)%150),
				Rank: int64(i + 1), Score: float64(1000 - i)})
		}
		return p
	}
	brd.apply(vw, list(0), MaxFirst, time.Now(), true)
	const subs = 10_000
	var wg sync.WaitGroup
	now := time.Now()
	brd.mu.Lock()
	for range subs {
		s := &topSub{ch: make(chan *TopUpdate, 1), first: 10, base: -1}
		brd.attachTop(vw, s, now)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range s.ch {
			}
		}()
	}
	brd.mu.Unlock()
	b.ResetTimer()
	for i := range b.N {
		brd.mu.Lock()
		brd.apply(vw, list(i+1), MaxFirst, time.Now(), true)
		brd.mu.Unlock()
	}
	b.StopTimer()
	brd.shutdown()
	wg.Wait()
}
