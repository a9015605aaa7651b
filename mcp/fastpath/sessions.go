package fastpath

// Upstream gap (go-sdk v1.8.0): StreamableHTTPOptions.SessionTimeout
// closes a session that has had no request for the timeout, but only the
// requests the SDK's own handler serves count, and the SDK has no way to
// tell it of others (no "touch" of a session from outside). Once the fast
// path (fast.go) answers a session's skills/list and resources/read, the
// SDK's timer would close a session the fast path keeps busy. So, with the
// fast path on, the SDK's timer is off and Sessions closes idle sessions,
// seeing every request. No upstream issue asks for this: it is needed only
// because of the fast path, and goes when fast.go goes (with the fast path
// off, mcp sets the SDK's SessionTimeout instead).

import (
	"context"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Sessions tracks the open 2025-11-25 sessions: the fast path answers the
// requests of those that completed initialize, and each is closed once it
// has had no request in flight for the idle timeout.
type Sessions struct {
	timeout time.Duration
	mu      sync.Mutex
	m       map[string]*Session
}

// Session is one tracked session.
type Session struct {
	ss       *sdk.ServerSession
	mu       sync.Mutex
	inflight int
	closed   bool
	timer    *time.Timer // running while nothing is in flight
}

// NewSessions tracks sessions, closing each after timeout without a
// request in flight (never, for a timeout <= 0).
func NewSessions(timeout time.Duration) *Sessions {
	return &Sessions{timeout: timeout, m: map[string]*Session{}}
}

// Add starts tracking ss (after its initialize), idle from now.
func (t *Sessions) Add(ss *sdk.ServerSession) {
	id := ss.ID()
	if id == "" {
		return // a stateless request's temporary session
	}
	t.mu.Lock()
	if _, ok := t.m[id]; ok {
		t.mu.Unlock()
		return
	}
	s := &Session{ss: ss}
	t.m[id] = s
	t.mu.Unlock()
	s.mu.Lock()
	s.idle(t.timeout)
	s.mu.Unlock()
	go func() {
		_ = ss.Wait() // closed: by the client, the timer, or shutdown
		t.mu.Lock()
		delete(t.m, id)
		t.mu.Unlock()
		s.mu.Lock()
		s.closed = true
		if s.timer != nil {
			s.timer.Stop()
		}
		s.mu.Unlock()
	}()
}

// Begin marks a request of session id in flight and returns the session,
// or nil for a session not tracked (unknown, closed, or before initialize).
// Every non-nil Begin needs its End.
func (t *Sessions) Begin(id string) *Session {
	t.mu.Lock()
	s := t.m[id]
	t.mu.Unlock()
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inflight++
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	return s
}

// End marks a request of s, which Begin returned, done.
func (t *Sessions) End(s *Session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inflight--; s.inflight == 0 {
		s.idle(t.timeout)
	}
}

// ServerSession is the SDK's session.
func (s *Session) ServerSession() *sdk.ServerSession { return s.ss }

// idle starts the idle timer; s.mu is held.
func (s *Session) idle(timeout time.Duration) {
	if s.closed || timeout <= 0 {
		return
	}
	s.timer = time.AfterFunc(timeout, func() { _ = s.ss.Close() })
}

// Middleware is the SDK receiving middleware that starts tracking a
// session once its initialize succeeded.
func (t *Sessions) Middleware(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		res, err := next(ctx, method, req)
		if method == "initialize" && err == nil {
			if ss, ok := req.GetSession().(*sdk.ServerSession); ok {
				t.Add(ss)
			}
		}
		return res, err
	}
}
