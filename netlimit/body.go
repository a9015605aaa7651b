package netlimit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"
)

// Defaults of body reading.
const (
	// DefaultBudget is how many body bytes all requests together may hold.
	DefaultBudget int64 = 64 << 20
	// DefaultBudgetWait is how long a request waits for budget before it
	// is refused with 503.
	DefaultBudgetWait = time.Second
	// DefaultBodyGrace is how long a body may take before DefaultMinRate
	// applies to it.
	DefaultBodyGrace = 10 * time.Second
	// DefaultMinRate is the slowest a body may arrive after its grace, in
	// bytes per second.
	DefaultMinRate int64 = 1 << 10
	// firstChunk is the first buffer a body gets, whatever its
	// Content-Length claims; buffers then double as bytes arrive.
	firstChunk = 512
)

// Errors of reading a body.
var (
	// ErrBusy means the body budget stayed exhausted for as long as the
	// request could wait: answer 503 with Retry-After.
	ErrBusy = errors.New("too many request bodies in flight")
	// ErrTooLarge means the body is over its limit: answer 413.
	ErrTooLarge = errors.New("request body too large")
	// ErrTooSlow means the body arrived slower than its policy allows:
	// answer 408.
	ErrTooSlow = errors.New("request body too slow")
)

// Budget bounds the bytes that request bodies hold in memory, across all
// requests: each body's buffer is paid for before it grows.
type Budget struct {
	used atomic.Int64
	sem  *semaphore.Weighted
	size int64
	wait time.Duration
}

// NewBudget returns a budget of size bytes (default DefaultBudget); a
// request waits at most wait for its next growth (default
// DefaultBudgetWait).
func NewBudget(size int64, wait time.Duration) *Budget {
	if size <= 0 {
		size = DefaultBudget
	}
	if wait <= 0 {
		wait = DefaultBudgetWait
	}
	return &Budget{sem: semaphore.NewWeighted(size), size: size, wait: wait}
}

// InUse is how many bytes bodies hold now.
func (b *Budget) InUse() int64 { return b.used.Load() }

// Size is the budget in bytes.
func (b *Budget) Size() int64 { return b.size }

// RetryAfter is the Retry-After value, in seconds, for an ErrBusy answer.
func (b *Budget) RetryAfter() string {
	if b == nil {
		return "1"
	}
	return strconv.Itoa(max(1, int(b.wait.Seconds()+0.5)))
}

func (b *Budget) acquire(ctx context.Context, n int64) error {
	if n > b.size {
		return ErrBusy
	}
	if !b.sem.TryAcquire(n) {
		ctx, cancel := context.WithTimeout(ctx, b.wait)
		defer cancel()
		if err := b.sem.Acquire(ctx, n); err != nil {
			return ErrBusy
		}
	}
	b.used.Add(n)
	return nil
}

func (b *Budget) release(n int64) {
	b.used.Add(-n)
	b.sem.Release(n)
}

// ReadAll reads r to its end into a buffer that grows only as bytes
// arrive, paying the budget for every growth (b nil reads unbudgeted).
// A body of more than limit bytes fails with ErrTooLarge, one that cannot
// get budget in time with ErrBusy; a read error is returned wrapped. The
// caller calls release once it no longer needs the bytes (also on error;
// release may be called more than once).
func (b *Budget) ReadAll(ctx context.Context, r io.Reader, limit int64) (data []byte, release func(), err error) {
	var held int64
	release = func() {
		if b != nil && held > 0 {
			b.release(held)
			held = 0
		}
	}
	grow := func(buf []byte) ([]byte, error) {
		next := int64(max(2*cap(buf), firstChunk))
		next = min(next, limit+1) // one byte past the limit tells a long body
		if b != nil {
			if err := b.acquire(ctx, next); err != nil {
				return buf, err
			}
			held += next
		}
		nb := make([]byte, len(buf), next)
		copy(nb, buf)
		if b != nil && cap(buf) > 0 {
			// The old buffer is garbage now.
			b.release(int64(cap(buf)))
			held -= int64(cap(buf))
		}
		return nb, nil
	}
	var buf []byte
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) > limit {
				return nil, release, ErrTooLarge
			}
			if buf, err = grow(buf); err != nil {
				return nil, release, err
			}
		}
		n, rerr := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return nil, release, ErrTooLarge
		}
		if rerr == io.EOF {
			return buf, release, nil
		}
		if rerr != nil {
			if _, ok := errors.AsType[*http.MaxBytesError](rerr); ok {
				return nil, release, ErrTooLarge
			}
			return nil, release, rerr
		}
	}
}

