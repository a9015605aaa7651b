package publish

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skillreg/skillreg/registry"
)

// gatedCatalog is the real registry with every read counted by file path,
// and, when armed, one read held until released.
type gatedCatalog struct {
	Catalog
	mu    sync.Mutex
	reads map[string]int
	// hold, when set, says whether this read waits for release; it is
	// told the read's file path and how many reads of it came before.
	hold    func(path string, n int) bool
	entered chan string
	release chan struct{}
}

func gate(o *Options) *gatedCatalog {
	g := &gatedCatalog{Catalog: o.Catalog, reads: map[string]int{}, entered: make(chan string, 64), release: make(chan struct{})}
	o.Catalog = g
	return g
}

func (g *gatedCatalog) ReadFile(ctx context.Context, f registry.FileRef) ([]byte, error) {
	g.mu.Lock()
	n := g.reads[f.File.Path]
	g.reads[f.File.Path]++
	hold := g.hold != nil && g.hold(f.File.Path, n)
	g.mu.Unlock()
	if hold {
		g.entered <- f.File.Path
		<-g.release
	}
	return g.Catalog.ReadFile(ctx, f)
}

func (g *gatedCatalog) count(path string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.reads[path]
}

func (g *gatedCatalog) reset() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.reads = map[string]int{}
}

// deadlockGuard bounds a wait that only a bug makes endless.
const deadlockGuard = 20 * time.Second

// TestPluginsFirstCallerGone: whoever first asks for the marketplace's
// archives (the marketplace, Notes, an artifact URL anyone may request)
// may hang up at once; every later caller still sees every plugin, and no
// note blames a context. Skills beyond the skills CLI's limits are
// digested only for the marketplace, so the limit makes them read here.
func TestPluginsFirstCallerGone(t *testing.T) {
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	firsts := map[string]func(f *fixture){
		"notes": func(f *fixture) { f.h.Notes(gone, registry.Filter{}, "") },
		"artifact": func(f *fixture) {
			req := httptest.NewRequestWithContext(gone, http.MethodGet, "/artifacts/sha256/"+strings.Repeat("0", 64)+".zip", nil)
			f.srv.Config.Handler.ServeHTTP(httptest.NewRecorder(), req)
		},
		"marketplace": func(f *fixture) {
			req := httptest.NewRequestWithContext(gone, http.MethodGet, "/marketplace.json", nil)
			f.srv.Config.Handler.ServeHTTP(httptest.NewRecorder(), req)
		},
	}
	for name, first := range firsts {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, defaultSources(), func(o *Options) { o.Limits = Limits{Files: 2, Bytes: 1 << 20} })
			first(f)
			var mp marketplaceDoc
			f.json("/marketplace.json", &mp)
			var got []string
			for _, p := range mp.Plugins {
				got = append(got, p.Name)
			}
			if want := []string{"shared-name", "solo", "deploy", "dotty", "lint", "review", "other-all", "team-all"}; !slices.Equal(got, want) {
				t.Errorf("plugins after a cancelled first caller = %v, want %v", got, want)
			}
			for _, n := range f.h.Notes(context.Background(), registry.Filter{}, "") {
				if strings.Contains(n.Reason, "context") || strings.Contains(n.Reason, "unreadable") {
					t.Errorf("note %+v", n)
				}
			}
		})
	}
}

// TestViewPerGeneration: a caller that loaded generation N+1 while N's view
// is still being built gets N+1's view, not N's.
func TestViewPerGeneration(t *testing.T) {
	var g *gatedCatalog
	f := newFixture(t, defaultSources(), func(o *Options) { g = gate(o) })
	var once sync.Once
	g.mu.Lock()
	g.hold = func(string, int) bool { held := false; once.Do(func() { held = true }); return held }
	g.mu.Unlock()
	old := f.reg.Current()
	doneA := make(chan *view)
	go func() { doneA <- f.h.view(context.Background()) }()
	<-g.entered // N's build is under way, holding one read
	writeTree(t, f.dirs["team"], map[string]file{"fresh/SKILL.md": md("fresh", "Added in the next generation.")})
	f.sync("team")
	cur := f.reg.Current()
	if cur.Gen <= old.Gen {
		t.Fatalf("generation %d after a sync of %d", cur.Gen, old.Gen)
	}
	doneB := make(chan *view)
	go func() { doneB <- f.h.view(context.Background()) }()
	var vb *view
	select {
	case vb = <-doneB:
	case <-time.After(deadlockGuard):
		t.Error("generation N+1's caller waited for N's build")
	}
	close(g.release)
	va := <-doneA
	if vb == nil {
		vb = <-doneB
	}
	if vb.cat != cur {
		t.Fatalf("caller of generation %d got generation %d's view", cur.Gen, vb.cat.Gen)
	}
	if va.cat != old {
		t.Errorf("caller of generation %d got %d", old.Gen, va.cat.Gen)
	}
	if !slices.Contains(names2(f.v2("/.well-known/agent-skills/index.json")), "fresh") {
		t.Errorf("index of the new generation lacks its skill")
	}
}
