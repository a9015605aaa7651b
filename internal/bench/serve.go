package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/skillreg/skillreg/internal/corpus"
)

var (
	binPath     = flag.String("bin", "bin/skillreg", "the skillreg binary to measure (make bench builds it)")
	serveFor    = flag.Duration("serve-duration", 8*time.Second, "how long each serve measurement runs (per side)")
	reuseCorpus = flag.String("corpus", "", "use this corpus directory (written by an earlier run with the same -skills) instead of generating one")
)

func init() {
	register("index", runIndex)
	register("serve", runServe)
}

// corpusDir writes the shared generated corpus once per bench run.
var corpusOnce struct {
	sync.Once
	dir   string
	files int
	bytes int64
	err   error
}

func corpusDir(env *Env) (string, int, int64, error) {
	corpusOnce.Do(func() {
		if *reuseCorpus != "" {
			corpusOnce.dir = *reuseCorpus
			corpusOnce.err = filepath.WalkDir(*reuseCorpus, func(_ string, de fs.DirEntry, err error) error {
				if err != nil || de.IsDir() {
					return err
				}
				info, err := de.Info()
				if err != nil {
					return err
				}
				corpusOnce.files++
				corpusOnce.bytes += info.Size()
				return nil
			})
			env.Log("corpus: reusing %s (%d files)", *reuseCorpus, corpusOnce.files)
			return
		}
		corpusOnce.dir = filepath.Join(env.Tmp, "corpus")
		start := time.Now()
		corpusOnce.files, corpusOnce.bytes, corpusOnce.err = corpus.Write(corpusOnce.dir, corpus.Options{Skills: env.Skills})
		env.Log("corpus: %d skills, %d files, %d MiB in %s", env.Skills, corpusOnce.files, corpusOnce.bytes>>20, time.Since(start).Round(time.Millisecond))
	})
	return corpusOnce.dir, corpusOnce.files, corpusOnce.bytes, corpusOnce.err
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func timeCmd(name string, args ...string) (time.Duration, error) {
	cmd := exec.Command(name, args...)
	cmd.Stdout = io.Discard
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("%s: %v: %s", name, err, stderr.String())
	}
	return time.Since(start), nil
}

// runIndex compares `skillreg index` on the corpus with sha256sum over the
// same files, rounds alternating, page cache warm for both.
func runIndex(env *Env) ([]Row, error) {
	dir, files, _, err := corpusDir(env)
	if err != nil {
		return nil, err
	}
	for _, tool := range []string{"sh", "find", "xargs", "sha256sum"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("index bench needs %s", tool)
		}
	}
	peer := []string{"-c", `find "$1" -type f -print0 | xargs -0 sha256sum >/dev/null`, "sh", dir}
	// Warm the page cache for both.
	if _, err := timeCmd("sh", peer...); err != nil {
		return nil, err
	}
	if _, err := timeCmd(*binPath, "index", dir); err != nil {
		return nil, err
	}
	var ours, theirs []time.Duration
	for range 5 {
		d, err := timeCmd(*binPath, "index", dir)
		if err != nil {
			return nil, err
		}
		ours = append(ours, d)
		d, err = timeCmd("sh", peer...)
		if err != nil {
			return nil, err
		}
		theirs = append(theirs, d)
	}
	o, p := median(ours), median(theirs)
	ratio := float64(o) / float64(p)
	return []Row{{
		Name:  fmt.Sprintf("index %d skills (%d files), median of 5", env.Skills, files),
		Ours:  o.Round(time.Millisecond).String(),
		Peer:  p.Round(time.Millisecond).String() + " (sha256sum)",
		Ratio: fmt.Sprintf("%.2fx", ratio),
		Goal:  "<= 1.30x",
		OK:    ratio <= 1.3,
	}}, nil
}

// daemon is a skillreg serve process started for a bench section.
type daemon struct {
	cmd  *exec.Cmd
	addr string
	log  *bytes.Buffer
}

var servingRE = regexp.MustCompile(`"msg":"serving","addr":"([^"]+)"`)

// startDaemon runs `skillreg serve` on a free loopback port with the given
// configuration and waits until /readyz answers 200.
func startDaemon(env *Env, name, config string) (*daemon, error) {
	return startDaemonOn(env, name, config, "127.0.0.1:0")
}

