package registry

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/gitstore"
)

// countStore counts the registry's store writes.
type countStore struct {
	mu      sync.Mutex
	states  []catalog.State
	snaps   int
	deletes int
}

func (s *countStore) SaveSnapshot(_ *catalog.Snapshot, st catalog.State) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snaps++
	s.states = append(s.states, st)
	return nil
}

func (s *countStore) SaveState(st catalog.State) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.states = append(s.states, st)
	return nil
}

func (s *countStore) DeleteSource(string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deletes++
	return nil
}

func (s *countStore) writes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.states)
}

// countLog counts log records at each level, by message.
type countLog struct {
	mu sync.Mutex
	n  map[slog.Level]map[string]int
}

func (h *countLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *countLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *countLog) WithGroup(string) slog.Handler            { return h }
func (h *countLog) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == nil {
		h.n = map[slog.Level]map[string]int{}
	}
	if h.n[r.Level] == nil {
		h.n[r.Level] = map[string]int{}
	}
	h.n[r.Level][r.Message]++
	return nil
}

func (h *countLog) count(l slog.Level, msg string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n[l][msg]
}

// countMetrics counts finished syncs by result.
type countMetrics struct {
	mu sync.Mutex
	n  map[string]int
}

func (m *countMetrics) SyncFinished(_, result string, _ time.Duration, _ *catalog.Snapshot) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.n == nil {
		m.n = map[string]int{}
	}
	m.n[result]++
}

func (m *countMetrics) count(result string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n[result]
}

// TestStallRepeatedIsQuiet: a stalled source with a short poll (a missing
// directory is polled every two seconds by default) is tried at each
// poll, but the same stall again is not a new outcome: it is not logged
// as an error, stored or counted again at every poll, forever. A stall
// with another error is recorded as usual.
func TestStallRepeatedIsQuiet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		git := &fakeGit{}
		st, logs, met := &countStore{}, &countLog{}, &countMetrics{}
		r := New(Options{gitRepos: git.Repo, Store: st, Logger: slog.New(logs), Metrics: met})
		repo := &fakeRepo{fail: fmt.Errorf("list refs: %w: HTTP 401 Unauthorized", gitstore.ErrAuth)}
		src := git.add("team", repo)
		src.Poll = 2 * time.Second
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		r.SetSources([]catalog.Source{src})
		go r.Run(ctx)
		time.Sleep(time.Minute)
		synctest.Wait()

		const stalled = "sync stalled; not retried until something changes"
		if n := len(repo.Listings()); n < 20 {
			t.Fatalf("%d attempts in a minute at a 2-second poll", n)
		}
		if n := logs.count(slog.LevelError, stalled); n != 1 {
			t.Errorf("%d error lines for one stall, want 1", n)
		}
		if n := st.writes(); n != 1 {
			t.Errorf("%d store writes for one stall, want 1", n)
		}
		if n := met.count(catalog.ResultStalled); n != 1 {
			t.Errorf("the stall counted %d times, want once", n)
		}
		if s := stateOf(r, "team"); s.Failures != 1 || s.Stalled != catalog.StallAuthRefused {
			t.Errorf("state %+v, want one failure, stalled", s)
		}

		// Another error: a new outcome, recorded.
		repo.mu.Lock()
		repo.fail = fmt.Errorf("list refs: %w: HTTP 403 Forbidden", gitstore.ErrAuth)
		repo.mu.Unlock()
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := logs.count(slog.LevelError, stalled); n != 2 {
			t.Errorf("%d error lines after the error changed, want 2", n)
		}
		if n := st.writes(); n != 2 {
			t.Errorf("%d store writes after the error changed, want 2", n)
		}
		if s := stateOf(r, "team"); s.Failures != 2 || s.LastError == "" {
			t.Errorf("state %+v, want two failures", s)
		}
	})
}
