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

var binPath = flag.String("bin", "bin/skillreg", "the skillreg binary to measure (make bench builds it)")

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
	dir := filepath.Join(env.Tmp, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(*binPath, "serve", "--config", cfg, "--listen", "127.0.0.1:0", "--data", filepath.Join(dir, "data"))
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
	req, _ := http.NewRequest("POST", url, strings.NewReader(r.body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", r.method)
	if r.name != "" {
		req.Header.Set("Mcp-Name", r.name)
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

func listReq(cursor string) mcpRequest {
	c := ""
	if cursor != "" {
		c = `,"cursor":"` + cursor + `"`
	}
	return mcpRequest{"skills/list", "", `{"jsonrpc":"2.0","id":1,"method":"skills/list","params":{` + meta2026 + c + `}}`}
}

func readReq(uri string) mcpRequest {
	return mcpRequest{"resources/read", uri, `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{` + meta2026 + `,"uri":"` + uri + `"}}`}
}

// loadRun runs fn from workers goroutines for d and returns requests per
// second and the error count.
func loadRun(workers int, d time.Duration, fn func(c *http.Client, rnd *rand.Rand) (int, error)) (float64, int64) {
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
// bytes from memory (the ceiling of this machine's HTTP stack).
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
	c := &http.Client{}

	// Record every page and every file answer, for the peer to replay.
	pages := map[string][]byte{}
	var cursors []string
	var uris []string
	cursor := ""
	for {
		b, err := listReq(cursor).do(c, url)
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
		b, err := readReq(u).do(c, url)
		if err != nil {
			return nil, err
		}
		files[u] = b
	}
	env.Log("serve: %d pages, %d files recorded", len(pages), len(files))

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

	const workers, dur = 64, 8 * time.Second
	listing := func(u string) func(*http.Client, *rand.Rand) (int, error) {
		return func(c *http.Client, _ *rand.Rand) (int, error) {
			// One full-catalog pagination per call.
			for _, cur := range cursors {
				if _, err := listReq(cur).do(c, u); err != nil {
					return 0, err
				}
			}
			return len(cursors), nil
		}
	}
	reading := func(u string) func(*http.Client, *rand.Rand) (int, error) {
		return func(c *http.Client, rnd *rand.Rand) (int, error) {
			_, err := readReq(sample[rnd.IntN(len(sample))]).do(c, u)
			return 1, err
		}
	}
	var rows []Row
	for _, m := range []struct {
		name string
		fn   func(string) func(*http.Client, *rand.Rand) (int, error)
	}{{"skills/list pages", listing}, {"resources/read", reading}} {
		ours, oerr := loadRun(workers, dur, m.fn(url))
		theirs, perr := loadRun(workers, dur, m.fn(peerURL))
		ratio := ours / theirs
		name := fmt.Sprintf("%s req/s, %d clients, %d skills", m.name, workers, env.Skills)
		if m.name == "skills/list pages" {
			name = fmt.Sprintf("skills/list req/s (full pagination: %d pages of 200), %d clients", len(cursors), workers)
		}
		rows = append(rows, Row{
			Name:  name,
			Ours:  fmt.Sprintf("%.0f/s (%d errors)", ours, oerr),
			Peer:  fmt.Sprintf("%.0f/s (net/http, same bytes; %d errors)", theirs, perr),
			Ratio: fmt.Sprintf("%.2fx", ratio),
			Goal:  ">= 0.50x",
			OK:    ratio >= 0.5 && oerr == 0,
		})
	}
	return rows, nil
}
