package access

import (
	"context"
	"sync"
	"testing"

	"github.com/skillreg/skillreg/oidc"
)

// A client or rule naming a group of discovered sources sees the group's
// members as they are at each request.
func TestGroupsExpandAtRequestTime(t *testing.T) {
	t.Parallel()
	clients, tok := testClients(t) // the client sees "ops"
	var mu sync.Mutex
	members := map[string][]string{"ops": {"ops-a"}}
	v := &tokenTable{claims: map[string]oidc.Claims{"p": {Subject: "s", Email: "a@x.example", EmailVerified: true}}}
	g := NewGate(GateOptions{
		Clients: clients, Verifier: v,
		Rules: Rules{{Emails: []string{"a@x.example"}, Sources: []string{"ops", "web"}}},
		Members: func(group string) []string {
			mu.Lock()
			defer mu.Unlock()
			return members[group]
		},
	})
	check := func(token, want string) {
		t.Helper()
		id, err := g.Authenticate(context.Background(), token)
		if err != nil {
			t.Fatal(err)
		}
		if got := sources(id.Filter); got != want {
			t.Errorf("sees %q, want %q", got, want)
		}
	}
	check(tok, "ops,ops-a")
	check("p", "ops,ops-a,web")
	mu.Lock()
	members["ops"] = []string{"ops-b", "ops-c"}
	mu.Unlock()
	check(tok, "ops,ops-b,ops-c")
	check("p", "ops,ops-b,ops-c,web") // cached identity, expanded again
	if id := g.FromClaims(v.claims["p"]); sources(id.Filter) != "ops,ops-b,ops-c,web" {
		t.Errorf("FromClaims sees %q", sources(id.Filter))
	}
}
