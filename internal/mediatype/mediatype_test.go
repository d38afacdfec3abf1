package mediatype

import (
	"mime"
	"testing"
)

// IsJSON answers as mime.ParseMediaType does (the oracle, and what gqlgen's POST transport uses).
func TestIsJSONMatchesParseMediaType(t *testing.T) {
	for _, ct := range []string{"application/json", "Application/JSON", "application/json; charset=utf-8",
		"application/json;charset=UTF-8", " application/json", "application/json ", "application/jsonx",
		"application/graphql-response+json", "text/plain", "", "application/json; =bad", "application/",
		"multipart/form-data; boundary=x"} {
		mt, _, err := mime.ParseMediaType(ct)
		if want := err == nil && mt == "application/json"; IsJSON(ct) != want {
			t.Errorf("IsJSON(%q) = %v, want %v", ct, !want, want)
		}
	}
}

func FuzzIsJSON(f *testing.F) {
	f.Add("application/json")
	f.Add("application/json; charset=utf-8")
	f.Add("APPLICATION/JSON")
	f.Fuzz(func(t *testing.T, ct string) {
		mt, _, err := mime.ParseMediaType(ct)
		if want := err == nil && mt == "application/json"; IsJSON(ct) != want {
			t.Errorf("IsJSON(%q) = %v, want %v", ct, !want, want)
		}
	})
}

func BenchmarkIsJSON(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		IsJSON("application/json")
	}
}
