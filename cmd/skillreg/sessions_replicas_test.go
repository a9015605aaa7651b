package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skillreg/skillreg/access"
	"github.com/skillreg/skillreg/internal/tools"
	"github.com/skillreg/skillreg/mcp"
)

// balancer is a load balancer over loopback in front of replicas: each
// request goes to the replica pick names, as a Service or an ingress
// without affinity would send it.
type balancer struct {
	URL  string
	pick func(r *http.Request) *url.URL
}

// newBalancer serves a reverse proxy on a loopback port until the test
// ends; streamed answers (SSE) are flushed as they come. Bodies are read
// whole before a replica is picked: a body that cannot be read is
// answered 502, as a buffering balancer answers it, and no replica sees
// the request.
func newBalancer(t *testing.T, pick func(r *http.Request) *url.URL) *balancer {
	t.Helper()
	b := &balancer{pick: pick}
	p := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(b.pick(pr.In))
			pr.Out.Host = pr.In.Host
		},
		FlushInterval: -1,
		// A listing the test abandons cancels its request mid-answer: a
		// real failure reaches the client as a 502.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Forward the body from memory, as balancers buffer small
		// bodies. Streamed from the inbound request, an answer that
		// starts before the transport's last read of that body (it
		// reads once more past Content-Length) makes the proxy's own
		// server close the inbound body, the transport's write fails,
		// and the connection is torn down mid-answer: the client gets
		// "unexpected EOF" (golang/go#40747). Seen once in 100 listings.
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "reading the request body: "+err.Error(), http.StatusBadGateway)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		r.TransferEncoding = nil
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		p.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	b.URL = srv.URL
	return b
}

// mustURL parses a replica's base URL.
func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// twoReplicas starts two daemons over one directory source, configured
// with extra too, and one static token (returned) when auth is set.
func twoReplicas(t *testing.T, auth bool, extra string) (a, b *testDaemon, token string) {
	t.Helper()
	root := t.TempDir()
	writeSkill(t, filepath.Join(root, "alpha"), "alpha", nil)
	writeSkill(t, filepath.Join(root, "beta"), "beta", nil)
	cfg := "sources:\n  - name: local\n    dir: " + root + "\n" + extra
	if auth {
		tok, hash, err := access.NewToken()
		if err != nil {
			t.Fatal(err)
		}
		token = tok
		cfg += "clients:\n  - name: alice\n    token_sha256: " + hash + "\n    sources: [\"*\"]\n"
	}
	return startDaemon(t, cfg, ""), startDaemon(t, cfg, ""), token
}

// TestSessionOnAnotherReplica: a 2025-11-25 session lives on the replica
// that opened it. When a balancer sends its next request to another
// replica, that replica answers as the SDK answers an unknown session
// (404 "session not found"), the go-sdk client sees ErrSessionMissing,
// and a fresh connect through the same balancer works: the client
// re-initializes, which is all a balancer without affinity costs.
func TestSessionOnAnotherReplica(t *testing.T) {
	for _, auth := range []bool{false, true} {
		name := "open"
		if auth {
			name = "static token"
		}
		t.Run(name, func(t *testing.T) {
			a, b, token := twoReplicas(t, auth, "")
			var target atomic.Pointer[url.URL]
			target.Store(mustURL(t, a.URL))
			lb := newBalancer(t, func(*http.Request) *url.URL { return target.Load() })

			hc := http.DefaultClient
			if token != "" {
				hc = &http.Client{Transport: bearerRT{token, http.DefaultTransport}}
			}
			dial := func() (*sdk.ClientSession, error) {
				c := sdk.NewClient(&sdk.Implementation{Name: "replica-test", Version: "1"}, nil)
				if err := sdk.AddSendingCustomMethod[*mcp.ListSkillsParams, *mcp.ListSkillsResult](c, "skills/list"); err != nil {
					t.Fatal(err)
				}
				return c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: lb.URL + "/mcp", HTTPClient: hc}, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
			}
			list := func(cs *sdk.ClientSession) (*mcp.ListSkillsResult, error) {
				return sdk.CallCustomMethod[*mcp.ListSkillsParams, *mcp.ListSkillsResult](context.Background(), cs, "skills/list", &mcp.ListSkillsParams{})
			}

			cs, err := dial()
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			if res, err := list(cs); err != nil || len(res.Skills) != 2 {
				t.Fatalf("skills/list on the replica that holds the session: %v %v", res, err)
			}
			if a.MCP.Sessions() != 1 || b.MCP.Sessions() != 0 {
				t.Fatalf("sessions: a %d, b %d; want 1, 0", a.MCP.Sessions(), b.MCP.Sessions())
			}

			// The balancer moves the session's requests to b: the fast
			// path's method (skills/list) and the SDK's (resources/list).
			target.Store(mustURL(t, b.URL))
			if _, err := list(cs); !errors.Is(err, sdk.ErrSessionMissing) {
				t.Fatalf("skills/list of a's session at b: %v, want sdk.ErrSessionMissing", err)
			}

			// The client re-initializes through the same balancer: b
			// opens a session and serves it.
			cs2, err := dial()
			if err != nil {
				t.Fatalf("a fresh connect through b: %v", err)
			}
			defer cs2.Close()
			if res, err := list(cs2); err != nil || len(res.Skills) != 2 {
				t.Fatalf("skills/list in the new session at b: %v %v", res, err)
			}
			if _, err := cs2.ListResources(context.Background(), nil); err != nil {
				t.Fatalf("resources/list in the new session at b: %v", err)
			}
		})
	}
}

