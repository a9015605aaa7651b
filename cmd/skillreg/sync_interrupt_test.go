package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSyncInterrupted: a signal during `skillreg sync` stops the pass:
// it says "interrupted", reports no source as failed, and exits 130 (it
// used to print "failed … context canceled" for every remaining source and
// exit 1).
func TestSyncInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hung := make(chan struct{}, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hung <- struct{}{}
		<-r.Context().Done() // a remote that never answers
	}))
	defer srv.Close()
	go func() { <-hung; cancel() }() // Ctrl-C while the first source fetches

	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	yaml := "sources:\n" +
		"  - name: first\n    url: " + srv.URL + "/a.git\n" +
		"  - name: second\n    url: " + srv.URL + "/b.git\n" +
		"  - name: third\n    url: " + srv.URL + "/c.git\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
	code := run(ctx, e, []string{"sync", "--config", cfg, "--data", filepath.Join(dir, "data")})
	if code != exitInterrupted {
		t.Errorf("exit %d, want %d", code, exitInterrupted)
	}
	if strings.Contains(out.String(), "failed") {
		t.Errorf("an interrupted pass reported failures:\n%s", out.String())
	}
	if !strings.Contains(errb.String(), "interrupted") {
		t.Errorf("stderr does not say interrupted: %q", errb.String())
	}
}
