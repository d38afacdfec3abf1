package childproc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLogHelpers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "server.log")
	if FileSize(path) != 0 || !strings.Contains(LogFrom(path, 0), "cannot read log") {
		t.Fatal("a missing log: size 0 and a note saying so")
	}
	body := strings.Repeat("x", LogTailBytes) + "last line\n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if FileSize(path) != int64(len(body)) || LogFrom(path, int64(LogTailBytes)) != "last line\n" {
		t.Fatalf("size %d, from %d: %q", FileSize(path), LogTailBytes, LogFrom(path, int64(LogTailBytes)))
	}
	if tail := LogTail(path); !strings.HasPrefix(tail, "...\n") || len(tail) != LogTailBytes+4 ||
		!strings.HasSuffix(tail, "last line\n") {
		t.Fatalf("tail of %d bytes: %q…", len(tail), tail[:20])
	}
	if got := QuoteArgs([]string{"redis-server", "--save", "", "a b", `q"`}); got != `redis-server --save "" "a b" "q\""` {
		t.Fatalf("QuoteArgs: %s", got)
	}
}
