package server

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// listBoards is the ids leaderboards answers on s, in its order.
func listBoards(t *testing.T, s *testServer) ([]string, error) {
	r := s.do(t, "", `{ leaderboards { id } }`, nil)
	if len(r.Errors) > 0 {
		return nil, fmt.Errorf("leaderboards: %v", r.Errors)
	}
	var out struct{ Leaderboards []struct{ ID string } }
	if err := json.Unmarshal(r.Data, &out); err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(out.Leaderboards))
	for _, b := range out.Leaderboards {
		ids = append(ids, b.ID)
	}
	return ids, nil
}

// The board list (leaderboards) under createLeaderboard and deleteLeaderboard through two servers at once, with
// lists read all along: a server lists a board it has just created and not one it has just deleted (boards only
// it writes), and a server whose periodClosed subscription of a board ended with NOT_FOUND (the other server
// deleted it) no longer lists it; once quiet, after the list's TTL (1 s), both list exactly the boards Redis holds.
func TestBoardListTwoServersChurn(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	servers := []*testServer{startServer(t, cfg), startServer(t, cfg)}
	const shared = 6
	var wg sync.WaitGroup
	stop := make(chan struct{})
	// Readers: every server's list is read all along (so that reads of the lists run during the writes).
	for _, s := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := listBoards(t, s); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	var writers sync.WaitGroup
	for si, s := range servers {
		// Boards that both servers create and delete.
		writers.Add(1)
		go func() {
			defer writers.Done()
			for i := range 40 {
				id := fmt.Sprintf("bl-shared%d", (i*7+si)%shared)
				if i%2 == 0 {
					s.do(t, testAdminKey, createMutation, map[string]any{"in": map[string]any{"id": id}})
				} else {
					s.do(t, testAdminKey, deleteMutation, map[string]any{"id": id})
				}
			}
		}()
		// Boards of this server only: listed at once after their creation, not after their deletion.
		writers.Add(1)
		go func() {
			defer writers.Done()
			for i := range 15 {
				id := fmt.Sprintf("bl-own%d-%d", si, i%3)
				if r := s.do(t, testAdminKey, createMutation, map[string]any{"in": map[string]any{"id": id}}); len(r.Errors) > 0 {
					t.Errorf("create %s: %v", id, r.Errors)
					return
				}
				ids, err := listBoards(t, s)
				if err != nil {
					t.Error(err)
					return
				}
				if !slices.Contains(ids, id) {
					t.Errorf("server %d does not list %s right after creating it: %v", si, id, ids)
				}
				if r := s.do(t, testAdminKey, deleteMutation, map[string]any{"id": id}); len(r.Errors) > 0 {
					t.Errorf("delete %s: %v", id, r.Errors)
					return
				}
				if ids, err = listBoards(t, s); err != nil {
					t.Error(err)
					return
				}
				if slices.Contains(ids, id) {
					t.Errorf("server %d lists %s right after deleting it: %v", si, id, ids)
				}
			}
		}()
		// A board the other server deletes while this one's only subscription of it is periodClosed.
		writers.Add(1)
		go func() {
			defer writers.Done()
			other := servers[1-si]
			for i := range 4 {
				id := fmt.Sprintf("bl-watched%d-%d", si, i)
				if r := other.do(t, testAdminKey, createMutation, map[string]any{"in": map[string]any{"id": id}}); len(r.Errors) > 0 {
					t.Errorf("create %s: %v", id, r.Errors)
					return
				}
				waitUntil(t, 5*time.Second, "the board listed", func() bool {
					ids, err := listBoards(t, s)
					return err == nil && slices.Contains(ids, id)
				})
				conn := subscribeCloses(t, s, id)
				waitUntil(t, 5*time.Second, "the hub listening", func() bool {
					ch := s.Store.Channel(id)
					n, err := s.App.rdb.PubSubShardNumSub(context.Background(), ch).Result()
					return err == nil && n[ch] > 0
				})
				other.do(t, testAdminKey, deleteMutation, map[string]any{"id": id})
				wantNotFoundEnd(t, conn, 10*time.Second, id)
				conn.Close()
				ids, err := listBoards(t, s)
				if err != nil {
					t.Error(err)
					return
				}
				if slices.Contains(ids, id) {
					t.Errorf("server %d lists %s after its deletion notice: %v", si, id, ids)
				}
			}
		}()
	}
	writers.Wait()
	close(stop)
	wg.Wait()
	if t.Failed() {
		return
	}
	truth := func() []string {
		st := leaderboard.New(servers[0].App.rdb, leaderboard.Config{Prefix: cfg.KeyPrefix})
		bs, err := st.Boards(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		ids := []string{}
		for _, b := range bs {
			ids = append(ids, b.ID)
		}
		return ids
	}()
	time.Sleep(1100 * time.Millisecond) // the documented TTL of the list (a bound, not a negative check)
	for si, s := range servers {
		ids, err := listBoards(t, s)
		if err != nil {
			t.Fatal(err)
		}
		if ids == nil {
			ids = []string{}
		}
		if !slices.Equal(ids, truth) {
			t.Errorf("server %d lists %v once quiet, Redis holds %v", si, ids, truth)
		}
	}
}
