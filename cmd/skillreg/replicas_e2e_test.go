package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/internal/gittest"
)

// e2eSkills is the size of the replicas' source: 11 pages of 200.
const e2eSkills = 2100

// roundRobin is the pool behind a balancer: each request goes to the
// next live replica, as a Service without affinity sends them; a stopped
// replica leaves the pool as a failing readiness probe takes a pod out of
// a Service's endpoints.
type roundRobin struct {
	mu   sync.Mutex
	pool []*url.URL
	next int
	sent map[string]int // requests per replica base URL
}

func (rr *roundRobin) pick(*http.Request) *url.URL {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	u := rr.pool[rr.next%len(rr.pool)]
	rr.next++
	rr.sent[u.String()]++
	return u
}

func (rr *roundRobin) remove(base string) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	rr.pool = slices.DeleteFunc(rr.pool, func(u *url.URL) bool { return u.String() == base })
}

func (rr *roundRobin) counts() map[string]int {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	out := map[string]int{}
	for k, v := range rr.sent {
		out[k] = v
	}
	return out
}

// page is one skills/list answer of a listing.
type page struct {
	body   string // the whole JSON-RPC answer
	cursor string // the cursor it was asked with ("" for the first page)
	next   string // its nextCursor
}

// errMoved is a listing that ended in "catalog changed".
var errMoved = catalog.ErrCatalogMoved

// e2eClient is a plain HTTP client for stateless skills/list requests,
// safe for concurrent listings.
var e2eClient = &http.Client{Timeout: 30 * time.Second}

