package webhook_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/skillreg/skillreg/gitref"
	"github.com/skillreg/skillreg/internal/testkit"
	"github.com/skillreg/skillreg/webhook"
)

const (
	secret    = "It's a Secret to Everybody"
	oldSecret = "the previous secret"
	repoName  = "Codertocat/Hello-World"
)

// macHex computes a GitHub-style signature value independently of the code
// under test.
func macHex(h func() hash.Hash, prefix, key string, body []byte) string {
	m := hmac.New(h, []byte(key))
	m.Write(body)
	return prefix + hex.EncodeToString(m.Sum(nil))
}

func sign(key string, body []byte) string { return macHex(sha256.New, "sha256=", key, body) }

func load(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// journal is the shared, ordered record of what the handler asked for.
type journal struct {
	mu      sync.Mutex
	entries []string
}

func (j *journal) add(s string) {
	j.mu.Lock()
	j.entries = append(j.entries, s)
	j.mu.Unlock()
}

func (j *journal) all() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.entries)
}

// recSyncer records sync requests.
type recSyncer struct {
	j      *journal
	calls  chan string
	mu     sync.Mutex
	counts map[string]int
}

func newRecSyncer(j *journal) *recSyncer {
	return &recSyncer{j: j, calls: make(chan string, 10000), counts: map[string]int{}}
}

func (s *recSyncer) RequestSync(source, reason string) {
	if !strings.HasPrefix(reason, "webhook ") {
		panic("unexpected reason " + reason)
	}
	s.mu.Lock()
	s.counts[source]++
	s.mu.Unlock()
	s.j.add("sync " + source)
	s.calls <- source
}

func (s *recSyncer) total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.counts {
		n += c
	}
	return n
}

// recReleases records cache updates; when gate is set, Refresh waits on it.
type recReleases struct {
	j       *journal
	started chan string
	gate    chan struct{}
	mu      sync.Mutex
	puts    []string
	refresh int
}

func newRecReleases(j *journal) *recReleases {
	return &recReleases{j: j, started: make(chan string, 100)}
}

func (r *recReleases) Put(repo, tag, htmlURL string, publishedAt time.Time) {
	s := fmt.Sprintf("put %s %s %s %s", repo, tag, htmlURL, publishedAt.UTC().Format(time.RFC3339))
	r.mu.Lock()
	r.puts = append(r.puts, s)
	r.mu.Unlock()
	r.j.add(s)
}

func (r *recReleases) Refresh(ctx context.Context, repo string) error {
	r.started <- repo
	if r.gate != nil {
		select {
		case <-r.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	r.mu.Lock()
	r.refresh++
	r.mu.Unlock()
	r.j.add("refresh " + repo)
	return nil
}

func (r *recReleases) putCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.puts)
}

type staticSources []webhook.Target

func (s staticSources) Targets() []webhook.Target { return s }

// codertocat is a configuration with every kind of pin on the example
// payloads' repository, under several spellings of its URL, and a few that
// must never match.
var codertocat = staticSources{
	target("main-branch", "https://github.com/Codertocat/Hello-World.git", "branch", "master"),
	target("default", "https://github.com/codertocat/hello-world.git", "", ""),
	target("stable", "https://GitHub.com/CODERTOCAT/Hello-World", "semver", ">=0.0.1 <1.0.0"),
	target("latest", "https://github.com:443/codertocat/hello-world/", "release", "latest"),
	target("tagged", "https://github.com/Codertocat/Hello-World", "tag", "simple-tag"),
	target("other-tag", "https://github.com/Codertocat/Hello-World", "tag", "v9.9.9"),
	target("dev", "https://github.com/Codertocat/Hello-World", "branch", "dev"),
	target("frozen", "https://github.com/Codertocat/Hello-World", "commit", "6113728f27ae82c7b1a177c8d03f9e96e0adf246"),
	target("elsewhere", "https://github.com/someone/else.git", "branch", "master"),
	target("enterprise", "https://ghe.example.com/Codertocat/Hello-World.git", "branch", "master"),
}

// target builds a Target as config would, from a URL and a pin's key and
// value; it panics on what config would refuse.
func target(source, url, kind, value string) webhook.Target {
	repo, err := gitref.ParseRepo(url)
	if err != nil {
		panic(err)
	}
	pin, err := gitref.ParsePin(kind, value)
	if err != nil {
		panic(err)
	}
	return webhook.Target{Source: source, Repo: repo, Pin: pin}
}

type rig struct {
	h        *webhook.Handler
	srv      *httptest.Server
	url      string
	j        *journal
	syncer   *recSyncer
	releases *recReleases
	log      *webhook.MemoryLog
	logs     *bytes.Buffer
	mu       sync.Mutex
	metrics  map[string]int // "event outcome" -> count
}

type rigOption func(*webhook.Options, *rig)

func withSecrets(s ...string) rigOption {
	return func(o *webhook.Options, _ *rig) { o.Secrets = s }
}

func withSources(s webhook.Sources) rigOption {
	return func(o *webhook.Options, _ *rig) { o.Sources = s }
}