// startDaemonOn is startDaemon listening on listen, for daemons whose
// addresses must be known before they start (replicas naming each other).
func startDaemonOn(env *Env, name, config, listen string) (*daemon, error) {
	dir := filepath.Join(env.Tmp, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(*binPath, "serve", "--config", cfg, "--listen", listen, "--data", filepath.Join(dir, "data"))
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	d := &daemon{cmd: cmd, log: &bytes.Buffer{}}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			d.log.WriteString(line + "\n")
			if m := servingRE.FindStringSubmatch(line); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	select {
	case d.addr = <-found:
	case <-time.After(60 * time.Second):
		d.stop()
		return nil, fmt.Errorf("daemon did not start: %s", d.log.String())
	}
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + d.addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return d, nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	d.stop()
	return nil, errors.New("daemon not ready within 5 minutes")
}

// cpu returns the CPU time (user and system) the daemon has used so far,
// from /proc/<pid>/stat; 0 where there is no /proc.
func (d *daemon) cpu() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", d.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces) start at state.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	var ticks int64
	for _, s := range f[11:13] { // utime, stime
		var n int64
		fmt.Sscan(s, &n)
		ticks += n
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ is 100 on Linux
}

// rss returns the daemon's resident memory (VmRSS), or 0.
func (d *daemon) rss() int64 { return d.procStatusKB("VmRSS") }

// procStatusKB reads a "Name:  N kB" field of the daemon's
// /proc/PID/status, in bytes, or 0.
func (d *daemon) procStatusKB(name string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			var kb int64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
			return kb << 10
		}
	}
	return 0
}

func (d *daemon) stop() {
	_ = d.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { d.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = d.cmd.Process.Kill()
		<-done
	}
}

const meta2026 = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"}}`

// mcpRequest is one prepared stateless MCP request.
type mcpRequest struct {
	method, name, body string
}

func (r mcpRequest) do(c *http.Client, url string) ([]byte, error) {
	return r.doAs(c, url, "2026-07-28", "")
}