// fetchPage asks base for one skills/list page (2026-07-28, stateless).
// An answer "catalog changed" is errMoved; any other failure an error.
func fetchPage(ctx context.Context, base, cursor string) (page, error) {
	params := ""
	if cursor != "" {
		params = `,"cursor":"` + cursor + `"`
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"skills/list","params":{` + meta2026 + params + `}}`
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/mcp", strings.NewReader(body))
	if err != nil {
		return page{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "skills/list")
	resp, err := e2eClient.Do(req)
	if err != nil {
		return page{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return page{}, err
	}
	if resp.StatusCode == http.StatusOK {
		// A page is some 100 KB: find its nextCursor without decoding it
		// all (the listings are a thousand pages, under the race detector).
		// The key, quoted, cannot occur unescaped inside a string.
		next, ok := nextCursor(b)
		if !ok {
			return page{}, fmt.Errorf("skills/list (cursor %q): no result in %.300s", cursor, b)
		}
		return page{body: string(b), cursor: cursor, next: next}, nil
	}
	var res struct {
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &res); err == nil && resp.StatusCode == http.StatusBadRequest && res.Error != nil &&
		res.Error.Code == -32602 && strings.Contains(res.Error.Message, catalog.ErrCatalogMoved.Error()) {
		return page{}, errMoved
	}
	return page{}, fmt.Errorf("skills/list (cursor %q): %d %.300s", cursor, resp.StatusCode, b)
}

// nextCursor reads the nextCursor of a skills/list answer: a JSON-RPC
// result object that ends with it, or has none (the last page).
func nextCursor(b []byte) (string, bool) {
	if !bytes.HasPrefix(b, []byte(`{"jsonrpc":"2.0","id":1,"result":{`)) {
		return "", false
	}
	const key = `"nextCursor":"`
	i := bytes.LastIndex(b, []byte(key))
	if i < 0 {
		return "", true
	}
	rest := b[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return "", false
	}
	return string(rest[:j]), true
}

// listing pages through base's skills/list from its first page (or from
// cursor) to its end, or to the first error.
func listing(ctx context.Context, base, cursor string) ([]page, error) {
	var pages []page
	for {
		p, err := fetchPage(ctx, base, cursor)
		if err != nil {
			return pages, err
		}
		pages = append(pages, p)
		if p.next == "" {
			return pages, nil
		}
		if len(pages) > e2eSkills {
			return pages, fmt.Errorf("listing does not end after %d pages", len(pages))
		}
		cursor = p.next
	}
}

// generationOf is the generation a page's cursors name: the one it was
// asked with, or for a first page the one its nextCursor names ("" for a
// one-page listing).
func generationOf(t *testing.T, p page) string {
	t.Helper()
	c := p.cursor
	if c == "" {
		c = p.next
	}
	if c == "" {
		return ""
	}
	cur, err := catalog.DecodeCursor(c)
	if err != nil {
		t.Fatalf("cursor %q: %v", c, err)
	}
	return cur.Generation
}

// generations holds, per generation name, its listing as one replica
// renders it: the reference every page served anywhere must equal.
type generations map[string][]page

// record lists base's current generation and keeps it as the reference.
func (g generations) record(t *testing.T, base string) string {
	t.Helper()
	pages, err := listing(context.Background(), base, "")
	if err != nil {
		t.Fatalf("listing at %s: %v", base, err)
	}
	name := generationOf(t, pages[0])
	if len(pages) < 11 {
		t.Fatalf("%d pages: the test wants a listing of 11 or more", len(pages))
	}
	if old, ok := g[name]; ok && !slices.Equal(old, pages) {
		t.Fatalf("generation %s listed twice, differently", name)
	}
	g[name] = pages
	return name
}

// check holds one listing (complete or not) to the references: every page
// names the listing's one generation and equals that generation's page at
// its position, so no listing mixes generations; every cursor but the
// first page's continues where the previous page ended.
func (g generations) check(t *testing.T, pages []page, from int) {
	t.Helper()
	if len(pages) == 0 {
		return
	}
	gen := generationOf(t, pages[0])
	ref, ok := g[gen]
	if !ok {
		t.Fatalf("a listing of generation %s, which no replica was seen to serve", gen)
	}
	for i, p := range pages {
		if got := generationOf(t, p); got != gen {
			t.Fatalf("page %d of a listing of generation %s names generation %s: a mixed listing", from+i, gen, got)
		}
		if from+i >= len(ref) || p.body != ref[from+i].body {
			t.Fatalf("page %d of generation %s differs from the reference:\n%.300s\nwant\n%.300s", from+i, gen, p.body, ref[min(from+i, len(ref)-1)].body)
		}
		if i > 0 && p.cursor != pages[i-1].next {
			t.Fatalf("page %d asked with %q after a page whose nextCursor is %q", from+i, p.cursor, pages[i-1].next)
		}
	}
}

// paginate runs n complete listings through base, par at a time, and
// returns them; a listing that fails fails the test.
func paginate(t *testing.T, base string, n, par int) [][]page {
	t.Helper()
	out := make([][]page, n)
	errs := make([]error, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range par {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				out[i], errs[i] = listing(context.Background(), base, "")
			}
		}()
	}
	wg.Wait()
	failed := 0
	for i, err := range errs {
		if err != nil {
			if failed++; failed <= 3 {
				t.Errorf("listing %d through the balancer (after %d pages): %v", i, len(out[i]), err)
			}
		}
	}
	if failed > 0 {
		t.Fatalf("%d of %d listings through the balancer failed while the replicas agreed", failed, n)
	}
	return out
}

// pushChange commits a new description of skill-0001 and pushes it.
func pushChange(t *testing.T, remote *gittest.Repo, marker string) {
	t.Helper()
	remote.WriteFiles(map[string]string{"skills/skill-0001/SKILL.md": "---\nname: skill-0001\ndescription: " + marker + "\n---\n# skill-0001\n"})
	remote.Commit(marker)
	remote.Push("main")
}

// webhookToOne pushes a change of skill-0001's description to marker,
// delivers one signed push delivery to rs[0] alone and waits
// until every replica of rs serves the pushed change (marker in
// skill-0001's entry on the first page, asked of each replica directly),
// logging the time from the delivery to each replica serving it. It
// returns the generation they agree on.
func webhookToOne(t *testing.T, remote *gittest.Repo, rs []*replica, id, marker string) string {
	t.Helper()
	pushChange(t, remote, marker)
	body := payload(t, "push.json", "acme/many-skills", remote.URL(), onMain)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := make([]atomic.Int64, len(rs)) // ns from the delivery, 0 until served
	var start time.Time
	var wg sync.WaitGroup
	want := `"description":"` + marker + `"`
	begin := make(chan struct{})
	for i, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-begin
			for ctx.Err() == nil {
				p, err := fetchPage(ctx, r.URL, "")
				if err == nil && strings.Contains(p.body, want) {
					seen[i].Store(max(int64(time.Since(start)), 1))
					return
				}
				time.Sleep(2 * time.Millisecond)
			}
		}()
	}
	start = time.Now()
	close(begin)
	status, reply := deliver(t, rs[0].URL, "push", id, body)
	answered := time.Since(start)
	if status != http.StatusAccepted || !strings.Contains(reply, "many") {
		t.Fatalf("push delivery to %s: %d %s", rs[0].URL, status, reply)
	}
	waitUntil(t, func() bool {
		for i := range seen {
			if seen[i].Load() == 0 {
				return false
			}
		}
		return true
	})
	cancel()
	wg.Wait()
	var last time.Duration
	var each []string
	for i := range seen {
		d := time.Duration(seen[i].Load())
		last = max(last, d)
		each = append(each, fmt.Sprintf("%s %v", rs[i].URL, d.Round(time.Millisecond)))
	}
	t.Logf("delivery %s to %s (answered in %v): served by every one of %d replicas %v after the delivery (%s)",
		id, rs[0].URL, answered.Round(time.Millisecond), len(rs), last.Round(time.Millisecond), strings.Join(each, ", "))
	name := readyName(t, rs[0].testDaemon)
	for _, r := range rs[1:] {
		if got := readyName(t, r.testDaemon); got != name {
			t.Fatalf("after the relay %s serves generation %s, %s serves %s", rs[0].URL, name, r.URL, got)
		}
	}
	return name
}