// BodyPolicy is how one kind of request may send its body.
type BodyPolicy struct {
	// Limit is the largest body; over it the answer is 413.
	Limit int64
	// Grace is how long the body may take before MinRate applies
	// (default DefaultBodyGrace).
	Grace time.Duration
	// MinRate is the slowest the body may arrive after Grace, in bytes
	// per second (default DefaultMinRate).
	MinRate int64
	// Buffer reads the whole body, from the budget, before the handler
	// runs; otherwise the handler reads it (from the budget itself, say
	// with Budget.ReadAll) and only the rate is enforced here.
	Buffer bool
}

// Bodies enforces a policy on every request body: it must arrive at
// policy's pace (the connection is cut otherwise), and bodies the policy
// buffers are read from the budget first, with 503 and Retry-After when it
// is exhausted, 413 over the limit, 408 when too slow.
func Bodies(budget *Budget, policy func(*http.Request) BodyPolicy, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		p := policy(r)
		if p.Limit > 0 && r.ContentLength > p.Limit {
			w.Header().Set("Connection", "close")
			http.Error(w, ErrTooLarge.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		rc := http.NewResponseController(w)
		pr := &paceReader{r: r.Body, rc: rc, start: time.Now(), p: p.withDefaults()}
		// A deadline from the start: a handler that never reads the body
		// leaves it to the server to drain, which must not wait forever.
		// It stays set until the body is in (the drain of a half-read body
		// is cut by it too).
		pr.deadline()
		if !p.Buffer {
			r.Body = pr
			next.ServeHTTP(w, r)
			return
		}
		data, release, err := budget.ReadAll(r.Context(), pr, p.Limit)
		defer release()
		if err != nil {
			WriteError(w, budget, err)
			return
		}
		r.Body = &Buffered{Reader: bytes.NewReader(data), data: data}
		next.ServeHTTP(w, r)
	})
}

// Buffered is a request body Bodies has read into memory, paid from the
// budget. A handler that needs the bytes whole takes them with Bytes
// instead of copying them again outside the budget.
type Buffered struct {
	*bytes.Reader
	data []byte
}

// Bytes is the whole body, whatever has been read of it. The caller must
// not modify it.
func (b *Buffered) Bytes() []byte { return b.data }

// Close does nothing: the bytes are released when the handler returns.
func (b *Buffered) Close() error { return nil }

// WriteError answers a body that could not be read, in the one place that
// maps ReadAll's and Bodies' errors to HTTP.
func WriteError(w http.ResponseWriter, budget *Budget, err error) {
	w.Header().Set("Connection", "close")
	switch {
	case errors.Is(err, ErrBusy):
		ra := "1"
		if budget != nil {
			ra = budget.RetryAfter()
		}
		w.Header().Set("Retry-After", ra)
		http.Error(w, ErrBusy.Error(), http.StatusServiceUnavailable)
	case errors.Is(err, ErrTooLarge):
		http.Error(w, ErrTooLarge.Error(), http.StatusRequestEntityTooLarge)
	case errors.Is(err, ErrTooSlow):
		http.Error(w, ErrTooSlow.Error(), http.StatusRequestTimeout)
	default:
		http.Error(w, "request body unreadable", http.StatusBadRequest)
	}
}

func (p BodyPolicy) withDefaults() BodyPolicy {
	if p.Grace <= 0 {
		p.Grace = DefaultBodyGrace
	}
	if p.MinRate <= 0 {
		p.MinRate = DefaultMinRate
	}
	return p
}

// paceReader sets the connection's read deadline before every read so a
// body arrives at its policy's pace: by time start+Grace+t, at least
// t*MinRate bytes.
type paceReader struct {
	r     io.ReadCloser
	rc    *http.ResponseController
	start time.Time
	p     BodyPolicy
	n     int64
	set   bool
	done  bool
}

func (pr *paceReader) Read(b []byte) (int, error) {
	if pr.done {
		return 0, io.EOF
	}
	due := pr.deadline()
	n, err := pr.r.Read(b)
	pr.n += int64(n)
	if err == io.EOF {
		pr.done = true
		pr.clear()
	} else if err != nil && !pr.done && time.Now().After(due) {
		err = fmt.Errorf("%w: %d bytes in %s: %w", ErrTooSlow, pr.n, time.Since(pr.start).Round(time.Millisecond), err)
	}
	return n, err
}

// deadline sets the read deadline the bytes read so far allow.
func (pr *paceReader) deadline() time.Time {
	due := pr.start.Add(pr.p.Grace + time.Duration(float64(pr.n)/float64(pr.p.MinRate)*float64(time.Second)))
	if pr.rc.SetReadDeadline(due) == nil {
		pr.set = true
	}
	return due
}

func (pr *paceReader) Close() error { return pr.r.Close() }

// clear lifts the deadline once the body is in, so that the server's
// watch for the peer closing the connection does not time out.
func (pr *paceReader) clear() {
	if pr.set {
		_ = pr.rc.SetReadDeadline(time.Time{})
		pr.set = false
	}
}