func newRig(t *testing.T, opts ...rigOption) *rig {
	t.Helper()
	r := &rig{j: &journal{}, log: webhook.NewMemoryLog(0), logs: &bytes.Buffer{}, metrics: map[string]int{}}
	r.syncer = newRecSyncer(r.j)
	r.releases = newRecReleases(r.j)
	o := webhook.Options{
		Secrets:  []string{secret},
		Sources:  codertocat,
		Syncer:   r.syncer,
		Releases: r.releases,
		Log:      r.log,
		Logger:   slog.New(slog.NewJSONHandler(&lockedWriter{w: r.logs}, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Now:      func() time.Time { return time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC) },
		Metrics: func(event, outcome string) {
			r.mu.Lock()
			r.metrics[event+" "+outcome]++
			r.mu.Unlock()
		},
	}
	for _, opt := range opts {
		opt(&o, r)
	}
	h, err := webhook.New(o)
	if err != nil {
		t.Fatal(err)
	}
	e := echo.New()
	h.Register(e)
	r.h = h
	r.srv = httptest.NewServer(e)
	r.url = r.srv.URL + webhook.Path
	t.Cleanup(func() {
		r.srv.Close()
		r.h.Close()
	})
	return r
}

func (r *rig) metric(event, outcome string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.metrics[event+" "+outcome]
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

type delivery struct {
	event, id, contentType string
	body                   []byte
	signature              *string // nil: sign body with secret
	header                 map[string]string
}

func (r *rig) send(t testing.TB, d delivery) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, r.url, bytes.NewReader(d.body))
	if err != nil {
		t.Fatal(err)
	}
	ct := d.contentType
	if ct == "" {
		ct = "application/json"
	}
	req.Header.Set("Content-Type", ct)
	req.Header.Set("User-Agent", "GitHub-Hookshot/044aadd")
	if d.event != "" {
		req.Header.Set("X-GitHub-Event", d.event)
	}
	if d.id != "" {
		req.Header.Set("X-GitHub-Delivery", d.id)
	}
	if d.signature == nil {
		req.Header.Set("X-Hub-Signature-256", sign(secret, d.body))
	} else if *d.signature != "" {
		req.Header.Set("X-Hub-Signature-256", *d.signature)
	}
	for k, v := range d.header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

func ptr(s string) *string { return &s }

// asForm encodes a JSON payload the way GitHub does for hooks whose content
// type is application/x-www-form-urlencoded.
func asForm(payload []byte) []byte {
	return []byte(url.Values{"payload": {string(payload)}}.Encode())
}

func TestNewNeedsASecret(t *testing.T) {
	for _, secrets := range [][]string{nil, {}, {""}, webhook.ParseSecrets(" ,\n ,")} {
		if _, err := webhook.New(webhook.Options{Secrets: secrets}); !errors.Is(err, webhook.ErrNoSecret) {
			t.Errorf("New(%q) = %v, want ErrNoSecret", secrets, err)
		}
	}
	h, err := webhook.New(webhook.Options{Secrets: []string{"s"}})
	if err != nil {
		t.Fatalf("zero options but a secret: %v", err)
	}
	h.Close()
	h.Close() // twice is fine
}

func TestParseSecrets(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"  \n\n , ,", nil},
		{"one", []string{"one"}},
		{" one \n", []string{"one"}},
		{"one,two", []string{"one", "two"}},
		{"one\r\ntwo\n\nthree , four\n", []string{"one", "two", "three", "four"}},
		{"with space inside", []string{"with space inside"}},
	}
	for _, tt := range tests {
		if got := webhook.ParseSecrets(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("ParseSecrets(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestEvents sends every example payload through the real echo router, as
// JSON and as a form, and checks the answer, the syncs and cache updates
// asked for, and the delivery log.
func TestEvents(t *testing.T) {
	const (
		put     = "put Codertocat/Hello-World 0.0.1 https://github.com/Codertocat/Hello-World/releases/tag/0.0.1 2019-05-15T15:20:53Z"
		refresh = "refresh Codertocat/Hello-World"
	)
	tests := []struct {
		file, event, action string
		status              int
		outcome             string
		sources             []string // in the reply and the log
		journal             []string // sorted, except where order is checked below
		hookID              int64
	}{
		{"push.json", "push", "", 202, webhook.OutcomeAccepted, []string{"default", "main-branch"},
			[]string{"sync default", "sync main-branch"}, 0},
		{"push-forced.json", "push", "", 202, webhook.OutcomeAccepted, []string{"default", "main-branch"},
			[]string{"sync default", "sync main-branch"}, 0},
		{"push-tag.json", "push", "", 202, webhook.OutcomeAccepted, []string{"latest", "stable", "tagged"},
			[]string{"sync latest", "sync stable", "sync tagged"}, 0},
		{"push-deleted.json", "push", "", 202, webhook.OutcomeAccepted, []string{"latest", "stable", "tagged"},
			[]string{"sync latest", "sync stable", "sync tagged"}, 0},
		{"create-tag.json", "create", "", 202, webhook.OutcomeAccepted, []string{"latest", "stable", "tagged"},
			[]string{"sync latest", "sync stable", "sync tagged"}, 0},
		{"delete-tag.json", "delete", "", 202, webhook.OutcomeAccepted, []string{"latest", "stable", "tagged"},
			[]string{"sync latest", "sync stable", "sync tagged"}, 0},
		{"release-published.json", "release", "published", 202, webhook.OutcomeAccepted, []string{"latest", "stable"},
			[]string{put, "sync latest", "sync stable"}, 0},
		{"release-released.json", "release", "released", 202, webhook.OutcomeAccepted, []string{"latest", "stable"},
			[]string{put, "sync latest", "sync stable"}, 0},
		{"release-edited.json", "release", "edited", 202, webhook.OutcomeAccepted, []string{"latest", "stable"},
			[]string{put, "sync latest", "sync stable"}, 0},
		{"release-prereleased.json", "release", "prereleased", 202, webhook.OutcomeAccepted, []string{"latest", "stable"},
			[]string{"sync latest", "sync stable"}, 0},
		{"release-deleted.json", "release", "deleted", 202, webhook.OutcomeAccepted, []string{"latest", "stable"},
			[]string{refresh, "sync latest", "sync stable"}, 0},
		{"release-unpublished.json", "release", "unpublished", 202, webhook.OutcomeAccepted, []string{"latest", "stable"},
			[]string{refresh, "sync latest", "sync stable"}, 0},
		{"release-created.json", "release", "created", 204, webhook.OutcomeIgnored, nil, nil, 0},
		{"ping.json", "ping", "", 200, webhook.OutcomePing, nil, nil, 109948940},
		{"issues-opened.json", "issues", "opened", 204, webhook.OutcomeIgnored, nil, nil, 0},
	}
	for _, tt := range tests {
		for _, form := range []bool{false, true} {
			name := tt.file
			if form {
				name += "/form"
			}
			t.Run(name, func(t *testing.T) {
				r := newRig(t)
				body, ct := load(t, tt.file), "application/json"
				if form {
					body, ct = asForm(body), "application/x-www-form-urlencoded; charset=utf-8"
				}
				status, out := r.send(t, delivery{event: tt.event, id: "id-" + name, contentType: ct, body: body})
				if status != tt.status {
					t.Fatalf("status %d, want %d; body %s", status, tt.status, out)
				}
				if status == http.StatusNoContent {
					if len(out) != 0 {
						t.Errorf("204 with a body: %q", out)
					}
				} else {
					var rep webhook.Reply
					if err := json.Unmarshal(out, &rep); err != nil {
						t.Fatalf("reply %q: %v", out, err)
					}
					want := webhook.Reply{Delivery: "id-" + name, Event: tt.event, Outcome: tt.outcome,
						HookID: tt.hookID, Sources: orEmpty(tt.sources)}
					if !equalReply(rep, want) {
						t.Errorf("reply %+v, want %+v", rep, want)
					}
				}
				// Close cancels a refresh and the syncs it is to be followed
				// by: wait for what the delivery asked for first.
				waitJournal(t, r.j, len(tt.journal))
				r.h.Close()

				got := r.j.all()
				if i := slices.Index(got, refresh); i >= 0 && slices.Index(got, "sync latest") < i {
					t.Errorf("release-pinned source synced before the release refresh: %v", got)
				}
				if i := slices.Index(got, put); i >= 0 && i != 0 {
					t.Errorf("release cache updated after a sync: %v", got)
				}
				slices.Sort(got)
				if !slices.Equal(got, tt.journal) {
					t.Errorf("asked for %q, want %q", got, tt.journal)
				}

				recent, err := r.log.Recent(10)
				if err != nil {
					t.Fatal(err)
				}
				wantRepo := repoName
				if tt.event == "ping" {
					wantRepo = "Octocoders/Hello-World"
				}
				if len(recent) != 1 {
					t.Fatalf("log has %d deliveries, want 1", len(recent))
				}
				d := recent[0]
				if d.ID != "id-"+name || d.Event != tt.event || d.Action != tt.action || d.Repo != wantRepo ||
					d.Outcome != tt.outcome || d.Redelivery || !slices.Equal(d.Sources, tt.sources) ||
					!d.At.Equal(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)) {
					t.Errorf("logged %+v", d)
				}
				if n := r.metric(tt.event, tt.outcome); n != 1 {
					t.Errorf("metric %s/%s = %d, want 1", tt.event, tt.outcome, n)
				}
			})
		}
	}
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func equalReply(a, b webhook.Reply) bool {
	return a.Delivery == b.Delivery && a.Event == b.Event && a.Outcome == b.Outcome &&
		a.Redelivery == b.Redelivery && a.HookID == b.HookID && slices.Equal(a.Sources, b.Sources)
}

// edit returns the example payload with fields changed, the way a test
// needs a variant GitHub sends but the examples lack.
func edit(t *testing.T, name string, change func(map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(load(t, name), &m); err != nil {
		t.Fatal(err)
	}
	change(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestEventVariants(t *testing.T) {
	tests := []struct {
		name, file, event string
		change            func(map[string]any)
		sources           webhook.Sources
		status            int
		journal           []string
	}{
		{"untracked repository", "push.json", "push", nil,
			staticSources{codertocat[8], codertocat[9]}, 204, nil},
		{"no sources at all", "push.json", "push", nil, staticSources{}, 204, nil},
		{"branch nobody pins", "push.json", "push",
			func(m map[string]any) { m["ref"] = "refs/heads/feature" }, codertocat, 204, nil},
		{"dev branch deleted", "push-deleted.json", "push",
			func(m map[string]any) { m["ref"] = "refs/heads/dev" }, codertocat, 202, []string{"sync dev"}},
		{"default branch renamed", "push.json", "push",
			func(m map[string]any) {
				m["ref"] = "refs/heads/dev"
				m["repository"].(map[string]any)["default_branch"] = "dev"
				m["repository"].(map[string]any)["master_branch"] = "dev"
			}, codertocat, 202, []string{"sync default", "sync dev"}},
		{"matched by full_name alone", "push.json", "push",
			func(m map[string]any) {
				repo := m["repository"].(map[string]any)
				for _, k := range []string{"clone_url", "ssh_url", "git_url", "html_url", "svn_url", "url"} {
					delete(repo, k)
				}
			}, codertocat, 202, []string{"sync default", "sync main-branch"}},
		{"draft release published", "release-published.json", "release",
			func(m map[string]any) { m["release"].(map[string]any)["draft"] = true }, codertocat, 204, nil},
		{"draft release deleted", "release-deleted.json", "release",
			func(m map[string]any) { m["release"].(map[string]any)["draft"] = true }, codertocat, 204, nil},
		{"release edited into a prerelease", "release-edited.json", "release",
			func(m map[string]any) { m["release"].(map[string]any)["prerelease"] = true }, codertocat, 202,
			[]string{"refresh Codertocat/Hello-World", "sync latest", "sync stable"}},
		{"release of an untracked repository still updates the cache", "release-published.json", "release",
			nil, staticSources{codertocat[8]}, 202,
			[]string{"put Codertocat/Hello-World 0.0.1 https://github.com/Codertocat/Hello-World/releases/tag/0.0.1 2019-05-15T15:20:53Z"}},
		{"prerelease of an untracked repository", "release-prereleased.json", "release",
			nil, staticSources{codertocat[8]}, 204, nil},
		{"branch created", "create-tag.json", "create",
			func(m map[string]any) { m["ref_type"], m["ref"] = "branch", "dev" }, codertocat, 202, []string{"sync dev"}},
		{"repository created", "create-tag.json", "create",
			func(m map[string]any) { m["ref_type"], m["ref"] = "repository", nil }, codertocat, 204, nil},
		{"empty object payload", "push.json", "push",
			func(m map[string]any) { clear(m) }, codertocat, 204, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, withSources(tt.sources))
			body := load(t, tt.file)
			if tt.change != nil {
				body = edit(t, tt.file, tt.change)
			}
			status, out := r.send(t, delivery{event: tt.event, id: "v-1", body: body})
			if status != tt.status {
				t.Fatalf("status %d, want %d: %s", status, tt.status, out)
			}
			waitJournal(t, r.j, len(tt.journal))
			r.h.Close()
			got := r.j.all()
			slices.Sort(got)
			if !slices.Equal(got, tt.journal) {
				t.Errorf("asked for %q, want %q", got, tt.journal)
			}
		})
	}
}

func TestSourcesAskedEachTime(t *testing.T) {
	src := &mutableSources{}
	r := newRig(t, withSources(src))
	if status, _ := r.send(t, delivery{event: "push", id: "a", body: load(t, "push.json")}); status != 204 {
		t.Fatalf("before reload: status %d, want 204", status)
	}
	src.set(staticSources{codertocat[0]})
	if status, _ := r.send(t, delivery{event: "push", id: "b", body: load(t, "push.json")}); status != 202 {
		t.Fatalf("after reload: status %d, want 202", status)
	}
}

type mutableSources struct {
	mu sync.Mutex
	t  []webhook.Target
}

func (m *mutableSources) set(t []webhook.Target) {
	m.mu.Lock()
	m.t = t
	m.mu.Unlock()
}

func (m *mutableSources) Targets() []webhook.Target {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.t
}

func TestSignatures(t *testing.T) {
	body := load(t, "push.json")
	tampered := bytes.Replace(body, []byte("refs/heads/master"), []byte("refs/heads/dev"), 1)
	good := sign(secret, body)
	tests := []struct {
		name   string
		sig    string
		header map[string]string
		body   []byte
	}{
		{"missing", "", nil, body},
		{"forged with another key", sign("guess", body), nil, body},
		{"body tampered", good, nil, tampered},
		{"truncated", good[:len(good)-2], nil, body},
		{"one digit short", good[:len(good)-1], nil, body},
		{"extra digits", good + "00", nil, body},
		{"prefix only", "sha256=", nil, body},
		{"no prefix", strings.TrimPrefix(good, "sha256="), nil, body},
		{"not hex", "sha256=" + strings.Repeat("zz", 32), nil, body},
		{"wrong algorithm sha1", macHex(sha1.New, "sha1=", secret, body), nil, body},
		{"wrong algorithm sha512", macHex(sha512.New, "sha512=", secret, body), nil, body},
		{"legacy sha1 header only", "", map[string]string{"X-Hub-Signature": macHex(sha1.New, "sha1=", secret, body)}, body},
		{"signature of the empty body", sign(secret, nil), nil, body},
		{"empty key", sign("", body), nil, body},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			status, out := r.send(t, delivery{event: "push", id: "sig-1", body: tt.body, signature: ptr(tt.sig), header: tt.header})
			if status != http.StatusUnauthorized {
				t.Fatalf("status %d, want 401", status)
			}
			if len(out) != 0 {
				t.Errorf("401 body %q, want none", out)
			}
			r.h.Close()
			if got := r.j.all(); len(got) != 0 {
				t.Errorf("an unauthenticated delivery asked for %v", got)
			}
			if recent, _ := r.log.Recent(0); len(recent) != 0 {
				t.Errorf("an unauthenticated delivery was recorded: %+v", recent)
			}
			if n := r.metric("push", webhook.OutcomeUnauthorized); n != 1 {
				t.Errorf("unauthorized metric %d, want 1", n)
			}
		})
	}
}

// TestForgedDeliveryIDDoesNotPoisonDedupe: a forged request carrying the id
// of a genuine delivery yet to come must not make that delivery look like
// a redelivery (which would skip its release update).
func TestForgedDeliveryIDDoesNotPoisonDedupe(t *testing.T) {
	r := newRig(t)
	body := load(t, "release-published.json")
	if status, _ := r.send(t, delivery{event: "release", id: "future", body: body, signature: ptr(sign("guess", body))}); status != 401 {
		t.Fatalf("forged: status %d", status)
	}
	if status, _ := r.send(t, delivery{event: "release", id: "future", body: body}); status != 202 {
		t.Fatalf("genuine: status %d, want 202", status)
	}
	if n := r.releases.putCount(); n != 1 {
		t.Errorf("release Put %d times, want 1", n)
	}
}

func TestSecretRotation(t *testing.T) {
	body := load(t, "push.json")
	// During rotation both secrets are configured.
	r := newRig(t, withSecrets(webhook.ParseSecrets("new secret,\n"+oldSecret+"\n")...))
	for i, key := range []string{"new secret", oldSecret} {
		status, _ := r.send(t, delivery{event: "push", id: "rot-" + strconv.Itoa(i), body: body, signature: ptr(sign(key, body))})
		if status != http.StatusAccepted {
			t.Errorf("signed with secret %d: status %d, want 202", i, status)
		}
	}
	// Once the old one is removed, deliveries signed with it are refused.
	r2 := newRig(t, withSecrets("new secret"))
	if status, _ := r2.send(t, delivery{event: "push", id: "rot-old", body: body, signature: ptr(sign(oldSecret, body))}); status != http.StatusUnauthorized {
		t.Errorf("old secret after rotation: status %d, want 401", status)
	}
	if status, _ := r2.send(t, delivery{event: "push", id: "rot-new", body: body, signature: ptr(sign("new secret", body))}); status != http.StatusAccepted {
		t.Errorf("new secret after rotation: status %d, want 202", status)
	}
}

// rawResponse writes head (and then body, if any) on a fresh connection and
// reads the response. Nothing is written after body, so the server never
// has unread bytes when it closes, and the test needs no timeouts.
func rawResponse(t *testing.T, addr, head string, body func(w io.Writer)) *http.Response {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if body != nil {
			bw := bufio.NewWriterSize(conn, 64<<10)
			body(bw)
			bw.Flush() // errors are fine: the server may stop reading
		}
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	conn.Close()
	<-done
	return resp
}

func TestOversizedBody(t *testing.T) {
	sig := sign(secret, []byte("whatever"))
	t.Run("content length refused before reading", func(t *testing.T) {
		r := newRig(t)
		// The body is never sent: a server that tried to read it would hang.
		head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-GitHub-Event: push\r\n"+
			"X-GitHub-Delivery: big-1\r\nX-Hub-Signature-256: %s\r\nContent-Length: %d\r\n\r\n",
			webhook.Path, sig, webhook.MaxBodyBytes+1)
		resp := rawResponse(t, r.srv.Listener.Addr().String(), head, nil)
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("status %d, want 413", resp.StatusCode)
		}
		if n := r.metric("push", webhook.OutcomeTooLarge); n != 1 {
			t.Errorf("too_large metric %d, want 1", n)
		}
	})
	t.Run("chunked without length", func(t *testing.T) {
		r := newRig(t)
		head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-GitHub-Event: push\r\n"+
			"X-GitHub-Delivery: big-2\r\nX-Hub-Signature-256: %s\r\nTransfer-Encoding: chunked\r\n\r\n",
			webhook.Path, sig)
		// Exactly one byte more than the limit, in chunks, never terminated.
		resp := rawResponse(t, r.srv.Listener.Addr().String(), head, func(w io.Writer) {
			chunk := bytes.Repeat([]byte(" "), 1<<20)
			left := webhook.MaxBodyBytes + 1
			for left > 0 {
				n := min(left, int64(len(chunk)))
				if _, err := fmt.Fprintf(w, "%x\r\n%s\r\n", n, chunk[:n]); err != nil {
					return
				}
				left -= n
			}
		})
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("status %d, want 413", resp.StatusCode)
		}
		r.h.Close()
		if recent, _ := r.log.Recent(0); len(recent) != 0 {
			t.Errorf("an oversized delivery was recorded: %+v", recent)
		}
	})
	t.Run("exactly the limit is accepted", func(t *testing.T) {
		r := newRig(t)
		push := load(t, "push.json")
		body := append(push, bytes.Repeat([]byte(" "), int(webhook.MaxBodyBytes)-len(push))...)
		status, out := r.send(t, delivery{event: "push", id: "big-3", body: body})
		if status != http.StatusAccepted {
			t.Fatalf("status %d, want 202: %s", status, out)
		}
	})
}

