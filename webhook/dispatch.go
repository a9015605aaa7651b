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

// syncQueue hands sync requests to the Syncer from one goroutine, so a slow
// Syncer never holds up a webhook answer. Requests for a source that is
// already pending are merged (the latest reason wins), which keeps the queue
// at most one entry per source however many deliveries arrive.
type syncQueue struct {
	syncer Syncer
	logger *slog.Logger

	mu      sync.Mutex
	pending map[string]string // source -> reason
	order   []string          // pending sources, first asked first
	closed  bool

	wake chan struct{} // capacity 1: "there is work"
	done chan struct{} // closed when run returns
}

func newSyncQueue(s Syncer, logger *slog.Logger) *syncQueue {
	q := &syncQueue{
		syncer:  s,
		logger:  logger,
		pending: make(map[string]string),
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
	go q.run()
	return q
}

// add asks for a sync of each source; it never blocks on the Syncer.
func (q *syncQueue) add(sources []string, reason string) {
	if len(sources) == 0 {
		return
	}
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		q.logger.Debug("webhook closed, sync request dropped", "sources", sources)
		return
	}
	for _, s := range sources {
		if _, ok := q.pending[s]; !ok {
			q.order = append(q.order, s)
		}
		q.pending[s] = reason
	}
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default: // already woken; run will see the new entries
	}
}

func (q *syncQueue) run() {
	defer close(q.done)
	for range q.wake {
		for {
			q.mu.Lock()
			order, pending, closed := q.order, q.pending, q.closed
			q.order, q.pending = nil, make(map[string]string)
			q.mu.Unlock()
			if len(order) == 0 {
				if closed {
					return
				}
				break
			}
			for _, s := range order {
				q.syncer.RequestSync(s, pending[s])
			}
		}
	}
}

// close stops accepting requests, hands the pending ones to the Syncer and
// waits until that is done.
func (q *syncQueue) close() {
	q.mu.Lock()
	already := q.closed
	q.closed = true
	q.mu.Unlock()
	if !already {
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
	<-q.done
}

// refresher runs Releases.Refresh in the background, at most one goroutine
// per repository: a refresh asked for while one runs is merged into one
// follow-up. After each refresh it asks for the syncs that depend on the
// refreshed release (sources pinned to release: latest), so they resolve
// the new latest release rather than the stale one.
type refresher struct {
	releases Releases
	queue    *syncQueue
	logger   *slog.Logger
	timeout  time.Duration
	ctx      context.Context

	mu      sync.Mutex
	running map[string]*refreshJob // by lower-case repo
	wg      sync.WaitGroup
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
		r.wg.Add(1)
		go r.run(key, job)
	}
	for _, s := range sources {
		job.sources[s] = reason
	}
}

func (r *refresher) run(key string, job *refreshJob) {
	defer r.wg.Done()
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
		for _, s := range slices.Sorted(maps.Keys(sources)) {
			r.queue.add([]string{s}, sources[s])
		}

		r.mu.Lock()
		if !job.again {
			delete(r.running, key)
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
	}
}

// wait returns once no refresh runs.
func (r *refresher) wait() { r.wg.Wait() }
