package webhook_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/skillreg/skillreg/webhook"
)

// FuzzHandle drives signed bodies of any shape through the real echo
// router: whatever the event, content type and bytes, the handler must not
// panic and must answer with one of the statuses it documents.
func FuzzHandle(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range files {
		body, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		event, _, _ := strings.Cut(strings.TrimSuffix(filepath.Base(name), ".json"), "-")
		f.Add(event, "application/json", body)
		f.Add(event, "application/x-www-form-urlencoded", asForm(body))
		f.Add(event, "application/json; charset=utf-8", body[:len(body)/3])
	}
	f.Add("push", "application/json", []byte(`{"ref":"refs/tags/x","repository":{"full_name":"a/b"}}`))
	f.Add("release", "application/json", []byte(`{"action":"deleted","release":{"draft":"yes"}}`))
	f.Add("create", "application/x-www-form-urlencoded", []byte("payload=null&payload=1"))
	f.Add("ping", "text/plain", []byte("{}"))
	f.Add("repository", "application/json", []byte(`{"action":"renamed","repository":{"id":1,"full_name":"a/b"},"changes":{"repository":{"name":{"from":7}}}}`))
	f.Add("installation_repositories", "application/json", []byte(`{"action":"added","installation":{"id":1,"account":{"login":"a"}},"repositories_added":[{}]}`))

	h, err := webhook.New(webhook.Options{
		Secrets:  []string{secret},
		Sources:  codertocat,
		Syncer:   &countingSyncer{},
		Releases: &countingReleases{},
		// No source follows the repositories of the organisation
		// events, so pushes reach Discovery too.
		Discovery: &countingDiscovery{},
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(h.Close)
	e := echo.New()
	h.Register(e)

	allowed := map[int]bool{200: true, 202: true, 204: true, 400: true, 415: true}
	f.Fuzz(func(t *testing.T, event, contentType string, body []byte) {
		req := httptest.NewRequest(http.MethodPost, webhook.Path, bytes.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("X-GitHub-Event", event)
		req.Header.Set("X-GitHub-Delivery", "fuzz")
		req.Header.Set("X-Hub-Signature-256", sign(secret, body))
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		if !allowed[rec.Code] {
			t.Fatalf("status %d for event %q, content type %q", rec.Code, event, contentType)
		}
	})
}

// countingSyncer and countingReleases never block, however long the fuzzer
// runs.
type countingSyncer struct{ n atomic.Int64 }

func (s *countingSyncer) RequestSync(string, string) { s.n.Add(1) }

type countingReleases struct{ puts, refreshes atomic.Int64 }

func (r *countingReleases) Put(string, string, string, time.Time) { r.puts.Add(1) }

func (r *countingReleases) Refresh(context.Context, string) error {
	r.refreshes.Add(1)
	return nil
}

type countingDiscovery struct{ repos, installs atomic.Int64 }

func (d *countingDiscovery) Repository(webhook.RepoEvent) { d.repos.Add(1) }

func (d *countingDiscovery) Installation(webhook.InstallationEvent) { d.installs.Add(1) }
