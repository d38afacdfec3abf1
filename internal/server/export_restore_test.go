package server

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// With the ledger, an export of a board Redis has lost answers UNAVAILABLE until the board is restored, then every
// row: never a complete-looking file with fewer rows, never NOT_FOUND.
func TestExportOfALostBoard(t *testing.T) {
	t.Parallel()
	clock := &closeClock{t: ledgerStart}
	cfg := ledgerConfig(t, clock)
	s := startServer(t, cfg)
	s.create(t, map[string]any{"id": "lost", "windows": []string{"ALL_TIME"}})
	for i := range 20 {
		s.submit(t, map[string]any{"board": "lost", "playerId": fmt.Sprintf("p%02d", i), "score": i})
	}
	deletePrefixKeys(t, s)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		resp := s.exportGet(t, "", "lost", map[string]string{"format": "ndjson"})
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 {
			if n := strings.Count(string(body), "\n"); n != 20 {
				t.Fatalf("export of a lost board: %d rows\n%s", n, body)
			}
			return
		}
		if resp.StatusCode != 503 || !strings.Contains(string(body), `"UNAVAILABLE"`) || time.Now().After(deadline) {
			t.Fatalf("export of a lost board: %d %s", resp.StatusCode, body)
		}
	}
}
