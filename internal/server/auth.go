package server

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"

	"github.com/leaderboard/leaderboard/graph"
)

// Keyring holds the configured API keys. Keys are kept as SHA-256 digests and compared in constant time, all of
// them on every lookup, so neither a key's content nor its position leaks through timing.
type Keyring struct {
	keys []apiKey
	// ReadKeyRequired is true when a read key is configured: then queries and subscriptions need a key too.
	ReadKeyRequired bool
}

type apiKey struct {
	digest [sha256.Size]byte
	role   graph.Role
	name   string
}

var roleNames = map[string]graph.Role{"read": graph.RoleRead, "submit": graph.RoleSubmit, "admin": graph.RoleAdmin}

// ParseAPIKeys parses API_KEYS: comma-separated role:key pairs, roles read, submit and admin.
func ParseAPIKeys(s string) (*Keyring, error) {
	k := &Keyring{}
	counts := map[string]int{}
	for _, pair := range splitList(s) {
		role, key, ok := strings.Cut(pair, ":")
		role = strings.ToLower(strings.TrimSpace(role))
		key = strings.TrimSpace(key)
		r, known := roleNames[role]
		if !ok || !known || key == "" {
			return nil, fmt.Errorf("API_KEYS: want role:key pairs with roles read, submit or admin, got an entry with role %q", role)
		}
		counts[role]++
		k.keys = append(k.keys, apiKey{digest: sha256.Sum256([]byte(key)), role: r,
			name: fmt.Sprintf("%s#%d", role, counts[role])})
		if r == graph.RoleRead {
			k.ReadKeyRequired = true
		}
	}
	return k, nil
}

// Empty reports whether no key is configured.
func (k *Keyring) Empty() bool { return len(k.keys) == 0 }

// GenerateAdminKey adds a random admin key and returns it (for a server started without keys).
func (k *Keyring) GenerateAdminKey() string {
	key := "lb_" + rand.Text()
	k.keys = append(k.keys, apiKey{digest: sha256.Sum256([]byte(key)), role: graph.RoleAdmin, name: "admin#generated"})
	return key
}

// Lookup returns the principal of an Authorization value ("Bearer <key>"; empty: anonymous).
func (k *Keyring) Lookup(authorization string) graph.Principal {
	authorization = strings.TrimSpace(authorization)
	if authorization == "" {
		return graph.Principal{}
	}
	p := graph.Principal{Presented: true}
	scheme, token, ok := strings.Cut(authorization, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return p
	}
	digest := sha256.Sum256([]byte(strings.TrimSpace(token)))
	for _, key := range k.keys {
		if subtle.ConstantTimeCompare(digest[:], key.digest[:]) == 1 {
			p.Roles |= key.role
			p.Name = key.name
		}
	}
	return p
}

// middleware puts the principal of the Authorization header into the request context.
func (k *Keyring) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := k.Lookup(r.Header.Get("Authorization"))
		if p == (graph.Principal{}) && graph.PrincipalFrom(r.Context()) == p {
			next.ServeHTTP(w, r) // anonymous, as the context already says: no copy of the request
			return
		}
		next.ServeHTTP(w, r.WithContext(graph.WithPrincipal(r.Context(), p)))
	})
}

// initPayloadAuthorization returns the authorization value of a websocket connection_init payload
// ({"authorization": "Bearer <key>"}; the key "Authorization" is accepted too).
func initPayloadAuthorization(payload map[string]any) (string, bool) {
	for _, name := range []string{"authorization", "Authorization"} {
		if v, ok := payload[name]; ok {
			s, _ := v.(string)
			return s, true
		}
	}
	return "", false
}