func TestMalformedPayloads(t *testing.T) {
	push := load(t, "push.json")
	tests := []struct {
		name, event, contentType string
		body                     []byte
		status                   int
		outcome                  string
	}{
		{"truncated JSON", "push", "application/json", push[:len(push)/2], 400, webhook.OutcomeMalformed},
		{"not JSON", "push", "application/json", []byte("hello"), 400, webhook.OutcomeMalformed},
		{"empty body", "push", "application/json", nil, 400, webhook.OutcomeMalformed},
		{"wrong field type", "push", "application/json", []byte(`{"ref": 5}`), 400, webhook.OutcomeMalformed},
		{"array payload", "release", "application/json", []byte(`[1,2]`), 400, webhook.OutcomeMalformed},
		{"malformed unrelated event", "issues", "application/json", []byte(`{"action":`), 400, webhook.OutcomeMalformed},
		{"form without payload", "push", "application/x-www-form-urlencoded", []byte("other=1"), 400, webhook.OutcomeMalformed},
		{"form with bad escape", "push", "application/x-www-form-urlencoded", []byte("payload=%zz"), 400, webhook.OutcomeMalformed},
		{"form with malformed JSON", "push", "application/x-www-form-urlencoded", asForm(push[:100]), 400, webhook.OutcomeMalformed},
		{"unsupported content type", "push", "text/plain", push, 415, webhook.OutcomeUnsupported},
		{"no content type", "push", ";", push, 415, webhook.OutcomeUnsupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			status, _ := r.send(t, delivery{event: tt.event, id: "bad-1", contentType: tt.contentType, body: tt.body})
			if status != tt.status {
				t.Fatalf("status %d, want %d", status, tt.status)
			}
			r.h.Close()
			if got := r.j.all(); len(got) != 0 {
				t.Errorf("a malformed delivery asked for %v", got)
			}
			recent, _ := r.log.Recent(0)
			if len(recent) != 1 || recent[0].Outcome != tt.outcome || recent[0].ID != "bad-1" || recent[0].Event != tt.event {
				t.Errorf("recorded %+v, want one %s delivery", recent, tt.outcome)
			}
		})
	}
}

