package publish

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skillreg/skillreg/catalog"
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

func (g *gatedCatalog) ReadFile(ctx context.Context, f catalog.FileRef) ([]byte, error) {
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
		"notes": func(f *fixture) { f.h.Notes(gone, catalog.Filter{}, "") },
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
			for _, n := range f.h.Notes(context.Background(), catalog.Filter{}, "") {
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

// bigSources: one skill of several large files, so its archives are far
// over a small cache budget.
func bigSources() map[string]map[string]file {
	files := map[string]file{"big/SKILL.md": md("big", "A skill of large files.")}
	for i, n := range []string{"a.bin", "b.bin", "c.bin"} {
		files["big/"+n] = file{data: strings.Repeat(fmt.Sprintf("%c%d", 'a'+i, i), 128<<10)}
	}
	return map[string]map[string]file{"big": files}
}

// TestArtifactsUncacheable: with a cache far smaller than an archive, a
// HEAD reads nothing and builds nothing, and concurrent GETs are streamed,
// each holding one file at a time: every client has bytes before the
// archive's last file is read, and no archive is built in memory. The
// bytes still match the digest the index states.
func TestArtifactsUncacheable(t *testing.T) {
	var g *gatedCatalog
	f := newFixture(t, bigSources(), func(o *Options) { g = gate(o); o.CacheBytes = 1024 })
	var builds, streams atomic.Int64
	f.h.onArtifactBuild = func(string) { builds.Add(1) }
	f.h.onArtifactStream = func(string) { streams.Add(1) }
	idx := f.v2("/.well-known/agent-skills/index.json")
	url, digest := v2URL(idx, "big"), idx.Skills[0].Digest
	var mp marketplaceDoc
	f.json("/marketplace.json", &mp)
	urls := map[string]string{url: digest}
	for _, p := range mp.Plugins {
		urls[strings.TrimPrefix(p.Source.URL, f.srv.URL)] = "sha256:" + p.Source.SHA256
	}
	if len(urls) != 2 {
		// big-all holds only big: the same bytes as big's plugin.
		t.Fatalf("artifacts %v: want the skill's archive and its plugin", urls)
	}
	g.reset()
	for u, d := range urls {
		h := f.do(http.MethodHead, u)
		full := f.get(u)
		if h.code != 200 || h.header.Get("Content-Length") != strconv.Itoa(len(full.body)) || h.header.Get("ETag") != full.header.Get("ETag") {
			t.Errorf("HEAD %s: %d, length %s etag %s; GET: %d bytes, etag %s", u, h.code, h.header.Get("Content-Length"), h.header.Get("ETag"), len(full.body), full.header.Get("ETag"))
		}
		if digestOf(full.body) != d {
			t.Errorf("GET %s: digest %s, want %s", u, digestOf(full.body), d)
		}
		if nm := f.get(u, "If-None-Match", full.header.Get("ETag")); nm.code != http.StatusNotModified {
			t.Errorf("revalidation of %s: %d", u, nm.code)
		}
	}
	if n := g.count("c.bin"); n != len(urls) {
		t.Errorf("c.bin read %d times by %d HEADs, GETs and revalidations of %d archives; want one per GET", n, 3*len(urls), len(urls))
	}

	const clients = 4
	g.reset()
	g.mu.Lock()
	g.hold = func(p string, _ int) bool { return p == "c.bin" }
	g.mu.Unlock()
	var started, finished sync.WaitGroup
	started.Add(clients)
	finished.Add(clients)
	sums := make([]string, clients)
	for i := range clients {
		go func() {
			defer finished.Done()
			res, err := f.srv.Client().Get(f.srv.URL + url)
			if err != nil {
				started.Done()
				t.Error(err)
				return
			}
			defer res.Body.Close()
			first := make([]byte, 1)
			_, err = io.ReadFull(res.Body, first)
			started.Done()
			if err != nil {
				t.Error(err)
				return
			}
			h := sha256.New()
			h.Write(first)
			if _, err := io.Copy(h, res.Body); err != nil {
				t.Error(err)
			}
			sums[i] = "sha256:" + hex.EncodeToString(h.Sum(nil))
		}()
	}
	all := make(chan struct{})
	go func() { started.Wait(); close(all) }()
	select {
	case <-all:
	case <-time.After(deadlockGuard):
		t.Error("no client got a byte before the archive's last file was read: archives are built whole in memory")
	}
	close(g.release)
	finished.Wait()
	for i, s := range sums {
		if s != digest {
			t.Errorf("client %d: digest %s, want %s", i, s, digest)
		}
	}
	if builds.Load() != 0 || streams.Load() != int64(clients+len(urls)) {
		t.Errorf("%d archives built in memory, %d streamed; want 0 and %d", builds.Load(), streams.Load(), clients+len(urls))
	}
}

// TestArtifactsSingleFlight: concurrent GETs of an archive the cache can
// hold build it once and read each file once.
func TestArtifactsSingleFlight(t *testing.T) {
	var g *gatedCatalog
	f := newFixture(t, bigSources(), func(o *Options) { g = gate(o) })
	var builds atomic.Int64
	f.h.onArtifactBuild = func(string) { builds.Add(1) }
	idx := f.v2("/.well-known/agent-skills/index.json")
	url, digest := v2URL(idx, "big"), idx.Skills[0].Digest
	g.reset()
	const clients = 8
	var wg sync.WaitGroup
	sums := make([]string, clients)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sums[i] = digestOf(f.get(url).body)
		}()
	}
	wg.Wait()
	for i, s := range sums {
		if s != digest {
			t.Errorf("client %d: digest %s", i, s)
		}
	}
	if builds.Load() != 1 || g.count("a.bin") != 1 || g.count("c.bin") != 1 {
		t.Errorf("%d builds, a.bin read %d times, c.bin %d; want 1 each", builds.Load(), g.count("a.bin"), g.count("c.bin"))
	}
}