// doAs sends the request with a protocol version header and, for a
// 2025-11-25 session, its id.
func (r mcpRequest) doAs(c *http.Client, url, version, session string) ([]byte, error) {
	req, _ := http.NewRequest("POST", url, strings.NewReader(r.body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", version)
	req.Header.Set("Mcp-Method", r.method)
	if r.name != "" {
		req.Header.Set("Mcp-Name", r.name)
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("status %d: %.200s", resp.StatusCode, b)
	}
	return b, nil
}

func listReq(cursor string) mcpRequest { return stateless.listReq(cursor) }

// protocol is how a bench client talks to /mcp: a stateless 2026-07-28
// request carrying its _meta, or a request inside a 2025-11-25 session
// opened with initialize.
type protocol struct {
	name    string // for the table
	version string
	session bool
}

var (
	stateless = protocol{"stateless 2026-07-28", "2026-07-28", false}
	sessions  = protocol{"session 2025-11-25", "2025-11-25", true}
)

func (p protocol) params(rest string) string {
	if p.session {
		return strings.TrimPrefix(rest, ",")
	}
	return meta2026 + rest
}

func (p protocol) listReq(cursor string) mcpRequest {
	c := ""
	if cursor != "" {
		c = `,"cursor":"` + cursor + `"`
	}
	return mcpRequest{"skills/list", "", `{"jsonrpc":"2.0","id":1,"method":"skills/list","params":{` + p.params(c) + `}}`}
}

func (p protocol) readReq(uri string) mcpRequest {
	return mcpRequest{"resources/read", uri, `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{` + p.params(`,"uri":"`+uri+`"`) + `}}`}
}

func (p protocol) getReq(uri string) mcpRequest {
	return mcpRequest{"skills/get", "", `{"jsonrpc":"2.0","id":1,"method":"skills/get","params":{` + p.params(`,"uri":"`+uri+`"`) + `}}`}
}

func (p protocol) searchReq(query string) mcpRequest {
	q, _ := json.Marshal(query)
	return mcpRequest{"tools/call", "search_skills", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + p.params(`,"name":"search_skills","arguments":{"query":`+string(q)+`}`) + `}}`}
}

// client is one bench client of a protocol: for sessions, it opens its
// own with initialize and notifications/initialized.
type client struct {
	p       protocol
	c       *http.Client
	url     string
	session string
}

func (p protocol) connect(c *http.Client, url string) (*client, error) {
	cl := &client{p: p, c: c, url: url}
	if !p.session {
		return cl, nil
	}
	body := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + p.version + `","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	cl.session = resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || cl.session == "" {
		return nil, fmt.Errorf("initialize: status %d, session %q", resp.StatusCode, cl.session)
	}
	req, _ = http.NewRequest("POST", url, strings.NewReader(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", p.version)
	req.Header.Set("Mcp-Session-Id", cl.session)
	if resp, err = c.Do(req); err != nil {
		return nil, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("notifications/initialized: status %d", resp.StatusCode)
	}
	return cl, nil
}

func (cl *client) do(r mcpRequest) ([]byte, error) {
	return r.doAs(cl.c, cl.url, cl.p.version, cl.session)
}

// close ends the client's session, if it has one.
func (cl *client) close() {
	if cl.session == "" {
		return
	}
	req, _ := http.NewRequest("DELETE", cl.url, nil)
	req.Header.Set("MCP-Protocol-Version", cl.p.version)
	req.Header.Set("Mcp-Session-Id", cl.session)
	if resp, err := cl.c.Do(req); err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// loadRun runs a client per worker (worker(w) makes worker w's) for d and
// returns requests per second and the error count. Every completed request
// counts, so a long sequence (a full pagination) that the deadline cuts off
// still counts the pages it did.
func loadRun(workers int, d time.Duration, worker func(w int) func(c *http.Client, rnd *rand.Rand) (int, error)) (float64, int64) {
	var n, errs atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	tr := &http.Transport{MaxIdleConnsPerHost: workers, DialContext: (&net.Dialer{}).DialContext}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(w), 7))
			fn := worker(w)
			for ctx.Err() == nil {
				k, err := fn(c, rnd)
				if err != nil {
					errs.Add(1)
					continue
				}
				n.Add(int64(k))
			}
		}()
	}
	wg.Wait()
	return float64(n.Load()) / time.Since(start).Seconds(), errs.Load()
}

// runServe measures skills/list full-catalog pagination and resources/read
// over loopback against a minimal net/http server answering the very same
// bytes from memory (the ceiling of this machine's HTTP stack), for
// stateless 2026-07-28 requests and for requests in 2025-11-25 sessions.
// Each row also gives the daemon's CPU time per request (from /proc),
// which the other load on a shared machine disturbs far less than the
// throughput.
func runServe(env *Env) ([]Row, error) {
	dir, _, _, err := corpusDir(env)
	if err != nil {
		return nil, err
	}
	d, err := startDaemon(env, "serve", "sources:\n  - name: bench\n    dir: "+dir+"\n    poll: 0\n")
	if err != nil {
		return nil, err
	}
	defer d.stop()
	url := "http://" + d.addr + "/mcp"
	var rows []Row
	for _, p := range []protocol{stateless, sessions} {
		r, err := serveRows(env, d, url, p)
		if err != nil {
			return rows, fmt.Errorf("%s: %w", p.name, err)
		}
		rows = append(rows, r...)
	}
	return rows, nil
}

func serveRows(env *Env, d *daemon, url string, p protocol) ([]Row, error) {
	cl, err := p.connect(&http.Client{}, url)
	if err != nil {
		return nil, err
	}
	defer cl.close()

	// Record every page and every file answer, for the peer to replay.
	pages := map[string][]byte{}
	var cursors []string
	var uris []string
	cursor := ""
	for {
		b, err := cl.do(p.listReq(cursor))
		if err != nil {
			return nil, err
		}
		pages[cursor] = b
		cursors = append(cursors, cursor)
		var res struct {
			Result struct {
				Skills []struct {
					Resources []struct{ URI string } `json:"resources"`
				} `json:"skills"`
				NextCursor string `json:"nextCursor"`
			} `json:"result"`
		}
		if err := json.Unmarshal(b, &res); err != nil {
			return nil, err
		}
		for _, s := range res.Result.Skills {
			for _, r := range s.Resources {
				uris = append(uris, r.URI)
			}
		}
		if res.Result.NextCursor == "" {
			break
		}
		cursor = res.Result.NextCursor
	}
	files := map[string][]byte{}
	sample := uris
	if len(sample) > 2000 {
		sample = sample[:2000]
	}
	for _, u := range sample {
		b, err := cl.do(p.readReq(u))
		if err != nil {
			return nil, err
		}
		files[u] = b
	}
	env.Log("serve (%s): %d pages, %d files recorded", p.name, len(pages), len(files))

	peer := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m struct {
			Params struct {
				Cursor string `json:"cursor"`
				URI    string `json:"uri"`
			} `json:"params"`
		}
		_ = json.Unmarshal(body, &m)
		var b []byte
		if m.Params.URI != "" {
			b = files[m.Params.URI]
		} else {
			b = pages[m.Params.Cursor]
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	go peer.Serve(ln)
	defer peer.Close()
	peerURL := "http://" + ln.Addr().String() + "/mcp"

	const workers = 64
	dur := *serveFor
	// Each worker is one client (with its own session on 2025-11-25),
	// opened before the clock starts; a peer client has no session.
	type workerFunc = func(w int) func(*http.Client, *rand.Rand) (int, error)
	clientOf := func(u string, c *http.Client) (*client, error) {
		if u == peerURL {
			return &client{p: protocol{version: p.version}, c: c, url: u}, nil
		}
		return p.connect(c, u)
	}
	var opened []*client
	var mu sync.Mutex
	open := func(u string, c *http.Client) *client {
		cl, err := clientOf(u, c)
		if err != nil {
			env.Log("serve: %v", err)
			return nil
		}
		mu.Lock()
		opened = append(opened, cl)
		mu.Unlock()
		return cl
	}
	defer func() {
		for _, cl := range opened {
			cl.close()
		}
	}()
	listing := func(u string) workerFunc {
		return func(int) func(*http.Client, *rand.Rand) (int, error) {
			// Full-catalog paginations, one page per call, over and over.
			var cl *client
			page := 0
			return func(c *http.Client, _ *rand.Rand) (int, error) {
				if cl == nil {
					if cl = open(u, c); cl == nil {
						return 0, errors.New("no session")
					}
				}
				cur := cursors[page]
				page = (page + 1) % len(cursors)
				_, err := cl.do(p.listReq(cur))
				return 1, err
			}
		}
	}
	reading := func(u string) workerFunc {
		return func(int) func(*http.Client, *rand.Rand) (int, error) {
			var cl *client
			return func(c *http.Client, rnd *rand.Rand) (int, error) {
				if cl == nil {
					if cl = open(u, c); cl == nil {
						return 0, errors.New("no session")
					}
				}
				_, err := cl.do(p.readReq(sample[rnd.IntN(len(sample))]))
				return 1, err
			}
		}
	}
	var rows []Row
	for _, m := range []struct {
		name string
		fn   func(string) workerFunc
	}{{"skills/list", listing}, {"resources/read", reading}} {
		cpu0 := d.cpu()
		ours, oerr := loadRun(workers, dur, m.fn(url))
		cpuPer := time.Duration(float64(d.cpu()-cpu0) / (ours * dur.Seconds()))
		theirs, perr := loadRun(workers, dur, m.fn(peerURL))
		ratio := ours / theirs
		name := fmt.Sprintf("%s %s req/s (random files of %d skills), %d clients", p.name, m.name, env.Skills, workers)
		if m.name == "skills/list" {
			name = fmt.Sprintf("%s skills/list pages/s (full paginations, %d pages of 200), %d clients", p.name, len(cursors), workers)
		}
		rows = append(rows, Row{
			Name:  name,
			Ours:  fmt.Sprintf("%.0f/s (%d errors; daemon CPU %s/req)", ours, oerr, cpuPer.Round(time.Microsecond)),
			Peer:  fmt.Sprintf("%.0f/s (net/http, same bytes; %d errors)", theirs, perr),
			Ratio: fmt.Sprintf("%.2fx", ratio),
			Goal:  ">= 0.50x",
			OK:    ratio >= 0.5 && oerr == 0,
		})
	}
	return rows, nil
}
