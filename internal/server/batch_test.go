package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// rawPost POSTs body to /graphql and returns the status and the body as it came.
func (s *testServer) rawPost(t *testing.T, key, body string) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(s.request(key, []byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A JSON array of requests gets the array of the responses each would get alone, in order (Apollo's
// BatchHttpLink); batches outside 1..MAX_BATCH, or with MAX_BATCH=0, are a coded 400 with nothing run.
func TestBatchedRequests(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t))
	s.create(t, map[string]any{"id": "batch"})
	s.submit(t, map[string]any{"board": "batch", "playerId": "a", "score": 5})
	s.submit(t, map[string]any{"board": "batch", "playerId": "b", "score": 7})
	ops := []string{
		`{"query":"{ top(board: \"batch\") { playerId rank score } }"}`,
		`{"query":"query R($p: ID!) { rank(board: \"batch\", playerId: $p) { rank score } }","variables":{"p":"a"}}`,
		`{"query":"{ nosuchfield }"}`,                                              // a validation error
		`{"query":"{ top(board: \"batch\", first: -1) { rank } }"}`,                // a resolver error
		`{"query":"mutation { createLeaderboard(input: {id: \"nope\"}) { id } }"}`, // needs the admin role
		`"not a request"`,
	}
	var alone []string
	for _, op := range ops {
		_, body := s.rawPost(t, testSubmitKey, op)
		alone = append(alone, strings.TrimSpace(body))
	}
	status, body := s.rawPost(t, testSubmitKey, "[\n"+strings.Join(ops, ",")+"]")
	if status != http.StatusOK {
		t.Fatalf("batch: status %d %s", status, body)
	}
	var got []json.RawMessage
	if err := json.Unmarshal([]byte(body), &got); err != nil || len(got) != len(ops) {
		t.Fatalf("batch answer %s (%v): want an array of %d", body, err, len(ops))
	}
	for i := range ops {
		if string(got[i]) != alone[i] {
			t.Errorf("operation %d in a batch: %s\nalone: %s", i, got[i], alone[i])
		}
	}
	if !strings.Contains(alone[0], `"playerId":"b"`) || !strings.Contains(alone[2], "GRAPHQL_VALIDATION_FAILED") ||
		!strings.Contains(alone[4], "FORBIDDEN") {
		t.Errorf("unexpected single answers: %v", alone)
	}

	// A mutation in a batch runs once; a batch over the bound runs nothing.
	submit := func(player string) string {
		return fmt.Sprintf(`{"query":"mutation { submitScore(input: {board: \"batch\", playerId: \"%s\", score: 9}) { updated } }"}`, player)
	}
	status, body = s.rawPost(t, testSubmitKey, "["+submit("c")+"]")
	if status != http.StatusOK || body != `[{"data":{"submitScore":{"updated":true}}}]` {
		t.Fatalf("one-mutation batch: %d %s", status, body)
	}
	many := make([]string, 11)
	for i := range many {
		many[i] = submit(fmt.Sprintf("over-%d", i))
	}
	for _, b := range []string{"[" + strings.Join(many, ",") + "]", "[]", "[1,"} {
		status, body = s.rawPost(t, testSubmitKey, b)
		if status != http.StatusBadRequest || !strings.Contains(body, `"code":"BAD_USER_INPUT"`) {
			t.Errorf("batch %.40s: %d %s", b, status, body)
		}
	}
	v := leaderboard.View{Board: "batch"}
	p, err := s.Store.Top(ctxT(t, 5e9), v, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Entries) != 3 {
		t.Errorf("board after the batches: %+v, want a, b and c only", p.Entries)
	}

	cfg := testConfig(t)
	cfg.MaxBatch = 0
	off := startServer(t, cfg)
	status, body = off.rawPost(t, testSubmitKey, "["+ops[0]+"]")
	if status != http.StatusBadRequest || !strings.Contains(body, "not accepted") || !strings.Contains(body, "BAD_USER_INPUT") {
		t.Errorf("MAX_BATCH=0: %d %s", status, body)
	}
}
