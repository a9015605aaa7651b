package access_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/skillreg/skillreg/access"
)

// The operator makes a token with `skillreg token`: the token goes to the
// client, only its hash into the configuration.
func ExampleNewToken() {
	token, hash, err := access.NewToken()
	if err != nil {
		panic(err)
	}
	h, err := access.ParseHash(hash)
	if err != nil {
		panic(err)
	}
	clients := access.New([]access.Client{{Name: "ci", Hash: h, Sources: []string{"team"}}})
	c, ok := clients.Check(token)
	fmt.Println(strings.HasPrefix(token, access.TokenPrefix), c.Name, ok)
	_, ok = clients.Check(token + "x")
	fmt.Println(ok)
	// Output:
	// true ci true
	// false
}

// Middleware answers 401 without a valid token and 429 once an address
// has failed too often; the gate is read at every request, so a reload
// takes effect at once. A request without a token is not a failed
// attempt: OAuth discovery starts that way.
func ExampleMiddleware() {
	token, hash, _ := access.NewToken()
	h, _ := access.ParseHash(hash)
	gate := access.NewGate(access.GateOptions{
		Clients: access.New([]access.Client{{Name: "ci", Hash: h, Sources: []string{"*"}}}),
		Limiter: access.NewLimiter(time.Minute, 2),
	})
	remote := func(r *http.Request) string { return r.RemoteAddr }
	mw := access.Middleware(func() *access.Gate { return gate }, remote)
	handler := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, _ := access.IdentityFrom(r.Context())
		fmt.Fprint(w, id.Name)
	}))

	// The limiter allows two failures, then one a minute, even for a
	// right token: the address, not the token, is what is slowed.
	for _, auth := range []string{"Bearer " + token, "", "", "", "Bearer wrong", "Bearer wrong", "Bearer " + token} {
		req := httptest.NewRequest(http.MethodGet, "/mcp", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		fmt.Println(strings.TrimSpace(fmt.Sprint(rec.Code, " ", rec.Header().Get("WWW-Authenticate"), " ", strings.TrimSpace(rec.Body.String()))))
	}
	// Output:
	// 200  ci
	// 401 Bearer realm="skillreg" a bearer token is required
	// 401 Bearer realm="skillreg" a bearer token is required
	// 401 Bearer realm="skillreg" a bearer token is required
	// 401 Bearer realm="skillreg", error="invalid_token" invalid_token
	// 401 Bearer realm="skillreg", error="invalid_token" invalid_token
	// 429  too many failed authentication attempts
}

// The Host check keeps DNS rebinding out: only listed names, IP literals
// and loopback names are served.
func ExampleHosts_Allowed() {
	hosts := access.NewHosts([]string{"skills.example.com", "*.internal.example.com"})
	for _, h := range []string{"skills.example.com:443", "a.internal.example.com", "internal.example.com", "attacker.example", "10.0.0.5:8080", "localhost:8080"} {
		fmt.Println(h, hosts.Allowed(h))
	}
	// Output:
	// skills.example.com:443 true
	// a.internal.example.com true
	// internal.example.com false
	// attacker.example false
	// 10.0.0.5:8080 true
	// localhost:8080 true
}

// The Origin check: no Origin (not a browser), the server's own origin, or
// a listed one.
func ExampleOrigins_Allowed() {
	origins := access.NewOrigins([]string{"https://app.example.com"})
	fmt.Println(origins.Allowed("", "skills.example.com"))
	fmt.Println(origins.Allowed("https://skills.example.com", "skills.example.com"))
	fmt.Println(origins.Allowed("https://app.example.com", "skills.example.com"))
	fmt.Println(origins.Allowed("https://evil.example", "skills.example.com"))
	// Output:
	// true
	// true
	// true
	// false
}
