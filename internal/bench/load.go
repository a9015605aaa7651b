package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/skillreg/skillreg/gitref"
	"github.com/skillreg/skillreg/internal/corpus"
)

var loadFor = flag.Duration("load-duration", 60*time.Second, "how long the load section runs")

func init() {
	register("load", runLoad)
}

// The load section (issue 8): 64 MCP clients over loopback, half stateless
// (2026-07-28) and half in 2025-11-25 sessions, mix full skills/list
// paginations, skills/get followed by resources/read, and search_skills,
// against a daemon serving 10,000 skills in two directory sources, the
// smaller of which (a tenth) changes every second. It checks, rather than assumes, what the catalog promises:
//
//   - Zero errors: every answer is HTTP 200 (or the session protocol's
//     200) without a JSON-RPC error, and search answers are not tool errors.
//
//   - Reads are byte-correct against the generation that served them. A
//     client fetches the skill's entry (skills/get) and then one of its
//     files (resources/read); the two answers may come from different
//     generations, since the catalog can swap in between. The bytes must
//     have the size and digest the first entry states; if not, the client
//     fetches the entry again, and the read is a mismatch only if the bytes
//     match neither entry. A generation that served the read lies between
//     the two entries' generations, and each changing file changes at most
//     once every hotSkills seconds, far longer than the two calls take, so
//     the served generation states the first entry's bytes or the second's:
//     a mismatch can only be bytes no generation stated.
//
//   - No pagination mixes generations. Every second the mutator writes a
//     counter into one of hotSkills skills spread over the listing (round
//     robin, skill i gets the counters n with n%hotSkills == i), and it
//     writes the next counter only once the catalog serves the last one.
//     Syncs of one source never overlap, so every generation holds
//     hotSkills consecutive counters, each in its own skill; a pagination
//     whose pages came from different generations shows a set that is not
//     (when the generations are at least two writes apart; adjacent ones
//     differ in one skill and may agree on every page the client saw,
//     which is then content of one real state). Each pagination must also
//     list every skill exactly once.
const hotSkills = 5

// hotPrefix starts the URIs of the source that changes.
const hotPrefix = "skill://hot/"