func TestUnknownEvents(t *testing.T) {
	r := newRig(t)
	for i, event := range []string{"issues", "star", "made_up_event", ""} {
		status, out := r.send(t, delivery{event: event, id: "u-" + strconv.Itoa(i), body: load(t, "issues-opened.json")})
		if status != http.StatusNoContent || len(out) != 0 {
			t.Errorf("event %q: status %d body %q, want 204 and none", event, status, out)
		}
	}
	r.h.Close()
	if got := r.j.all(); len(got) != 0 {
		t.Errorf("unknown events asked for %v", got)
	}
	if n := r.metric("issues", webhook.OutcomeIgnored); n != 1 {
		t.Errorf("issues metric %d", n)
	}
	// Names GitHub does not define share one label, so a caller cannot
	// grow the metric's cardinality.
	if n := r.metric("other", webhook.OutcomeIgnored); n != 2 {
		t.Errorf("other metric %d, want 2", n)
	}
	if recent, _ := r.log.Recent(0); len(recent) != 4 {
		t.Errorf("recorded %d deliveries, want 4", len(recent))
	}
	if !strings.Contains(r.logs.String(), `"level":"DEBUG","msg":"webhook delivery","event":"issues"`) {
		t.Errorf("ignored event not logged at debug:\n%s", r.logs)
	}
}

