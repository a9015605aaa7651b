package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-github/v60/github"
	"github.com/labstack/echo/v4"

	"github.com/skillreg/skillreg/gitref"
	"github.com/skillreg/skillreg/webhook"
)

func init() { register("webhook", runWebhook) }

const (
	webhookConcurrency = 64
	webhookWarmup      = 2000
	webhookPerRound    = 3000
	webhookRounds      = 9
	webhookSecret      = "bench secret"
)

// runWebhook measures the webhook endpoint's own answer time: signed push
// deliveries, 64 at a time over loopback HTTP, answered by the real echo
// handler (signature check, parse, match, delivery log, a no-op Syncer)
// against a minimal net/http handler that only reads the body and answers
// 202. The two servers are measured in alternating rounds so that machine
// noise falls on both.
func runWebhook(env *Env) ([]Row, error) {
	body, err := benchPushPayload()
	if err != nil {
		return nil, err
	}
	mac := hmac.New(sha256.New, []byte(webhookSecret))
	mac.Write(body)
	sig := "sha256=" + hex.EncodeToString(mac.Sum(nil))

	h, err := webhook.New(webhook.Options{
		Secrets: []string{webhookSecret},
		Sources: benchSources{{Source: "skills", Repo: benchRepo, Pin: gitref.Pin{Kind: gitref.Branch, Value: "main"}}},
		Syncer:  noopSyncer{},
	})
	if err != nil {
		return nil, err
	}
	defer h.Close()
	e := echo.New()
	h.Register(e)
	ours, err := serveLoopback(e)
	if err != nil {
		return nil, err
	}
	defer ours.close()
	peer, err := serveLoopback(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusAccepted)
	}))
	if err != nil {
		return nil, err
	}
	defer peer.close()

	client := &http.Client{Transport: &http.Transport{
		MaxIdleConns:        2 * webhookConcurrency,
		MaxIdleConnsPerHost: webhookConcurrency,
		MaxConnsPerHost:     webhookConcurrency,
	}}
	defer client.CloseIdleConnections()
	var seq atomic.Int64
	shoot := func(url string, n int) (load, error) {
		return fire(client, url, body, sig, n, &seq)
	}

	env.Log("webhook: %d-byte push payload, %d concurrent, %d alternating rounds of %d per server",
		len(body), webhookConcurrency, webhookRounds, webhookPerRound)
	for _, url := range []string{peer.url, ours.url} {
		if _, err := shoot(url, webhookWarmup); err != nil {
			return nil, err
		}
	}
	// Per-round figures, then the median round: one noisy round (the
	// machine is shared) moves the median much less than a pooled p99.
	var our, their rounds
	for range webhookRounds {
		p, err := shoot(peer.url, webhookPerRound)
		if err != nil {
			return nil, err
		}
		o, err := shoot(ours.url, webhookPerRound)
		if err != nil {
			return nil, err
		}
		their.add(p)
		our.add(o)
	}

	p50o, p99o, rateO := our.median()
	p50p, p99p, rateP := their.median()
	const p99Goal = 100 * time.Millisecond
	return []Row{
		{
			Name:  "webhook answer p50, 64 concurrent signed pushes",
			Ours:  ms(p50o),
			Peer:  ms(p50p) + " (net/http: read body, 202)",
			Ratio: fmt.Sprintf("%.2fx", float64(p50o)/float64(p50p)),
			Goal:  "answers at once (see p99)",
			OK:    true,
		},
		{
			Name:  "webhook answer p99, 64 concurrent signed pushes",
			Ours:  ms(p99o),
			Peer:  ms(p99p) + " (net/http: read body, 202)",
			Ratio: fmt.Sprintf("%.2fx", float64(p99o)/float64(p99p)),
			Goal:  "< " + ms(p99Goal) + " (a tenth of the 1 s push-to-visible budget)",
			OK:    p99o < p99Goal,
		},
		{
			Name:  "webhook deliveries/s, 64 concurrent",
			Ours:  fmt.Sprintf("%.0f/s", rateO),
			Peer:  fmt.Sprintf("%.0f/s", rateP),
			Ratio: fmt.Sprintf("%.2fx", rateO/rateP),
			Goal:  "none (for scale)",
			OK:    true,
		},
	}, nil
}

// rounds keeps each round's p50, p99 and rate.
type rounds struct {
	p50, p99 []time.Duration
	rate     []float64
}

func (r *rounds) add(l load) {
	r.p50 = append(r.p50, l.quantile(0.50))
	r.p99 = append(r.p99, l.quantile(0.99))
	r.rate = append(r.rate, l.rate())
}

// median returns the median round's p50, p99 and rate, each taken
// separately.
func (r *rounds) median() (p50, p99 time.Duration, rate float64) {
	return medianOf(r.p50), medianOf(r.p99), medianOf(r.rate)
}

func medianOf[T int64 | time.Duration | float64](v []T) T {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		var zero T
		return zero
	}
	return s[len(s)/2]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

// load is the latencies and wall time of one round.
type load struct {
	lat  []time.Duration
	wall time.Duration
}