func runLoad(env *Env) ([]Row, error) {
	// Its own corpus, in two sources: a stable one and a tenth of the
	// skills in one that changes every second. A single 10,000-skill
	// directory source rescans its whole tree on a change (the "index"
	// row's walk and hash, several times slower with the machine's cores
	// taken by this load), so it could not swap every second; teams'
	// sources that change often are small.
	dir := filepath.Join(env.Tmp, "load-corpus")
	hotDir := filepath.Join(env.Tmp, "load-hot")
	hotN := max(env.Skills/10, hotSkills)
	start := time.Now()
	if _, _, err := corpus.Write(dir, corpus.Options{Skills: env.Skills - hotN}); err != nil {
		return nil, err
	}
	if _, _, err := corpus.Write(hotDir, corpus.Options{Skills: hotN}); err != nil {
		return nil, err
	}
	env.Log("load: corpus written in %s", time.Since(start).Round(time.Millisecond))
	staging := filepath.Join(env.Tmp, "load-staging") // same file system, outside the source
	if err := os.MkdirAll(staging, 0o755); err != nil {
		return nil, err
	}
	d, err := startDaemon(env, "load", "sources:\n  - name: bench\n    dir: "+dir+"\n  - name: hot\n    dir: "+hotDir+"\n")
	if err != nil {
		return nil, err
	}
	defer d.stop()
	url := "http://" + d.addr + "/mcp"
	tr := &http.Transport{MaxIdleConnsPerHost: 128, DialContext: (&net.Dialer{}).DialContext}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 60 * time.Second}

	// Learn the catalog: every skill's URI, in listing order.
	admin, _ := stateless.connect(hc, url)
	var uris []string
	if err := paginate(admin, func(p *listPage) error {
		for _, e := range p.Skills {
			uris = append(uris, e.URI)
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("first listing: %w", err)
	}
	if len(uris) != env.Skills {
		return nil, fmt.Errorf("first listing has %d skills, want %d", len(uris), env.Skills)
	}
	m := &mutator{env: env, admin: admin, root: hotDir, staging: staging, versions: map[string]int{}}
	var hotURIs []string
	for _, u := range uris {
		if strings.HasPrefix(u, hotPrefix) {
			hotURIs = append(hotURIs, u)
		}
	}
	for i := range hotSkills {
		u := hotURIs[(i*2+1)*len(hotURIs)/(2*hotSkills)] // spread over the source's pages
		m.hot = append(m.hot, u)
	}
	// Every hot skill holds a counter before the clock starts.
	for range hotSkills {
		if err := m.step(context.Background()); err != nil {
			return nil, err
		}
	}

	warm := m.writes
	st := &loadStats{lat: map[string][]time.Duration{}}
	ctx, cancel := context.WithTimeout(context.Background(), *loadFor)
	defer cancel()
	var wg sync.WaitGroup
	mutErr := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		mutErr <- m.run(ctx)
	}()
	const clients = 64
	cpu0 := d.cpu()
	began := time.Now()
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := stateless
			if i%2 == 1 {
				p = sessions
			}
			lc := &loadClient{st: st, m: m, uris: uris, rnd: rand.New(rand.NewPCG(uint64(i), 8))}
			cl, err := p.connect(hc, url)
			if err != nil {
				st.fail("connect", err)
				return
			}
			defer cl.close()
			lc.cl = cl
			lc.run(ctx)
		}()
	}
	wg.Wait()
	elapsed := time.Since(began)
	cpu := d.cpu() - cpu0
	if err := <-mutErr; err != nil {
		return nil, fmt.Errorf("mutator: %w", err)
	}
	rss, hwm := d.rss(), d.peakRSS()

	// The table.
	total, errs := 0, st.errors.Load()
	methods := []string{"skills/list", "skills/get", "resources/read", "tools/call search_skills"}
	var all []time.Duration
	for _, k := range methods {
		total += len(st.lat[k])
		all = append(all, st.lat[k]...)
	}
	rows := []Row{{
		Name: fmt.Sprintf("load: %d clients (%d stateless, %d in sessions) for %s, %d skills, the %d-skill source changed and swapped every %.1fs (%d swaps)",
			clients, clients/2, clients/2, elapsed.Round(time.Second), env.Skills, hotN, elapsed.Seconds()/float64(max(m.writes-warm, 1)), m.writes-warm),
		Ours:  fmt.Sprintf("%d req, %.0f/s, p50 %s, p99 %s, %d errors", total, float64(total)/elapsed.Seconds(), pct(all, 50), pct(all, 99), errs),
		Ratio: fmt.Sprintf("daemon CPU %.2f cores", cpu.Seconds()/elapsed.Seconds()),
		Goal:  "0 errors",
		OK:    errs == 0,
	}}
	for _, k := range methods {
		l := st.lat[k]
		rows = append(rows, Row{
			Name:  "load: " + k,
			Ours:  fmt.Sprintf("%d req, %.0f/s, p50 %s, p99 %s", len(l), float64(len(l))/elapsed.Seconds(), pct(l, 50), pct(l, 99)),
			Ratio: fmt.Sprintf("%d errors", st.byMethod(k)),
			Goal:  "0 errors",
			OK:    st.byMethod(k) == 0 && len(l) > 0,
		})
	}
	rows = append(rows,
		Row{
			Name: "load: reads byte-correct against the serving generation",
			Ours: fmt.Sprintf("%d reads checked (%d of changing files), %d refetched, %d mismatches", st.reads.Load(), st.hotReads.Load(), st.refetched.Load(), st.mismatches.Load()),
			Goal: "0 mismatches",
			OK:   st.mismatches.Load() == 0 && st.reads.Load() > 0,
		},
		Row{
			Name: "load: paginations from one generation, every skill once",
			Ours: fmt.Sprintf("%d full paginations, %d mixed, %d incomplete", st.paginations.Load(), st.mixed.Load(), st.incomplete.Load()),
			Goal: "0 mixed",
			OK:   st.mixed.Load() == 0 && st.incomplete.Load() == 0 && st.paginations.Load() > 0,
		},
		Row{
			Name: "load: change on disk to served (write -> skills/get shows it)",
			Ours: fmt.Sprintf("p50 %s, max %s over %d writes", pct(m.visible[warm:], 50), pct(m.visible[warm:], 100), m.writes-warm),
			Goal: "(measured)",
			OK:   true,
		},
		Row{
			Name: "load: daemon resident memory at the end",
			Ours: fmt.Sprintf("%d MiB (peak %d MiB)", rss>>20, hwm>>20),
			Goal: "(measured)",
			OK:   rss > 0,
		},
	)
	return rows, nil
}

