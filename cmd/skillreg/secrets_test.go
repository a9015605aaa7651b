package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/config"
	"github.com/skillreg/skillreg/internal/gittest"
	"github.com/skillreg/skillreg/internal/testkit"
	"github.com/skillreg/skillreg/mcp"
)

// TestHostileRemoteLeaksNoToken: a git remote that answers 401 echoing the
// Authorization header (base64 and decoded, in its reason phrase and its
// body) stands in front of a source with a token. No spelling of the token
// reaches the registry's state, /readyz, the /sources page, diagnose, the
// log or /metrics; each still says the sync failed on authentication.
func TestHostileRemoteLeaksNoToken(t *testing.T) {
	const token = "ghp_Xs3cr3tT0ken/with+odd=chars"
	t.Setenv("SKILLREG_TEST_GIT_TOKEN", token)
	echo := gittest.NewEchoServer(t, http.StatusUnauthorized)
	cfg, err := config.Parse([]byte("sources:\n  - name: hostile\n    url: "+echo.URL()+"/team/skills.git\n"+
		"    auth: {token_env: SKILLREG_TEST_GIT_TOKEN}\n    poll: 0\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen, cfg.DataDir = "127.0.0.1:0", t.TempDir()
	var logs testkit.Buffer
	d, err := NewDaemon(cfg, slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Serve(ctx) }()
	t.Cleanup(func() { // after the MCP session's cleanup closes it
		cancel()
		<-done
	})
	base := "http://" + d.Addr()
	get := func(path string) string {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	waitUntil(t, func() bool {
		sts := d.Registry.States()
		return len(sts) == 1 && sts[0].Attempted && sts[0].LastResult == "stalled" && sts[0].Stalled == "auth_refused"
	})
	if echo.Requests() == 0 {
		t.Fatal("the hostile remote was never asked")
	}

	st, _ := json.Marshal(d.Registry.States())
	var diag mcp.DiagnoseOutput
	if msg := callTool(t, connect(t, base, "2025-11-25"), "diagnose", map[string]any{}, &diag); msg != "" {
		t.Fatalf("diagnose: %s", msg)
	}
	dj, _ := json.Marshal(diag)
	shown := map[string]string{
		"registry state": string(st),
		"/readyz":        get("/readyz"),
		"/sources":       get("/sources"),
		"diagnose":       string(dj),
		"/metrics":       get("/metrics"),
		"log":            logs.String(),
	}
	pair := "x-access-token:" + token
	leaks := []string{token, pair,
		base64.StdEncoding.EncodeToString([]byte(pair)), base64.RawStdEncoding.EncodeToString([]byte(pair)),
		base64.StdEncoding.EncodeToString([]byte(token)), url.QueryEscape(token), url.PathEscape(token),
		"Bad credentials", "<script>", "\x1b"}
	for where, text := range shown {
		for _, leak := range leaks {
			if strings.Contains(text, leak) {
				t.Errorf("%s holds %q:\n%s", where, leak, text)
			}
		}
	}
	for _, where := range []string{"registry state", "/readyz", "/sources", "diagnose", "log"} {
		if !strings.Contains(shown[where], "authentication") {
			t.Errorf("%s does not say why the sync failed:\n%s", where, shown[where])
		}
	}
}