// TestReplicasEndToEnd: three replicas with poll 0 over one git source of
// 2,100 skills, behind a round-robin balancer on loopback. While they
// agree, 100 complete listings of 11 pages each, their pages spread over
// the three, all complete. One webhook to one replica reaches all three
// through the relay (the time is logged). Listings begun before a swap
// either finish in the generation they began in or answer "catalog
// changed", never mixing generations; a replica that never held a
// generation answers its cursors "catalog changed". With one replica
// stopped, the others keep serving and relaying.
func TestReplicasEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("three daemons over 2,100 skills")
	}
	t.Setenv("SKILLREG_WEBHOOK_SECRET", testSecret)
	began := time.Now()
	_, remote := manySkillsRemote(t, e2eSkills)
	t.Logf("a git source of %d skills pushed in %v", e2eSkills, time.Since(began).Round(time.Millisecond))
	cfg := "sources:\n  - name: many\n    url: " + remote.URL() + "\n    ref: {branch: main}\n    path: skills\n    poll: 0\n"
	began = time.Now()
	rs := startReplicas(t, 3, cfg, "")
	t.Logf("three replicas over %d skills ready in %v", e2eSkills, time.Since(began).Round(time.Millisecond))

	rr := &roundRobin{sent: map[string]int{}}
	for _, r := range rs {
		rr.pool = append(rr.pool, mustURL(t, r.URL))
	}
	lb := newBalancer(t, rr.pick)

	// They agree: one generation, the same pages byte for byte.
	gens := generations{}
	gen0 := gens.record(t, rs[0].URL)
	for _, r := range rs[1:] {
		if got := gens.record(t, r.URL); got != gen0 {
			t.Fatalf("replicas over one commit serve generations %s and %s", gen0, got)
		}
	}

	// 100 complete listings through the balancer.
	began = time.Now()
	done := paginate(t, lb.URL, 100, 4)
	for _, l := range done {
		gens.check(t, l, 0)
		if len(l) != len(gens[gen0]) {
			t.Fatalf("a listing of %d pages, want %d", len(l), len(gens[gen0]))
		}
	}
	sent := rr.counts()
	t.Logf("100 listings of %d pages through the balancer in %v, pages per replica %v", len(gens[gen0]), time.Since(began).Round(time.Millisecond), sent)
	for _, r := range rs {
		if sent[r.URL] < 100 {
			t.Fatalf("replica %s answered %d requests: the balancer did not spread the listings", r.URL, sent[r.URL])
		}
	}

	// Listings under way across a swap: half of one begun, and listings
	// running through the balancer while the webhook's change spreads.
	before, err := listing(context.Background(), lb.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	half := before[:len(before)/2]
	ctx, stopListing := context.WithCancel(context.Background())
	var during [][]page
	var duringErr []error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			l, err := listing(ctx, lb.URL, "")
			if ctx.Err() != nil {
				return
			}
			during, duringErr = append(during, l), append(duringErr, err)
		}
	}()
	gen1 := webhookToOne(t, remote, rs, "e2e-1", "Changed by the first push.")
	stopListing()
	wg.Wait()
	if gen1 == gen0 {
		t.Fatal("a push, the same generation name")
	}
	gens.record(t, rs[1].URL)
	moved := 0
	for i, l := range during {
		gens.check(t, l, 0)
		switch {
		case errors.Is(duringErr[i], errMoved):
			moved++
		case duringErr[i] != nil:
			t.Fatalf("a listing during the swap: %v", duringErr[i])
		}
	}
	t.Logf("%d listings during the swap: %d answered catalog changed, the others complete in one generation", len(during), moved)

	// The half listing continues through the balancer: the replicas keep
	// the superseded generation, so it ends as it began.
	rest, err := listing(context.Background(), lb.URL, half[len(half)-1].next)
	if err != nil && !errors.Is(err, errMoved) {
		t.Fatal(err)
	}
	gens.check(t, slices.Concat(half, rest), 0)

	// A replica that never held the first generation (started after the
	// swap, from git) answers its cursors "catalog changed", and continues
	// listings of the generation it holds.
	late := startDaemon(t, cfg, "")
	if got := late.Registry.Current().Name(); got != gen1 {
		t.Fatalf("a replica started after the swap serves %s, the others %s", got, gen1)
	}
	if _, err := fetchPage(context.Background(), late.URL, half[len(half)-1].next); !errors.Is(err, errMoved) {
		t.Fatalf("a cursor of generation %s at a replica that never held it: %v, want catalog changed", gen0, err)
	}
	firstNew := gens[gen1][0]
	if p, err := fetchPage(context.Background(), late.URL, firstNew.next); err != nil || p.body != gens[gen1][1].body {
		t.Fatalf("a cursor of generation %s at the late replica: %v %.200s", gen1, err, p.body)
	}

	// One replica stops and leaves the pool: the others keep serving, and
	// a webhook to one of them reaches the other.
	rs[2].Stop()
	rr.remove(rs[2].URL)
	for _, l := range paginate(t, lb.URL, 10, 2) {
		gens.check(t, l, 0)
	}
	gen2 := webhookToOne(t, remote, rs[:2], "e2e-2", "Changed by the second push.")
	if gen2 == gen1 {
		t.Fatal("a second push, the same generation name")
	}
	gens.record(t, rs[0].URL)
	for _, l := range paginate(t, lb.URL, 10, 2) {
		gens.check(t, l, 0)
		if generationOf(t, l[0]) != gen2 {
			t.Fatalf("a listing after the second swap in generation %s, want %s", generationOf(t, l[0]), gen2)
		}
	}
	if bytes.Contains([]byte(gens[gen2][0].body), []byte("Changed by the first push.")) {
		t.Fatal("the second generation still holds the first push's text")
	}
}
