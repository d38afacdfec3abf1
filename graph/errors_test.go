package graph

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/transport"

	"github.com/leaderboard/leaderboard/leaderboard"
)

// TestPanicIsInternal: a panicking resolver (here: no store at all) is recovered and answered as INTERNAL with
// the message "internal error"; the detail goes to the log only.
func TestPanicIsInternal(t *testing.T) {
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, nil))
	srv := handler.New(NewSchema(&Resolver{Log: log}))
	srv.AddTransport(transport.POST{})
	srv.SetErrorPresenter(ErrorPresenter(log))
	srv.SetRecoverFunc(Recover(log))

	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{"query":"{ leaderboards { id } }"}`))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	var resp struct {
		Errors []struct {
			Message    string
			Extensions map[string]any
		}
	}
	body, _ := io.ReadAll(rec.Body)
	if err := json.Unmarshal(body, &resp); err != nil {
		t.Fatal(err)
	}
	if len(resp.Errors) != 1 || resp.Errors[0].Message != "internal error" || resp.Errors[0].Extensions["code"] != "INTERNAL" {
		t.Fatalf("response %s", body)
	}
	if !strings.Contains(logs.String(), "panic in resolver") || !strings.Contains(logs.String(), "nil pointer") {
		t.Fatalf("the panic must be logged: %s", logs.String())
	}
}

func TestRequire(t *testing.T) {
	cases := []struct {
		p    Principal
		role Role
		code string
	}{
		{Principal{}, RoleSubmit, "UNAUTHENTICATED"},
		{Principal{Presented: true}, RoleRead, "UNAUTHENTICATED"},
		{Principal{Presented: true, Roles: RoleRead}, RoleSubmit, "FORBIDDEN"},
		{Principal{Presented: true, Roles: RoleSubmit}, RoleAdmin, "FORBIDDEN"},
		{Principal{Presented: true, Roles: RoleSubmit}, RoleRead, ""},
		{Principal{Presented: true, Roles: RoleAdmin}, RoleSubmit, ""},
	}
	for _, c := range cases {
		err := require(WithPrincipal(context.Background(), c.p), c.role)
		got := ""
		if err != nil {
			got = string(leaderboard.ErrorCode(err))
		}
		if got != c.code {
			t.Errorf("%+v needs %d: want %q, got %q", c.p, c.role, c.code, got)
		}
	}
}
