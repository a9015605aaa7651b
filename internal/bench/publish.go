package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"time"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/publish"
	"github.com/skillreg/skillreg/registry"
)

func init() { register("publish", runPublish) }

// runPublish measures the installers' endpoints: the cost of digesting
// every skill's archive (what a generation's first index request waits
// for) and every plugin archive (the marketplace's) beside the cold index
// of the same corpus, then index and artifact requests per second against
// the daemon beside net/http answering the very same bytes.
func runPublish(env *Env) ([]Row, error) {
	dir, files, _, err := corpusDir(env)
	if err != nil {
		return nil, err
	}
	// In process: the cold index (a first sync of the corpus), then the
	// publisher's first pass over that generation (every skill archive
	// digested), then the marketplace's (every plugin archive).
	reg := registry.New(registry.Options{})
	reg.SetSources([]catalog.Source{{Name: "bench", Kind: catalog.KindDir, Dir: dir}})
	start := time.Now()
	if err := reg.SyncNow(context.Background(), "bench"); err != nil {
		return nil, err
	}
	cold := time.Since(start)
	pub, err := publish.New(publish.Options{Catalog: reg})
	if err != nil {
		return nil, err
	}
	start = time.Now()
	pub.Warm()
	buildIdx := time.Since(start)
	start = time.Now()
	notes := pub.Notes(context.Background(), catalog.Filter{}, "") // digests the plugin archives
	buildMP := time.Since(start)
	env.Log("publish: cold index %s, skill archives %s, plugin archives %s, %d notes", cold, buildIdx, buildMP, len(notes))
	rows := []Row{
		{
			Name:  fmt.Sprintf("publish: digest every skill archive of %d skills (%d files), beside the cold index", env.Skills, files),
			Ours:  buildIdx.Round(time.Millisecond).String(),
			Peer:  cold.Round(time.Millisecond).String() + " (cold index: first sync)",
			Ratio: fmt.Sprintf("%.2fx", float64(buildIdx)/float64(cold)),
			Goal:  "< 1.00x",
			OK:    buildIdx < cold,
		},
		{
			Name:  fmt.Sprintf("publish: digest every plugin archive (%d skills + 1 of all), beside the cold index", env.Skills),
			Ours:  buildMP.Round(time.Millisecond).String(),
			Peer:  cold.Round(time.Millisecond).String() + " (cold index: first sync)",
			Ratio: fmt.Sprintf("%.2fx", float64(buildMP)/float64(cold)),
			Goal:  "< 1.00x",
			OK:    buildMP < cold,
		},
	}

	d, err := startDaemon(env, "publish", "sources:\n  - name: bench\n    dir: "+dir+"\n    poll: 0\n")
	if err != nil {
		return rows, err
	}
	defer d.stop()
	base := "http://" + d.addr
	indexBody, err := get(base + "/.well-known/agent-skills/index.json")
	if err != nil {
		return rows, err
	}
	var index struct {
		Skills []struct{ URL string } `json:"skills"`
	}
	if err := json.Unmarshal(indexBody, &index); err != nil {
		return rows, err
	}
	if len(index.Skills) == 0 {
		return rows, fmt.Errorf("empty index")
	}

	// Record the bytes for the peer: the index and a sample of artifacts.
	sample := index.Skills
	if len(sample) > 2000 {
		sample = sample[:2000]
	}
	recorded := map[string][]byte{"/.well-known/agent-skills/index.json": indexBody}
	var paths []string
	for _, s := range sample {
		b, err := get(base + s.URL)
		if err != nil {
			return rows, err
		}
		recorded[s.URL] = b
		paths = append(paths, s.URL)
	}
	peer := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := recorded[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(b)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return rows, err
	}
	go peer.Serve(ln)
	defer peer.Close()
	peerBase := "http://" + ln.Addr().String()

	const workers = 64
	fetch := func(c *http.Client, url string) (int, error) {
		res, err := c.Get(url)
		if err != nil {
			return 0, err
		}
		_, err = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			return 0, fmt.Errorf("%s: %d", url, res.StatusCode)
		}
		return 1, err
	}
	for _, m := range []struct {
		name string
		path func(*rand.Rand) string
	}{
		{fmt.Sprintf("publish: GET the v0.2 index of %d skills (%d KiB) req/s, %d clients", len(index.Skills), len(indexBody)>>10, workers),
			func(*rand.Rand) string { return "/.well-known/agent-skills/index.json" }},
		{fmt.Sprintf("publish: GET random artifacts (of %d) req/s, %d clients", len(paths), workers),
			func(r *rand.Rand) string { return paths[r.IntN(len(paths))] }},
	} {
		run := func(b string) func(int) func(*http.Client, *rand.Rand) (int, error) {
			return func(int) func(*http.Client, *rand.Rand) (int, error) {
				return func(c *http.Client, r *rand.Rand) (int, error) { return fetch(c, b+m.path(r)) }
			}
		}
		ours, oerr := loadRun(workers, *serveFor, run(base))
		theirs, perr := loadRun(workers, *serveFor, run(peerBase))
		ratio := ours / theirs
		rows = append(rows, Row{
			Name:  m.name,
			Ours:  fmt.Sprintf("%.0f/s (%d errors)", ours, oerr),
			Peer:  fmt.Sprintf("%.0f/s (net/http, same bytes; %d errors)", theirs, perr),
			Ratio: fmt.Sprintf("%.2fx", ratio),
			Goal:  ">= 0.50x",
			OK:    ratio >= 0.5 && oerr == 0,
		})
	}
	return rows, nil
}

// get fetches a URL and fails on anything but 200.
func get(url string) ([]byte, error) {
	res, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != 200 {
		return nil, fmt.Errorf("GET %s: %d %s", url, res.StatusCode, b)
	}
	return b, nil
}