// peakRSS is the daemon's peak resident memory (VmHWM), or 0.
func (d *daemon) peakRSS() int64 { return d.procStatusKB("VmHWM") }

func pct(d []time.Duration, p int) string {
	if len(d) == 0 {
		return "-"
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := min(len(s)*p/100, len(s)-1)
	return s[i].Round(100 * time.Microsecond).String()
}

type loadStats struct {
	mu      sync.Mutex
	lat     map[string][]time.Duration
	methErr map[string]int
	logged  int

	errors, reads, hotReads, refetched, mismatches atomic.Int64
	paginations, mixed, incomplete                 atomic.Int64
}

func (s *loadStats) record(method string, d time.Duration) {
	s.mu.Lock()
	s.lat[method] = append(s.lat[method], d)
	s.mu.Unlock()
}

func (s *loadStats) fail(method string, err error) {
	s.errors.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.methErr == nil {
		s.methErr = map[string]int{}
	}
	s.methErr[method]++
	if s.logged < 10 {
		s.logged++
		fmt.Fprintf(os.Stderr, "bench: load: %s: %v\n", method, err)
	}
}

func (s *loadStats) byMethod(m string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.methErr[m]
}

func (s *loadStats) note(format string, a ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.logged < 10 {
		s.logged++
		fmt.Fprintf(os.Stderr, "bench: load: "+format+"\n", a...)
	}
}

// listPage is the part of a skills/list answer the checks read.
type listPage struct {
	Skills     []loadEntry `json:"skills"`
	NextCursor string      `json:"nextCursor"`
}

type loadEntry struct {
	URI       string         `json:"uri"`
	Resources []loadResource `json:"resources"`
}

type loadResource struct {
	URI    string `json:"uri"`
	Digest string `json:"digest"`
	Size   int64  `json:"size"`
}

// call sends one request and decodes its result, turning a JSON-RPC error
// into an error.
func call(cl *client, r mcpRequest, result any) error {
	b, err := cl.do(r)
	if err != nil {
		return err
	}
	// One decode, as a client reads an answer: the result goes straight
	// into result (an interface holding a pointer is decoded into). A
	// first pass to a RawMessage scanned every page twice, and the
	// client's time was most of a settled listing's at 10,000 skills.
	var resp struct {
		Result any `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	resp.Result = result
	if result == nil {
		resp.Result = new(json.RawMessage)
	}
	if err := json.Unmarshal(b, &resp); err != nil {
		return fmt.Errorf("%.200s: %w", b, err)
	}
	if resp.Error != nil {
		return fmt.Errorf("JSON-RPC error %d: %s", resp.Error.Code, resp.Error.Message)
	}
	return nil
}

// paginate lists the whole catalog, page by page.
func paginate(cl *client, page func(*listPage) error) error {
	cursor := ""
	for {
		var p listPage
		if err := call(cl, cl.p.listReq(cursor), &p); err != nil {
			return err
		}
		if err := page(&p); err != nil {
			return err
		}
		if p.NextCursor == "" {
			return nil
		}
		cursor = p.NextCursor
	}
}

// mutator writes the counters (see the comment at the top).
type mutator struct {
	env           *Env
	admin         *client
	root, staging string
	hot           []string // skill URIs

	mu       sync.Mutex
	versions map[string]int // digest of gen.txt -> counter
	writes   int
	visible  []time.Duration
}

func (m *mutator) counter(digest string) (int, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.versions[digest]
	return n, ok
}

func (m *mutator) run(ctx context.Context) error {
	for ctx.Err() == nil {
		start := time.Now()
		if err := m.step(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(start.Add(time.Second))):
		}
	}
	return nil
}

// step writes the next counter into its skill (atomically: written aside,
// then renamed in) and waits until skills/get serves it.
func (m *mutator) step(ctx context.Context) error {
	m.mu.Lock()
	n := m.writes + 1
	m.mu.Unlock()
	uri := m.hot[(n-1)%hotSkills]
	rel := strings.TrimSuffix(strings.TrimPrefix(uri, hotPrefix), "/SKILL.md")
	data := []byte(fmt.Sprintf("generation %d\n", n))
	digest := gitref.Sum(data).String()
	m.mu.Lock()
	m.versions[digest] = n
	m.mu.Unlock()
	tmp := filepath.Join(m.staging, fmt.Sprintf("gen-%d", n))
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	start := time.Now()
	if err := os.Rename(tmp, filepath.Join(m.root, filepath.FromSlash(rel), "gen.txt")); err != nil {
		return err
	}
	for deadline := start.Add(60 * time.Second); ; {
		var res struct{ Skill loadEntry }
		if err := call(m.admin, m.admin.p.getReq(uri), &res); err != nil {
			return err
		}
		if slices.ContainsFunc(res.Skill.Resources, func(r loadResource) bool {
			return r.Digest == digest
		}) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("counter %d not served within a minute", n)
		}
		if ctx.Err() != nil {
			return ctx.Err() // the run is over; this write is not counted
		}
		time.Sleep(10 * time.Millisecond)
	}
	m.mu.Lock()
	m.writes = n
	m.visible = append(m.visible, time.Since(start))
	m.mu.Unlock()
	return nil
}

type loadClient struct {
	st   *loadStats
	m    *mutator
	cl   *client
	uris []string
	rnd  *rand.Rand
}

var loadQueries = []string{"golang review", "deploy kube", "backup restore", "incident", "postgres migrate",
	"oauth token session", "terraform", "latency throughput", "webhook", "protobuf grpc api", "securty", "observ"}

func (c *loadClient) run(ctx context.Context) {
	for ctx.Err() == nil {
		switch r := c.rnd.Float64(); {
		case r < 0.10:
			c.paginate(ctx)
		case r < 0.70:
			c.getAndRead()
		default:
			c.search()
		}
	}
}

func (c *loadClient) timed(method string, r mcpRequest, result any) error {
	start := time.Now()
	err := call(c.cl, r, result)
	if err != nil {
		c.st.fail(method, err)
		return err
	}
	c.st.record(method, time.Since(start))
	return nil
}

// paginate lists the whole catalog and checks it (see the comment at the
// top).
func (c *loadClient) paginate(ctx context.Context) {
	seen := make(map[string]bool, len(c.uris))
	counters := map[int]bool{}
	cursor := ""
	for {
		if ctx.Err() != nil {
			return // cut off by the end of the run: not counted
		}
		var p listPage
		if err := c.timed("skills/list", c.cl.p.listReq(cursor), &p); err != nil {
			return
		}
		for _, e := range p.Skills {
			if seen[e.URI] {
				c.st.incomplete.Add(1)
				c.st.note("pagination lists %s twice", e.URI)
				return
			}
			seen[e.URI] = true
			if !slices.Contains(c.m.hot, e.URI) {
				continue
			}
			for _, r := range e.Resources {
				if strings.HasSuffix(r.URI, "/gen.txt") {
					if n, ok := c.m.counter(r.Digest); ok {
						counters[n] = true
					}
				}
			}
		}
		if p.NextCursor == "" {
			break
		}
		cursor = p.NextCursor
	}
	c.st.paginations.Add(1)
	if len(seen) != len(c.uris) {
		c.st.incomplete.Add(1)
		c.st.note("pagination listed %d skills, want %d", len(seen), len(c.uris))
	}
	ns := make([]int, 0, len(counters))
	for n := range counters {
		ns = append(ns, n)
	}
	slices.Sort(ns)
	if len(ns) != hotSkills || ns[len(ns)-1]-ns[0] != hotSkills-1 {
		c.st.mixed.Add(1)
		c.st.note("pagination mixes generations: counters %v", ns)
	}
}

// getAndRead fetches an entry, then one of its files, and checks the bytes
// (see the comment at the top). A fifth of the reads go to the files that
// change.
func (c *loadClient) getAndRead() {
	uri := c.uris[c.rnd.IntN(len(c.uris))]
	hot := c.rnd.IntN(5) == 0
	if hot {
		uri = c.m.hot[c.rnd.IntN(len(c.m.hot))]
	}
	var first struct{ Skill loadEntry }
	if err := c.timed("skills/get", c.cl.p.getReq(uri), &first); err != nil {
		return
	}
	res := first.Skill.Resources
	if len(res) == 0 {
		c.st.fail("skills/get", fmt.Errorf("%s: entry without resources", uri))
		return
	}
	i := c.rnd.IntN(len(res))
	if hot {
		i = slices.IndexFunc(res, func(r loadResource) bool {
			return strings.HasSuffix(r.URI, "/gen.txt")
		})
		if i < 0 {
			c.st.fail("skills/get", fmt.Errorf("%s: no gen.txt", uri))
			return
		}
		c.st.hotReads.Add(1)
	}
	file := res[i].URI
	var read struct {
		Contents []struct {
			URI  string  `json:"uri"`
			Text *string `json:"text"`
			Blob *string `json:"blob"`
		} `json:"contents"`
	}
	if err := c.timed("resources/read", c.cl.p.readReq(file), &read); err != nil {
		return
	}
	c.st.reads.Add(1)
	if len(read.Contents) != 1 {
		c.st.fail("resources/read", fmt.Errorf("%s: %d contents", file, len(read.Contents)))
		return
	}
	var data []byte
	switch ct := read.Contents[0]; {
	case ct.Text != nil:
		data = []byte(*ct.Text)
	case ct.Blob != nil:
		b, err := base64.StdEncoding.DecodeString(*ct.Blob)
		if err != nil {
			c.st.fail("resources/read", fmt.Errorf("%s: blob: %w", file, err))
			return
		}
		data = b
	default:
		c.st.fail("resources/read", fmt.Errorf("%s: neither text nor blob", file))
		return
	}
	got := gitref.Sum(data).String()
	matches := func(e loadEntry) bool {
		for _, r := range e.Resources {
			if r.URI == file {
				return r.Digest == got && r.Size == int64(len(data))
			}
		}
		return false
	}
	if matches(first.Skill) {
		return
	}
	c.st.refetched.Add(1)
	var second struct{ Skill loadEntry }
	if err := c.timed("skills/get", c.cl.p.getReq(uri), &second); err != nil {
		return
	}
	if !matches(second.Skill) {
		c.st.mismatches.Add(1)
		c.st.note("%s: read %d bytes (%s) that neither entry states", file, len(data), got)
	}
}

func (c *loadClient) search() {
	q := loadQueries[c.rnd.IntN(len(loadQueries))]
	var res struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := c.timed("tools/call search_skills", c.cl.p.searchReq(q), &res); err != nil {
		return
	}
	if res.IsError || len(res.Content) == 0 {
		c.st.fail("tools/call search_skills", errors.New("tool error: "+fmt.Sprint(res.Content)))
	}
}
