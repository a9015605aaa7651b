package releases_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/skillreg/skillreg/internal/fakegithub"
	"github.com/skillreg/skillreg/internal/testkit"
	"github.com/skillreg/skillreg/releases"
	"github.com/skillreg/skillreg/schema"
)

const (
	agentkey   = "chainbase-labs/agentkey"
	latestPath = "/repos/chainbase-labs/agentkey/releases/latest"
)

// epoch lies before the wall clock on purpose: nothing may depend on it.
var epoch = time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)

// env is one test's world: a clock, a fake GitHub sharing it, a store.
type env struct {
	t       *testing.T
	clock   *fakegithub.Clock
	gh      *fakegithub.Server
	store   *releases.MemoryStore
	metrics *counters
	logs    *testkit.Buffer
}

func newEnv(t *testing.T, opts fakegithub.Options) *env {
	t.Helper()
	clk := fakegithub.NewClock(epoch)
	opts.Now = clk.Now
	gh := fakegithub.New(opts)
	t.Cleanup(gh.Close)
	return &env{t: t, clock: clk, gh: gh, store: releases.NewMemoryStore(), metrics: newCounters(), logs: &testkit.Buffer{}}
}

// publishAgentkey gives chainbase-labs/agentkey its v1.3.0 as latest, with
// an older release, a newer prerelease and a newer draft around it.
func (e *env) publishAgentkey() {
	e.gh.Publish(agentkey, fakegithub.Release{TagName: "v1.2.0", CreatedAt: epoch.Add(-72 * time.Hour)})
	e.gh.Publish(agentkey, fakegithub.Release{TagName: "v1.3.0", CreatedAt: epoch.Add(-48 * time.Hour)})
	e.gh.Publish(agentkey, fakegithub.Release{TagName: "v1.4.0-rc.1", Prerelease: true, CreatedAt: epoch.Add(-24 * time.Hour)})
	e.gh.Publish(agentkey, fakegithub.Release{TagName: "v1.4.0", Draft: true, CreatedAt: epoch.Add(-1 * time.Hour)})
}

// client returns a Client on the fake; opts may override anything.
func (e *env) client(opts releases.Options) *releases.Client {
	e.t.Helper()
	if opts.APIURL == "" {
		opts.APIURL = e.gh.URL
	}
	if opts.Store == nil {
		opts.Store = e.store
	}
	if opts.Now == nil {
		opts.Now = e.clock.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if opts.Metrics == nil {
		opts.Metrics = e.metrics
	}
	if opts.Timeout == 0 {
		// Not the 3 s default: a loaded machine must not turn a test of
		// something else into a timeout. Tests of the timeout set their own.
		opts.Timeout = time.Minute
	}
	c, err := releases.New(opts)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = c.Close() })
	return c
}

// counters is a Metrics that counts.
type counters struct {
	mu       sync.Mutex
	lookups  map[string]int
	upstream map[string]int
}

func newCounters() *counters {
	return &counters{lookups: map[string]int{}, upstream: map[string]int{}}
}

func (c *counters) CacheLookup(r string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lookups[r]++
}

func (c *counters) UpstreamRequest(r string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.upstream[r]++
}

func (c *counters) get(kind, r string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if kind == "lookup" {
		return c.lookups[r]
	}
	return c.upstream[r]
}

var (
	schemaOnce sync.Once
	schemaV1   *jsonschema.Schema
	schemaErr  error
)

// checkSchema fails the test unless resp validates against the project's
// skill-meta-v1 schema, and returns resp as JSON.
func checkSchema(t *testing.T, resp releases.Response) []byte {
	t.Helper()
	schemaOnce.Do(func() { schemaV1, schemaErr = schema.CompileSkillMetaV1() })
	if schemaErr != nil {
		t.Fatal(schemaErr)
	}
	b, err := json.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if err := schemaV1.Validate(inst); err != nil {
		t.Errorf("answer %s does not validate: %v", b, err)
	}
	return b
}

// sameJSON reports whether two JSON texts are the same value.
func sameJSON(t *testing.T, got []byte, want string) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	return bytes.Equal(gb, wb)
}

// sent returns how many requests the clients of e sent to GitHub, by their
// own count.
func (e *env) sent() int {
	e.metrics.mu.Lock()
	defer e.metrics.mu.Unlock()
	n := 0
	for _, v := range e.metrics.upstream {
		n += v
	}
	return n
}
