package pubsub

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/internal/livelist"
	"github.com/leaderboard/leaderboard/leaderboard"
)

// puller is a subscriber that pulls (Hub.SubscribeTopNotify with notify): it keeps the list rebuilt from what
// it pulled, checking versions, as a streamed websocket connection does.
type puller struct {
	t        *testing.T
	ch       <-chan *TopUpdate
	pull     func()
	notified chan struct{}
	c        *topClient   // the rebuilt list (waitTop reads it)
	got      atomic.Int64 // updates after the first
	at       []time.Time  // when each update pulled on a notification was taken (under c.mu)
	onNotify bool         // pullOnNotify runs (under c.mu)
}

func subscribePuller(t *testing.T, h *Hub, v leaderboard.View, first int) *puller {
	p := &puller{t: t, notified: make(chan struct{}, 1), c: &topClient{first: first}}
	var err error
	p.ch, p.pull, err = h.SubscribeTopNotify(t.Context(), v, first, func() {
		select {
		case p.notified <- struct{}{}:
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case u := <-p.ch: // the first update is read from the channel, as gqlgen's executor reads it
		p.take(u)
	case <-time.After(5 * time.Second):
		t.Fatal("no first update")
	}
	return p
}

func (p *puller) take(u *TopUpdate) {
	c := p.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if u.Version != c.ver+1 && c.err == nil {
		c.err = fmt.Errorf("version %d after %d", u.Version, c.ver)
	}
	if c.ver == 0 && !u.Snapshot && c.err == nil {
		c.err = fmt.Errorf("first update is not a snapshot")
	}
	if c.ver > 0 {
		p.got.Add(1)
	}
	if p.onNotify {
		p.at = append(p.at, time.Now())
	}
	c.ver, c.size = u.Version, u.Size
	c.list = livelist.Apply(c.list, u.Snapshot, u.Entries, u.Removed, c.first)
}

// pullNow pulls and takes what the pull put in the channel (the channel is read without waiting, as the
// connection's writer reads it); it reports whether there was an update.
func (p *puller) pullNow() bool {
	p.pull()
	select {
	case u, ok := <-p.ch:
		if !ok {
			p.t.Error("the channel was closed")
			return false
		}
		p.take(u)
		return true
	default:
		return false
	}
}

// pullOnNotify pulls lags[i] after the i-th notification (cycling; a connection waiting for its writer), until
// stop is closed.
func (p *puller) pullOnNotify(stop <-chan struct{}, lags ...time.Duration) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.c.mu.Lock()
		p.onNotify = true
		p.c.mu.Unlock()
		for i := 0; ; i++ {
			lag := lags[i%len(lags)]
			select {
			case <-stop:
				return
			case <-p.notified:
				select {
				case <-stop:
					return
				case <-time.After(lag):
				}
				p.pullNow()
			}
		}
	}()
	return done
}

// topScore is the best score in the rebuilt list.
func (p *puller) topScore() float64 {
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	if len(p.c.list) == 0 {
		return 0
	}
	return p.c.list[0].Score
}

// scoreLog records each submission's score with the time its response came back.
type scoreLog struct {
	mu    sync.Mutex
	at    []time.Time
	score []float64
}

// before returns the score of the last submission answered before t (0: none).
func (l *scoreLog) before(t time.Time) (float64, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.at) - 1; i >= 0; i-- {
		if l.at[i].Before(t) {
			return l.score[i], l.at[i]
		}
	}
	return 0, time.Time{}
}

// climb submits a new player every gap with score 1000+k (each takes rank 1) until stop is closed.
func climb(t *testing.T, st *leaderboard.Store, board string, gap time.Duration, stop <-chan struct{}) (*scoreLog,
	<-chan struct{}) {
	l := &scoreLog{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for k := 1; ; k++ {
			select {
			case <-stop:
				return
			case <-time.After(gap):
			}
			score := float64(1000 + k)
			submit(t, st, board, fmt.Sprintf("c%d", k), score)
			l.mu.Lock()
			l.at, l.score = append(l.at, time.Now()), append(l.score, score)
			l.mu.Unlock()
		}
	}()
	return l, done
}

// TestPullGetsTheNewestRead: a subscriber that pulls long after it was notified gets the list as the board's
// last read found it. While it has not pulled, the list is read readsPerWake times per interval (a subscriber
// that reads its channel gets the list as of the board's last wake, up to an interval older).
func TestPullGetsTheNewestRead(t *testing.T) {
	st := hookedStore(t)
	h := startHub(t, st, Config{MaxUpdateRate: 10})
	createBoard(t, st, leaderboard.Board{ID: "pull"})
	for i := range 10 {
		submit(t, st, "pull", fmt.Sprintf("p%d", i), float64(i))
	}
	v := leaderboard.View{Board: "pull"}
	p := subscribePuller(t, h, v, 10)
	p.pullNow() // from now on it pulls

	stop := make(chan struct{})
	log, climbed := climb(t, st, "pull", 5*time.Millisecond, stop)
	defer func() {
		if stop != nil {
			close(stop)
			<-climbed
		}
	}()
	select {
	case <-p.notified:
	case <-time.After(5 * time.Second):
		t.Fatal("no notification")
	}
	notifiedAt, rows := time.Now(), h.Stats().ListRows
	time.Sleep(500 * time.Millisecond) // the subscriber's connection waits for a writer
	pulledAt := time.Now()
	// Every read is of 10 rows; one per interval would be at most 6 reads in 500 ms.
	if reads := (h.Stats().ListRows - rows) / 10; reads < 9 {
		t.Errorf("%d reads of the list in %v while a notified subscriber had not pulled: want more than one per "+
			"interval", reads, pulledAt.Sub(notifiedAt))
	}
	if !p.pullNow() {
		t.Fatal("notified, but the pull put nothing in the channel")
	}
	// The newest read is at most interval/readsPerWake (25 ms) plus a read old; 250 ms leaves room for a loaded
	// machine and still fails an update bound at the notification.
	want, answeredAt := log.before(pulledAt.Add(-250 * time.Millisecond))
	if !answeredAt.After(notifiedAt) {
		t.Fatalf("the submissions did not go on after the notification (last answered %v before it)",
			notifiedAt.Sub(answeredAt))
	}
	if got := p.topScore(); got < want {
		t.Fatalf("pulled %v after the notification: top score %v, want at least %v (answered %v before the pull)",
			pulledAt.Sub(notifiedAt), got, want, pulledAt.Sub(answeredAt))
	}
	if p.pullNow() {
		t.Fatal("a second pull without a notification in between put another update in the channel")
	}
	close(stop)
	<-climbed
	stop = nil

	// Pulling on every notification, it converges to the store's list, every field and the size.
	pstop := make(chan struct{})
	pulling := p.pullOnNotify(pstop, 0)
	defer func() { close(pstop); <-pulling }()
	waitTop(t, p.c, st, v, 5*time.Second)
}