func (l *load) quantile(q float64) time.Duration {
	s := slices.Clone(l.lat)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func (l *load) rate() float64 { return float64(len(l.lat)) / l.wall.Seconds() }

// fire sends n signed deliveries from webhookConcurrency workers, each with
// its own delivery id, and times each answer.
func fire(client *http.Client, url string, body []byte, sig string, n int, seq *atomic.Int64) (load, error) {
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		lat     = make([]time.Duration, 0, n)
		firstEr error
		next    atomic.Int64
	)
	start := time.Now()
	for range webhookConcurrency {
		wg.Go(func() {
			mine := make([]time.Duration, 0, n/webhookConcurrency+1)
			for next.Add(1) <= int64(n) {
				req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
				if err != nil {
					mu.Lock()
					firstEr = cmpErr(firstEr, err)
					mu.Unlock()
					return
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-GitHub-Event", "push")
				req.Header.Set("X-GitHub-Delivery", "bench-"+strconv.FormatInt(seq.Add(1), 10))
				req.Header.Set("X-Hub-Signature-256", sig)
				t0 := time.Now()
				resp, err := client.Do(req)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err == nil && resp.StatusCode != http.StatusAccepted {
						err = fmt.Errorf("%s: status %d, want 202", url, resp.StatusCode)
					}
				}
				if err != nil {
					mu.Lock()
					firstEr = cmpErr(firstEr, err)
					mu.Unlock()
					return
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return load{lat: lat, wall: time.Since(start)}, firstEr
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

type loopbackServer struct {
	srv *http.Server
	url string
}

func serveLoopback(h http.Handler) (*loopbackServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	s := &loopbackServer{srv: &http.Server{Handler: h}, url: "http://" + ln.Addr().String() + webhook.Path}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			panic(err)
		}
	}()
	return s, nil
}

func (s *loopbackServer) close() { s.srv.Shutdown(context.Background()) }

type benchSources []webhook.Target

var benchRepo, _ = gitref.ParseRepo("https://github.com/skillreg/bench-skills.git")

func (s benchSources) Targets() []webhook.Target { return s }

type noopSyncer struct{}

func (noopSyncer) RequestSync(string, string) {}

// benchPushPayload builds a push payload of the usual size and shape (three
// commits, the full repository object) for the bench source's main branch.
func benchPushPayload() ([]byte, error) {
	s := github.String
	ts := &github.Timestamp{Time: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	var commits []*github.HeadCommit
	for i := range 3 {
		id := fmt.Sprintf("%040x", i+1)
		commits = append(commits, &github.HeadCommit{
			ID: s(id), TreeID: s(id), Distinct: github.Bool(true),
			Message:   s(fmt.Sprintf("skills: update skill-%05d instructions and examples", i)),
			Timestamp: ts,
			URL:       s("https://github.com/skillreg/bench-skills/commit/" + id),
			Author:    &github.CommitAuthor{Name: s("Bench Author"), Email: s("bench@example.com"), Login: s("bench")},
			Committer: &github.CommitAuthor{Name: s("Bench Author"), Email: s("bench@example.com"), Login: s("bench")},
			Added:     []string{fmt.Sprintf("skills/g%02d/skill-%05d/reference.md", i, i)},
			Modified:  []string{fmt.Sprintf("skills/g%02d/skill-%05d/SKILL.md", i, i)},
			Removed:   []string{},
		})
	}
	repo := &github.PushEventRepository{
		ID: github.Int64(186853002), NodeID: s("MDEwOlJlcG9zaXRvcnkxODY4NTMwMDI="),
		Name: s("bench-skills"), FullName: s("skillreg/bench-skills"),
		Owner:       &github.User{Login: s("skillreg"), ID: github.Int64(21031067), Type: s("Organization"), HTMLURL: s("https://github.com/skillreg")},
		Private:     github.Bool(false),
		Description: s("Agent Skills for the whole organisation"),
		Fork:        github.Bool(false), CreatedAt: ts, PushedAt: ts, UpdatedAt: ts,
		Homepage: s(""), PullsURL: s("https://api.github.com/repos/skillreg/bench-skills/pulls{/number}"),
		Size: github.Int(4096), StargazersCount: github.Int(42), WatchersCount: github.Int(42),
		Language: s("Markdown"), HasIssues: github.Bool(true), HasDownloads: github.Bool(true),
		HasWiki: github.Bool(false), HasPages: github.Bool(false), ForksCount: github.Int(3),
		OpenIssuesCount: github.Int(1), DefaultBranch: s("main"), MasterBranch: s("main"),
		Organization: s("skillreg"),
		URL:          s("https://github.com/skillreg/bench-skills"),
		ArchiveURL:   s("https://api.github.com/repos/skillreg/bench-skills/{archive_format}{/ref}"),
		HTMLURL:      s("https://github.com/skillreg/bench-skills"),
		StatusesURL:  s("https://api.github.com/repos/skillreg/bench-skills/statuses/{sha}"),
		GitURL:       s("git://github.com/skillreg/bench-skills.git"),
		SSHURL:       s("git@github.com:skillreg/bench-skills.git"),
		CloneURL:     s("https://github.com/skillreg/bench-skills.git"),
		SVNURL:       s("https://github.com/skillreg/bench-skills"),
		Topics:       []string{"agent-skills", "mcp"},
	}
	ev := &github.PushEvent{
		Ref: s("refs/heads/main"), Before: s(fmt.Sprintf("%040x", 0xbef)), After: s(fmt.Sprintf("%040x", 3)),
		Created: github.Bool(false), Deleted: github.Bool(false), Forced: github.Bool(false),
		Compare:    s("https://github.com/skillreg/bench-skills/compare/000000000000...000000000003"),
		Commits:    commits,
		HeadCommit: commits[len(commits)-1],
		Repo:       repo,
		Pusher:     &github.CommitAuthor{Name: s("bench"), Email: s("bench@example.com")},
		Sender:     &github.User{Login: s("bench"), ID: github.Int64(1), Type: s("User"), HTMLURL: s("https://github.com/bench")},
	}
	return json.Marshal(ev)
}