// TestMarketplaceHostileHosts: every IP literal is a Host the marketplace
// may build URLs on, so anyone can send thousands of them; each gets its
// own origin in the document, and none of them can push the legitimate
// document out of the cache.
func TestMarketplaceHostileHosts(t *testing.T) {
	f := newFixture(t, defaultSources(), nil)
	get := func(host string, header ...string) response {
		req, err := http.NewRequest(http.MethodGet, f.srv.URL+"/marketplace.json", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		res, err := f.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return response{res.StatusCode, res.Header, b}
	}
	etags := map[string]bool{}
	for i := range 1100 {
		host := fmt.Sprintf("10.0.%d.%d", i/256, i%256)
		r := get(host)
		if r.code != 200 || !strings.Contains(string(r.body), `"url":"http://`+host+`/artifacts/sha256/`) || !strings.Contains(string(r.body), `"owner":{"name":"`+host+`"}`) {
			t.Fatalf("Host %s: %d %s", host, r.code, r.body)
		}
		if strings.Contains(string(r.body), f.h.hostMark) {
			t.Fatalf("Host %s: placeholder left in %s", host, r.body)
		}
		etags[r.header.Get("ETag")] = true
	}
	if len(etags) != 1100 {
		t.Errorf("%d ETags for 1100 origins", len(etags))
	}
	legit := strings.TrimPrefix(f.srv.URL, "http://")
	first := get(legit)
	v := f.h.view(context.Background())
	before := v.bodies.builds.Load()
	again := get(legit)
	if after := v.bodies.builds.Load(); after != before {
		t.Errorf("the legitimate marketplace was rendered again after 1100 hostile Hosts (%d renders, then %d)", before, after)
	}
	if string(again.body) != string(first.body) || again.header.Get("ETag") != first.header.Get("ETag") || !strings.Contains(string(first.body), f.srv.URL+"/artifacts/") {
		t.Errorf("legitimate marketplace changed between requests or names another origin: %s", first.body)
	}
	if r := get(legit, "If-None-Match", first.header.Get("ETag")); r.code != http.StatusNotModified {
		t.Errorf("revalidation: %d", r.code)
	}
}
