package graph

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestCheckText(t *testing.T) {
	for in, bad := range map[string]bool{
		`{"p":"\ud800"}`: true, `{"p":"\udc00"}`: true, `{"p":"\ud800x"}`: true, `{"p":"\ud800\u0041"}`: true,
		`{"p":"\uD83C\uDFAE"}`: false, `{"p":"\\ud800"}`: false, `{"p":"\\\ud800"}`: true, `{"p":"ok \u00e9"}`: false,
		"{\"p\":\"\xff\"}": true, "{\"p\":\"lit\xc3\"}": true, `{"p":"🎮 \ufffd"}`: false, `\ud8`: false,
		`\ud800\u`: true, `{ rank(playerId: "\ud800") }`: true, `"\\\\ud800"`: false,
	} {
		if got := CheckText([]byte(in)) != ""; got != bad {
			t.Errorf("CheckText(%q) bad = %v, want %v", in, got, bad)
		}
	}
}

// FuzzCheckText: text it accepts decodes (as the content of a JSON string) without turning anything into U+FFFD
// that was not written as U+FFFD.
func FuzzCheckText(f *testing.F) {
	for _, s := range []string{`\ud800`, `a\uD83C\uDFAEb`, "\xff", `\\ud800`, `\u00e9`, "\ufffd"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if CheckText([]byte(s)) != "" {
			return
		}
		var out string
		if json.Unmarshal([]byte(`"`+s+`"`), &out) != nil {
			return // not a JSON string's content; nothing to compare
		}
		want := strings.Count(s, "\ufffd") + strings.Count(strings.ToLower(s), `\ufffd`)
		if got := strings.Count(out, "\ufffd"); got > want {
			t.Fatalf("CheckText accepted %q, which decodes to %q", s, out)
		}
	})
}
