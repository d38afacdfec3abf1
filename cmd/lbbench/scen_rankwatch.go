package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// Rank watchers (the live-at-scale issue): rankWatchers players each watch their own rank (rankUpdates) while
// SubmitRate submissions per second give random watched players a new best score that takes rank 1, so every
// watcher's rank moves with every submission (the worst case for the fan-out). Measured: the time from a
// submission's HTTP response until its own player's watcher holds the new score, messages delivered, and the Redis
// commands per second the server makes meanwhile (INFO stats, minus the submissions' own).
const (
	rankWatchers     = 10_000
	rankWatchPerConn = 10 // subscriptions per websocket
	rankWatchP99     = 500 * time.Millisecond
)

func (e *env) rankWatchStep(ctx context.Context) (*table, error) {
	sz := e.sizes()
	n := rankWatchers
	if e.o.Quick {
		n = 200
	}
	board := "rankwatch"
	if _, err := e.store.CreateBoard(ctx, leaderboard.Board{ID: board}); err != nil {
		return nil, err
	}
	seed := make([]leaderboard.Submission, 0, 1000)
	for i := 0; i < n; i++ {
		seed = append(seed, leaderboard.Submission{Board: board, Player: "w" + strconv.Itoa(i), Score: float64(i + 1)})
		if len(seed) == cap(seed) || i == n-1 {
			if _, err := e.store.SubmitMany(ctx, seed); err != nil {
				return nil, err
			}
			seed = seed[:0]
		}
	}
	// want[i]: the newest score submitted for watcher i and its response time (unix ns); seen by the reader.
	type watch struct {
		mu        sync.Mutex
		want      float64 // 0: nothing pending
		respondAt int64   // the submission's response (0: not yet)
		arrivedAt int64   // the update holding want (0: not yet); it may come before the response
	}
	watches := make([]watch, n)
	lat := &histogram{}
	var msgs, errs atomic.Int64
	d := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}, HandshakeTimeout: 30 * time.Second,
		ReadBufferSize: 2048, WriteBufferSize: 512}
	url := "ws://" + e.newSvc().addr + "/graphql"
	var conns []*websocket.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for first := 0; first < n; first += rankWatchPerConn {
		ws, _, err := d.DialContext(ctx, url, nil)
		if err != nil {
			return nil, err
		}
		conns = append(conns, ws)
		if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"connection_init"}`)); err != nil {
			return nil, err
		}
		for i := first; i < min(first+rankWatchPerConn, n); i++ {
			sub := `{"type":"subscribe","id":"` + strconv.Itoa(i) + `","payload":{"query":"subscription { rankUpdates(board: \"` +
				board + `\", playerId: \"w` + strconv.Itoa(i) + `\") { rank score } }"}}`
			if err := ws.WriteMessage(websocket.TextMessage, []byte(sub)); err != nil {
				return nil, err
			}
		}
		go func() {
			for {
				_, data, err := ws.ReadMessage()
				if err != nil {
					return
				}
				if !bytes.Contains(data, []byte(`"type":"next"`)) {
					if bytes.Contains(data, []byte(`"type":"error"`)) || bytes.Contains(data, []byte(`"type":"complete"`)) {
						errs.Add(1)
					}
					continue
				}
				now := time.Now().UnixNano()
				msgs.Add(1)
				var m struct {
					ID      string
					Payload struct {
						Data struct {
							RankUpdates struct{ Score float64 }
						}
					}
				}
				if json.Unmarshal(data, &m) != nil {
					errs.Add(1)
					continue
				}
				i, _ := strconv.Atoi(m.ID)
				if i < 0 || i >= n {
					continue
				}
				w := &watches[i]
				w.mu.Lock()
				if w.want > 0 && w.arrivedAt == 0 && m.Payload.Data.RankUpdates.Score >= w.want {
					w.arrivedAt = now
					if w.respondAt != 0 {
						lat.add(time.Duration(max(now-w.respondAt, 0)))
						w.want = 0
					}
				}
				w.mu.Unlock()
			}
		}()
	}
	time.Sleep(2 * time.Second) // the snapshots (one entry per watcher) go out before the measured phase
	msgs.Store(0)
	cmds0, err := e.redisCommands(ctx)
	if err != nil {
		return nil, err
	}
	rate := sz.SubmitRate
	total := int(e.o.Duration.Seconds() * float64(rate))
	if err := warmClients(ctx, []*rawHTTP{e.newSvc().hot}, fanoutSubmitter); err != nil {
		return nil, err
	}
	e.profileNext(fmt.Sprintf("rankwatch-%d", n))
	wait := e.startProfiles(ctx, time.Duration(float64(total)/float64(rate)*float64(time.Second)))
	u0, g0, r0, t0 := e.serverUsage(), selfUsage(), e.redisUsage(), time.Now()
	var submitted, failed atomic.Int64
	var wg sync.WaitGroup
	due := make(chan int, 256)
	go func() {
		defer close(due)
		for k := 0; k < total; k++ {
			if d := time.Until(t0.Add(time.Duration(float64(k) / float64(rate) * float64(time.Second)))); d > 0 {
				time.Sleep(d)
			}
			due <- k
		}
	}()
	for w := range fanoutSubmitter {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range due {
				i := rand.IntN(n)
				score := float64(1_000_000 + k)
				body := request(submitMutation, append(scoreInput([]byte(`{"in":`), board, "w"+strconv.Itoa(i), score), '}'))
				wt := &watches[i]
				wt.mu.Lock()
				wt.want, wt.respondAt, wt.arrivedAt = score, 0, 0
				wt.mu.Unlock()
				_, err := e.newSvc().hot.post(ctx, w, submitKey, body)
				wt.mu.Lock()
				if err != nil {
					failed.Add(1)
					wt.want = 0
				} else if wt.want == score { // not taken over by a later submission for the same player
					submitted.Add(1)
					wt.respondAt = time.Now().UnixNano()
					if wt.arrivedAt != 0 {
						lat.add(0) // the update came before the response
						wt.want = 0
					}
				} else {
					submitted.Add(1)
				}
				wt.mu.Unlock()
			}
		}()
	}
	wg.Wait()
	el := time.Since(t0).Seconds()
	wait()
	time.Sleep(2 * time.Second) // the last updates arrive
	cmds1, err := e.redisCommands(ctx)
	if err != nil {
		return nil, err
	}
	u1, g1, r1 := e.serverUsage(), selfUsage(), e.redisUsage()
	unseen := 0
	for i := range watches {
		watches[i].mu.Lock()
		if watches[i].want > 0 && watches[i].respondAt != 0 {
			unseen++
		}
		watches[i].mu.Unlock()
	}
	readsPerSec := (float64(cmds1-cmds0) - float64(submitted.Load())) / (el + 2) // minus the submissions' FCALLs
	t := &table{title: fmt.Sprintf("5c. Rank watchers: %d players watching their own rank (rankUpdates), %d submissions/s taking rank 1",
		n, rate),
		head: []string{"watchers", "submits/s", "own update p50", "own update p99", "not seen", "msgs/s",
			"CPU server/redis/loadgen", "Redis commands/s besides the submissions", "errors"}}
	t.add(strconv.Itoa(n), fmtRate(float64(submitted.Load())/el), fmtDur(lat.quantile(0.5)), fmtDur(lat.quantile(0.99)),
		strconv.Itoa(unseen), fmtRate(float64(msgs.Load())/(el+2)), fmtCores((u1.CPU-u0.CPU).Seconds()/(el+2))+" / "+fmtCores((r1.CPU-r0.CPU).Seconds()/(el+2))+" / "+
			fmtCores((g1.CPU-g0.CPU).Seconds()/(el+2)),
		fmtRate(readsPerSec), strconv.FormatInt(failed.Load()+errs.Load(), 10))
	t.notes = append(t.notes, fmt.Sprintf("%d subscriptions per websocket. own update: a submission's HTTP response → "+
		"its player's watcher holds the new score (0 when it came first; a submission overtaken by a later one for "+
		"the same player is not measured). Redis commands from INFO stats over the phase and 2 s after, minus one per submission.", rankWatchPerConn))
	e.check(fmt.Sprintf("rankUpdates, %d watchers, %d submissions/s", n, rate),
		fmt.Sprintf("p99 ≤ %s, every update seen, Redis commands/s reported", fmtDur(rankWatchP99)),
		fmt.Sprintf("p99 %s, %d not seen, %s Redis commands/s", fmtDur(lat.quantile(0.99)), unseen, fmtRate(readsPerSec)),
		lat.count() > 0 && lat.quantile(0.99) <= rankWatchP99 && unseen == 0 && failed.Load()+errs.Load() == 0)
	return t, nil
}

// redisCommands returns Redis's total_commands_processed.
func (e *env) redisCommands(ctx context.Context) (int64, error) {
	info, err := e.rdb.Info(ctx, "stats").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_commands_processed:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("INFO stats has no total_commands_processed")
}
