package server

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"
	"time"
)

// README ("Period-close events and webhooks"): X-Leaderboard-Signature is t=<unix s>,v1=<hex HMAC-SHA256 of
// "<t>.<body>">, t being when the attempt was sent (the server's clock, also in X-Leaderboard-Timestamp). A receiver
// that verifies it as the README says (verifyWebhook, written without the server's code) accepts the request
// when it arrives and rejects it replayed after its tolerance (5 minutes), replayed with a fresh t (the timestamp
// is signed), or with another body; the signature is not the HMAC of the body alone.
func TestWebhookSignatureCoversTheTimestamp(t *testing.T) {
	t.Parallel()
	const tolerance = 5 * time.Minute
	clock := &closeClock{t: time.Date(2031, 5, 20, 10, 0, 0, 0, time.UTC)}
	rx := newHookReceiver(t, 0, nil)
	s := startServer(t, closeTestConfig(t, clock, rx.srv.URL))
	s.create(t, map[string]any{"id": "signed", "windows": []string{"DAILY"}, "graceSeconds": 60})
	s.submit(t, map[string]any{"board": "signed", "playerId": "ann", "score": 1})
	sentAt := time.Date(2031, 5, 21, 0, 1, 1, 234e6, time.UTC) // the day has closed: its webhook goes out now
	clock.Set(sentAt)
	var h hookRequest
	select {
	case h = <-rx.arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("no webhook within 10s")
	}
	if !strings.HasPrefix(h.signature, "t=") || !strings.Contains(h.signature, ",v1=") {
		t.Fatalf("X-Leaderboard-Signature %q, want t=...,v1=...", h.signature)
	}
	at, err := verifyWebhook(h.signature, h.body, testWebhookSecret, sentAt, tolerance)
	if err != nil || at != sentAt.Unix() || h.timestamp != strconv.FormatInt(sentAt.Unix(), 10) {
		t.Fatalf("on arrival: t %d (X-Leaderboard-Timestamp %q) %v, want t %d verified", at, h.timestamp, err,
			sentAt.Unix())
	}
	if _, err := verifyWebhook(h.signature, h.body, testWebhookSecret, sentAt.Add(tolerance+time.Second), tolerance); err == nil {
		t.Error("a replay after the tolerance verified")
	}
	v1 := h.signature[strings.Index(h.signature, ",v1=")+len(",v1="):]
	fresh := "t=" + strconv.FormatInt(sentAt.Add(time.Hour).Unix(), 10) + ",v1=" + v1
	if _, err := verifyWebhook(fresh, h.body, testWebhookSecret, sentAt.Add(time.Hour), tolerance); err == nil {
		t.Error("a replay with a fresh timestamp and the old v1 verified: the timestamp is not signed")
	}
	if _, err := verifyWebhook(h.signature, append([]byte(" "), h.body...), testWebhookSecret, sentAt, tolerance); err == nil {
		t.Error("another body verified")
	}
	bodyOnly := hmac.New(sha256.New, []byte(testWebhookSecret))
	bodyOnly.Write(h.body)
	if v1 == hex.EncodeToString(bodyOnly.Sum(nil)) {
		t.Error("v1 is the HMAC of the body alone")
	}
}