func TestRedelivery(t *testing.T) {
	r := newRig(t)
	body := load(t, "release-published.json")
	status, _ := r.send(t, delivery{event: "release", id: "r-1", body: body})
	if status != http.StatusAccepted {
		t.Fatalf("first delivery: status %d", status)
	}
	waitSyncs(t, r.syncer, 2)
	status, out := r.send(t, delivery{event: "release", id: "r-1", body: body})
	if status != http.StatusOK {
		t.Fatalf("redelivery: status %d, want 200", status)
	}
	var rep webhook.Reply
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.Redelivery || !slices.Equal(rep.Sources, []string{"latest", "stable"}) {
		t.Errorf("redelivery reply %+v", rep)
	}
	waitSyncs(t, r.syncer, 2) // the same syncs again
	r.h.Close()
	if n := r.releases.putCount(); n != 1 {
		t.Errorf("release applied %d times, want once", n)
	}
	recent, _ := r.log.Recent(0)
	if len(recent) != 2 || !recent[0].Redelivery || recent[1].Redelivery {
		t.Errorf("log %+v, want the redelivery on top of the original", recent)
	}
	if !strings.Contains(r.logs.String(), `"msg":"webhook redelivery"`) {
		t.Errorf("redelivery not logged:\n%s", r.logs)
	}

	// A redelivered ping or ignored event answers 200 too.
	for _, d := range []delivery{{event: "ping", id: "p-1", body: load(t, "ping.json")}, {event: "issues", id: "i-1", body: load(t, "issues-opened.json")}} {
		r := newRig(t)
		r.send(t, d)
		if status, _ := r.send(t, d); status != http.StatusOK {
			t.Errorf("redelivered %s: status %d, want 200", d.event, status)
		}
	}
}

