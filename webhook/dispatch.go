package webhook

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// requestSyncs asks the Syncer for a sync of each source, unless the
// handler is closed: the daemon closes it on its way down, and a request
// handed to a registry that is stopping would only start a sync that is
// cancelled at once. The Syncer's queue is the one place that coalesces
// requests, so every one is passed on as it comes.
func (h *Handler) requestSyncs(sources []string, reason string) {
	if len(sources) == 0 {
		return
	}
	if h.closed.Load() || h.stop.Err() != nil {
		h.logger.Debug("webhook closed, sync request dropped", "sources", sources)
		return
	}
	for _, s := range sources {
		h.syncer.RequestSync(s, reason)
	}
}

// refresher runs Releases.Refresh in the background, at most one goroutine
// per repository: a refresh asked for while one runs is merged into one
// follow-up. After each refresh it asks for the syncs that depend on the
// refreshed release (sources pinned to release: latest), so they resolve
// the new latest release rather than the stale one. A refresh cut short by
// Close or by Options.Context asks for nothing; Drain cuts none short.
type refresher struct {
	releases Releases
	request  func(sources []string, reason string)
	logger   *slog.Logger
	timeout  time.Duration
	ctx      context.Context

	mu      sync.Mutex
	running map[string]*refreshJob // by lower-case repo
	idle    *sync.Cond             // on mu: broadcast when running empties
}

type refreshJob struct {
	repo    string
	again   bool
	sources map[string]string // source -> reason, synced after the refresh
}

// schedule asks for a refresh of repo followed by a sync of sources; it
// returns at once.
func (r *refresher) schedule(repo string, sources []string, reason string) {
	key := strings.ToLower(repo)
	r.mu.Lock()
	defer r.mu.Unlock()
	job, ok := r.running[key]
	if ok {
		job.again = true
	} else {
		job = &refreshJob{repo: repo, sources: make(map[string]string)}
		r.running[key] = job
		go r.run(key, job)
	}
	for _, s := range sources {
		job.sources[s] = reason
	}
}

func (r *refresher) run(key string, job *refreshJob) {
	for {
		r.mu.Lock()
		sources := job.sources
		job.sources, job.again = make(map[string]string), false
		r.mu.Unlock()

		if r.ctx.Err() == nil {
			start := time.Now()
			ctx, cancel := context.WithTimeout(r.ctx, r.timeout)
			err := r.releases.Refresh(ctx, job.repo)
			cancel()
			if err != nil {
				r.logger.Warn("release refresh failed", "repo", job.repo, "dur", time.Since(start), "err", err)
			} else {
				r.logger.Debug("release refreshed", "repo", job.repo, "dur", time.Since(start))
			}
		}
		if r.ctx.Err() == nil {
			for _, s := range slices.Sorted(maps.Keys(sources)) {
				r.request([]string{s}, sources[s])
			}
		}

		r.mu.Lock()
		if !job.again {
			delete(r.running, key)
			if len(r.running) == 0 {
				r.idle.Broadcast()
			}
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
	}
}

// wait returns once no refresh runs.
func (r *refresher) wait() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for len(r.running) > 0 {
		r.idle.Wait()
	}
}