// TestUpdatesAtMostMaxUpdateRate: under a write every 2 ms, a subscriber gets at most MaxUpdateRate updates per
// second, whether it reads its channel or pulls (at once, or late: 150 ms after each notification, while the
// lists are read more often than that); all end with the store's list. The list
// is read at most MaxUpdateRate times per second while no pulling subscriber waits, readsPerWake times that
// while one does.
func TestUpdatesAtMostMaxUpdateRate(t *testing.T) {
	st := hookedStore(t)
	const rate = 10
	h := startHub(t, st, Config{MaxUpdateRate: rate})
	createBoard(t, st, leaderboard.Board{ID: "rate"})
	for i := range 10 { // every read is of 10 rows: reads = ListRows / 10
		submit(t, st, "rate", fmt.Sprintf("p%d", i), float64(i))
	}
	v := leaderboard.View{Board: "rate"}
	pushed := follow(must(h.SubscribeTop(t.Context(), v, 10)))
	waitTop(t, pushed, st, v, 5*time.Second)

	// Reading subscribers only: MaxUpdateRate reads a second.
	climbFor := func(d time.Duration) time.Duration {
		stop := make(chan struct{})
		start := time.Now()
		_, climbed := climb(t, st, "rate", 2*time.Millisecond, stop)
		time.Sleep(d)
		close(stop)
		<-climbed
		return time.Since(start)
	}
	rows := h.Stats().ListRows
	elapsed := climbFor(time.Second)
	if reads := int((h.Stats().ListRows - rows) / 10); reads > int(elapsed.Seconds()*rate)+2 {
		t.Errorf("%d reads of the list in %v with no pulling subscriber: more than %d per second", reads, elapsed,
			rate)
	}

	p := subscribePuller(t, h, v, 10)
	p.pullNow()
	quick := subscribePuller(t, h, v, 10) // pulls at once: only the hub keeps its pace
	quick.pullNow()
	// Late, then at once: notified early (it was late the last time), it pulls too soon for the pace.
	uneven := subscribePuller(t, h, v, 10)
	uneven.pullNow()
	pstop := make(chan struct{})
	pulling := p.pullOnNotify(pstop, 150*time.Millisecond)
	quickPulling := quick.pullOnNotify(pstop, 0)
	unevenPulling := uneven.pullOnNotify(pstop, 300*time.Millisecond, 0)
	defer func() { close(pstop); <-pulling; <-quickPulling; <-unevenPulling }()
	waitTop(t, pushed, st, v, 5*time.Second)
	_, pushedFrom, _, _ := pushed.state()
	pulledFrom, quickFrom := p.got.Load(), quick.got.Load()
	rows = h.Stats().ListRows
	elapsed = climbFor(2 * time.Second)
	if reads := int((h.Stats().ListRows - rows) / 10); reads > int(elapsed.Seconds()*rate*readsPerWake)+3 {
		t.Errorf("%d reads of the list in %v: more than %d per second", reads, elapsed, rate*readsPerWake)
	}
	_, pushedTo, _, err := pushed.state()
	if err != nil {
		t.Fatal(err)
	}
	pulledTo, quickTo := p.got.Load(), quick.got.Load()
	limit := int(elapsed.Seconds()*rate) + 2
	for _, c := range []struct {
		who string
		n   int
	}{{"reading", int(pushedTo - pushedFrom)}, {"pulling", int(pulledTo - pulledFrom)},
		{"quickly pulling", int(quickTo - quickFrom)}} {
		if c.n > limit {
			t.Errorf("the %s subscriber got %d updates in %v: more than %d per second", c.who, c.n, elapsed, rate)
		}
		if c.n < 5 {
			t.Errorf("the %s subscriber got only %d updates in %v of writes", c.who, c.n, elapsed)
		}
	}
	waitTop(t, pushed, st, v, 5*time.Second)
	waitTop(t, p.c, st, v, 5*time.Second)
	waitTop(t, quick.c, st, v, 5*time.Second)
	waitTop(t, uneven.c, st, v, 5*time.Second)
	// A pulling subscriber's updates are one interval apart at least (10 ms for the test's own scheduling).
	for _, q := range []*puller{p, quick, uneven} {
		q.c.mu.Lock()
		for i := 1; i < len(q.at); i++ {
			if d := q.at[i].Sub(q.at[i-1]); d < time.Second/rate-10*time.Millisecond {
				t.Errorf("a pulling subscriber's updates %d and %d came %v apart", i, i+1, d)
				break
			}
		}
		q.c.mu.Unlock()
	}
}
