package netlimit_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/skillreg/skillreg/netlimit"
)

// A handler that reads a body itself pays for it from the shared budget,
// as the bytes arrive, and releases it when done.
func ExampleBudget_ReadAll() {
	budget := netlimit.NewBudget(1<<20, time.Second)
	data, release, err := budget.ReadAll(context.Background(), strings.NewReader(`{"ok":true}`), 1024)
	fmt.Println(string(data), err, budget.InUse() > 0)
	release()
	fmt.Println(budget.InUse())

	_, release, err = budget.ReadAll(context.Background(), strings.NewReader(strings.Repeat("x", 2048)), 1024)
	release()
	fmt.Println(errors.Is(err, netlimit.ErrTooLarge))
	// Output:
	// {"ok":true} <nil> true
	// 0
	// true
}

// Bodies puts a policy in front of a handler: buffered bodies come out of
// the budget before the handler runs, and one over its limit is answered
// 413 without reaching it.
func ExampleBodies() {
	budget := netlimit.NewBudget(0, 0) // the defaults
	policy := func(r *http.Request) netlimit.BodyPolicy {
		return netlimit.BodyPolicy{Limit: 16, Buffer: true}
	}
	h := netlimit.Bodies(budget, policy, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "got %d bytes", len(b))
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, body := range []string{"small", strings.Repeat("x", 100)} {
		resp, err := http.Post(srv.URL, "text/plain", strings.NewReader(body))
		if err != nil {
			panic(err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, strings.TrimSpace(string(msg)))
	}
	// Output:
	// 200 got 5 bytes
	// 413 request body too large
}

// A Listener caps connections before the HTTP server sees them; over the
// cap, only the probe paths are still served, from a small reserved pool,
// so a flood cannot make the health checks fail.
func ExampleNewListener() {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	l := netlimit.NewListener(inner, netlimit.Options{
		MaxConns:      1000,
		MaxConnsPerIP: 64,
		ProbePaths:    []string{"/healthz", "/readyz"},
	})
	srv := &http.Server{
		Handler: netlimit.ProbeOnly([]string{"/healthz", "/readyz"}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "ok")
		})),
		ConnContext: netlimit.ConnContext,
	}
	go srv.Serve(l)
	defer srv.Close()

	resp, err := http.Get("http://" + l.Addr().String() + "/healthz")
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode)
	// Output:
	// 200
}