// waitSyncs receives n sync requests; it blocks until they come.
func waitSyncs(t *testing.T, s *recSyncer, n int) {
	t.Helper()
	for range n {
		<-s.calls
	}
}

// TestRedeliveryRace: copies of one delivery handled at the same time apply
// its release change once.
func TestRedeliveryRace(t *testing.T) {
	r := newRig(t)
	body := load(t, "release-published.json")
	var wg sync.WaitGroup
	statuses := make(chan int, 50)
	for range 50 {
		wg.Go(func() {
			status, _ := r.send(t, delivery{event: "release", id: "same", body: body})
			statuses <- status
		})
	}
	wg.Wait()
	close(statuses)
	first := 0
	for s := range statuses {
		if s == http.StatusAccepted {
			first++
		} else if s != http.StatusOK {
			t.Errorf("status %d", s)
		}
	}
	if first != 1 {
		t.Errorf("%d copies handled as first delivery, want 1", first)
	}
	if n := r.releases.putCount(); n != 1 {
		t.Errorf("release applied %d times, want once", n)
	}
}

// TestConcurrentDeliveriesAskOnce: 100 deliveries for one source at once
// all get 202, and each asks the Syncer once, on its own request: the
// handler keeps no queue of its own (the registry's queue coalesces).
func TestConcurrentDeliveriesAskOnce(t *testing.T) {
	r := newRig(t, withSources(staticSources{codertocat[0]}))
	body := load(t, "push.json")
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[int]int{}
	for i := range 100 {
		wg.Go(func() {
			status, _ := r.send(t, delivery{event: "push", id: "c-" + strconv.Itoa(i), body: body})
			mu.Lock()
			statuses[status]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if statuses[http.StatusAccepted] != 100 {
		t.Fatalf("statuses %v, want 100 x 202", statuses)
	}
	// Every request was made before its answer was sent.
	if n := r.syncer.total(); n != 100 {
		t.Errorf("%d sync requests, want 100", n)
	}
	r.h.Close()
	for _, e := range r.j.all() {
		if e != "sync main-branch" {
			t.Errorf("unexpected request %q", e)
		}
	}
	if recent, _ := r.log.Recent(0); len(recent) != 100 {
		t.Errorf("recorded %d deliveries, want 100", len(recent))
	}
}

// waitJournal waits until j holds n entries (the background refreshes and
// the syncs that follow them have run).
func waitJournal(t *testing.T, j *journal, n int) {
	t.Helper()
	testkit.WaitUntil(t, fmt.Sprintf("%d journal entries", n), func() bool { return len(j.all()) >= n })
}

// TestRefreshNeverBlocks: a release deletion answers while the refresh is
// still running; deletions arriving meanwhile are merged into one more
// refresh, and the release-pinned source is synced after it.
func TestRefreshNeverBlocks(t *testing.T) {
	r := newRig(t)
	r.releases.gate = make(chan struct{})
	body := load(t, "release-deleted.json")
	if status, _ := r.send(t, delivery{event: "release", id: "d-0", body: body}); status != http.StatusAccepted {
		t.Fatalf("status %d", status)
	}
	<-r.releases.started // the first refresh runs and is stuck
	for i := 1; i <= 5; i++ {
		if status, _ := r.send(t, delivery{event: "release", id: "d-" + strconv.Itoa(i), body: body}); status != http.StatusAccepted {
			t.Fatalf("status %d while a refresh runs", status)
		}
	}
	if c := slices.Index(r.j.all(), "sync latest"); c >= 0 {
		t.Errorf("release-pinned source synced before its refresh finished")
	}
	close(r.releases.gate)
	<-r.releases.started // the merged follow-up
	// Close would cut the follow-up short: wait for the sync it asks for.
	testkit.WaitUntil(t, "the sync after the refresh", func() bool { return slices.Contains(r.j.all(), "sync latest") })
	r.h.Close()
	r.releases.mu.Lock()
	n := r.releases.refresh
	r.releases.mu.Unlock()
	if n != 2 {
		t.Errorf("%d refreshes, want 2 (the running one and one merged follow-up)", n)
	}
	got := r.j.all()
	last := slices.Index(got, "refresh Codertocat/Hello-World")
	if i := slices.Index(got, "sync latest"); i < last {
		t.Errorf("sync of latest before the refresh: %v", got)
	}
}

// TestCloseCancelsRefresh: Close does not wait for a stuck refresh.
func TestCloseCancelsRefresh(t *testing.T) {
	r := newRig(t)
	r.releases.gate = make(chan struct{}) // never opened
	if status, _ := r.send(t, delivery{event: "release", id: "x", body: load(t, "release-unpublished.json")}); status != http.StatusAccepted {
		t.Fatalf("status %d", status)
	}
	<-r.releases.started
	r.h.Close() // returns because the refresh's context is cancelled
	if !strings.Contains(r.logs.String(), "release refresh failed") {
		t.Errorf("cancelled refresh not logged")
	}
	// The daemon closes the handler on its way down, just before the
	// registry stops: the sync the refresh was to be followed by is not
	// handed to it (it would start, be cancelled at once and be recorded as
	// a failure), and neither is any asked for by a later delivery.
	if got := r.j.all(); slices.Contains(got, "sync latest") {
		t.Errorf("a closed handler asked for %q", got)
	}
	before := r.syncer.total()
	r.send(t, delivery{event: "push", id: "after", body: load(t, "push.json")})
	if n := r.syncer.total() - before; n != 0 {
		t.Errorf("a delivery to a closed handler asked for %d syncs", n)
	}
}

// TestNoSecretsInLogs: secrets and credentials in source URLs never reach
// the log, whatever the delivery.
func TestNoSecretsInLogs(t *testing.T) {
	r := newRig(t, withSecrets(secret, oldSecret))
	push := load(t, "push.json")
	r.send(t, delivery{event: "push", id: "1", body: push})
	r.send(t, delivery{event: "push", id: "2", body: push, signature: ptr(sign("guess", push))})
	r.send(t, delivery{event: "push", id: "3", body: push, signature: ptr("")})
	r.send(t, delivery{event: "release", id: "4", body: load(t, "release-deleted.json")})
	r.send(t, delivery{event: "push", id: "5", body: []byte("{")})
	r.h.Close()
	logs := r.logs.String()
	for _, s := range []string{secret, oldSecret, "tok3n-in-url", sign(secret, push)} {
		if strings.Contains(logs, s) {
			t.Errorf("log contains %q:\n%s", s, logs)
		}
	}
}

func TestMethodNotAllowed(t *testing.T) {
	r := newRig(t)
	resp, err := http.Get(r.url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: status %d, want 405", resp.StatusCode)
	}
}

// TestContextStopsEveryHandler: the daemon passes one Options.Context to
// every handler it makes (one per reload) and ends it as it shuts down:
// a refresh running then is cancelled and asks for no sync, in a handler
// that was never closed too.
func TestContextStopsEveryHandler(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r := newRig(t, func(o *webhook.Options, _ *rig) { o.Context = ctx })
	r.releases.gate = make(chan struct{}) // never opened
	if status, _ := r.send(t, delivery{event: "release", id: "x", body: load(t, "release-unpublished.json")}); status != http.StatusAccepted {
		t.Fatalf("status %d", status)
	}
	<-r.releases.started
	before := r.syncer.total()
	cancel()
	r.h.Drain() // returns once the cancelled refresh has
	if n := r.syncer.total() - before; n != 0 {
		t.Errorf("%d syncs asked for after the context ended: %q", n, r.j.all())
	}
}

// TestDrainFinishesRefreshes: a handler a reload replaced finishes the
// refresh it runs and asks for the syncs that follow it.
func TestDrainFinishesRefreshes(t *testing.T) {
	r := newRig(t)
	r.releases.gate = make(chan struct{})
	if status, _ := r.send(t, delivery{event: "release", id: "x", body: load(t, "release-deleted.json")}); status != http.StatusAccepted {
		t.Fatalf("status %d", status)
	}
	<-r.releases.started
	drained := make(chan struct{})
	go func() { r.h.Drain(); close(drained) }()
	close(r.releases.gate)
	<-drained
	if got := r.j.all(); !slices.Contains(got, "sync latest") {
		t.Errorf("a drained handler did not ask for the sync after its refresh: %q", got)
	}
}

// TestDeliveryAfterDrainStillSyncs: a delivery that was already inside a
// handler when a reload replaced it reaches the refresher after Drain; it
// was answered 202 naming the release-pinned source, and GitHub will not
// send it again, so its refresh still runs and asks for that sync.
func TestDeliveryAfterDrainStillSyncs(t *testing.T) {
	r := newRig(t)
	r.h.Drain() // the reload retired the handler; nothing was running
	status, body := r.send(t, delivery{event: "release", id: "late", body: load(t, "release-deleted.json")})
	if status != http.StatusAccepted || !strings.Contains(string(body), `"latest"`) {
		t.Fatalf("status %d, body %s", status, body)
	}
	testkit.WaitUntil(t, "the sync after the late refresh", func() bool { return slices.Contains(r.j.all(), "sync latest") })
	got := r.j.all()
	if i, j := slices.Index(got, "refresh Codertocat/Hello-World"), slices.Index(got, "sync latest"); i < 0 || j < i {
		t.Errorf("want the refresh, then the sync: %q", got)
	}
}