// TestUnknownSessionAnswers: every request of a 2025-11-25 session
// another replica opened (a session id b never issued) is answered 404
// "session not found", as the SDK answers it, whatever it asks and
// however it is malformed: neither the fast path, nor the body checks,
// nor a valid token's auth answer first, since a client re-initializes
// only on that 404. With the fast path on and off.
func TestUnknownSessionAnswers(t *testing.T) {
	for _, fast := range []string{"true", "false"} {
		t.Run("fast_path "+fast, func(t *testing.T) { unknownSessionAnswers(t, "mcp:\n  fast_path: "+fast+"\n") })
	}
}

func unknownSessionAnswers(t *testing.T, extra string) {
	a, b, token := twoReplicas(t, true, extra)
	// A real session id, issued by a.
	cs := connectAs(t, a.URL, "2025-11-25", token)
	id := cs.ID()
	if id == "" {
		t.Fatal("a 2025-11-25 session without an id")
	}
	for _, tc := range []struct{ name, method, body string }{
		{"skills/list (the fast path's)", "POST", `{"jsonrpc":"2.0","id":2,"method":"skills/list","params":{}}`},
		{"resources/read (the fast path's)", "POST", `{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"skill://local/alpha/SKILL.md"}}`},
		{"tools/list", "POST", `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`},
		{"a notification", "POST", `{"jsonrpc":"2.0","method":"notifications/initialized"}`},
		{"an id the SDK would not echo", "POST", `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`},
		{"too many values", "POST", "[" + strings.Repeat(`{"jsonrpc":"2.0","method":"ping"},`, 20000) + `{"jsonrpc":"2.0","method":"ping"}]`},
		{"not JSON", "POST", `{"jsonrpc":`},
		{"the event stream", "GET", ""},
		{"the end of the session", "DELETE", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, b.URL+"/mcp", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if tc.method == "POST" {
				req.Header.Set("Content-Type", "application/json")
			}
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("MCP-Protocol-Version", "2025-11-25")
			req.Header.Set("Mcp-Session-Id", id)
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body strings.Builder
			_, _ = io.Copy(&body, io.LimitReader(resp.Body, 4096))
			if resp.StatusCode != http.StatusNotFound || strings.TrimSpace(body.String()) != "session not found" {
				t.Fatalf("%s %s with a's session at b: %d %.300q, want 404 session not found", tc.method, tc.name, resp.StatusCode, body.String())
			}
		})
	}
	// The session still works where it lives.
	if _, err := cs.ListResources(context.Background(), nil); err != nil {
		t.Fatalf("the session at a: %v", err)
	}
}

// TestSessionOnAnotherReplicaTypeScript: the official TypeScript SDK's
// client, whose session a balancer moves to another replica, gets the
// transport's 404 and re-initializes there.
func TestSessionOnAnotherReplicaTypeScript(t *testing.T) {
	node := tools.Node(t)
	modules := tools.NodeModules(t, "@modelcontextprotocol/sdk")
	a, b, _ := twoReplicas(t, false, "")
	var target atomic.Pointer[url.URL]
	target.Store(mustURL(t, a.URL))
	lb := newBalancer(t, func(*http.Request) *url.URL { return target.Load() })

	script, err := filepath.Abs("testdata/ts-session-replica.cjs")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, script, lb.URL+"/mcp", modules)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "ready" {
		_ = cmd.Wait()
		t.Fatalf("TypeScript client: %q before ready\n%s", lines.Text(), stderr.String())
	}
	if a.MCP.Sessions() != 1 || b.MCP.Sessions() != 0 {
		t.Fatalf("sessions: a %d, b %d; want 1, 0", a.MCP.Sessions(), b.MCP.Sessions())
	}
	target.Store(mustURL(t, b.URL))
	if _, err := io.WriteString(stdin, "moved\n"); err != nil {
		t.Fatal(err)
	}
	var out string
	if lines.Scan() {
		out = lines.Text()
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("TypeScript client: %v\n%s", err, stderr.String())
	}
	var sum struct {
		Protocol, Session, NewSession string
		Before, After, Status         int
	}
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatalf("TypeScript client's summary %q: %v", out, err)
	}
	t.Logf("TypeScript client (protocol %s): session %s at a, %d at b, then session %s at b", sum.Protocol, sum.Session, sum.Status, sum.NewSession)
	if sum.Protocol != "2025-11-25" || sum.Session == "" || sum.Before != 2 || sum.Status != http.StatusNotFound || sum.NewSession == "" || sum.NewSession == sum.Session || sum.After != 2 {
		t.Fatalf("TypeScript client across replicas: %+v; want 2025-11-25, 2 skills, 404, a new session, 2 skills", sum)
	}
}

// TestBalancerRefusesABrokenBody: a request whose body cannot be read
// (here a chunked body with a malformed chunk) is answered 502 by the
// balancer, as a balancer that buffers bodies answers it, and no replica
// is asked: forwarded, the replica would be handed a request the client
// never sent whole.
func TestBalancerRefusesABrokenBody(t *testing.T) {
	var asked atomic.Int32
	replica := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		io.Copy(io.Discard, r.Body)
	}))
	t.Cleanup(replica.Close)
	lb := newBalancer(t, func(*http.Request) *url.URL { return mustURL(t, replica.URL) })
	conn, err := net.Dial("tcp", strings.TrimPrefix(lb.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"jsonrpc":"2.0","id":1,"method":"skills/list"}`
	fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\nzz\r\n", len(body), body)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || asked.Load() != 0 {
		t.Fatalf("a broken body: %s, the replica asked %d times; want 502 and never", resp.Status, asked.Load())
	}
}
