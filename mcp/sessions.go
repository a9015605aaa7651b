package mcp

import (
	"context"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// sessions tracks the open 2025-11-25 sessions: the fast path answers the
// requests of those that completed initialize, and each is closed once it
// has had no request in flight for the idle timeout. The SDK's own idle
// timer is off: it sees only the requests the SDK serves, so it would close
// a session the fast path keeps busy.
type sessions struct {
	timeout time.Duration
	mu      sync.Mutex
	m       map[string]*session
}

type session struct {
	ss       *sdk.ServerSession
	mu       sync.Mutex
	inflight int
	closed   bool
	timer    *time.Timer // running while nothing is in flight
}

func newSessions(timeout time.Duration) *sessions {
	return &sessions{timeout: timeout, m: map[string]*session{}}
}

// add starts tracking ss (after its initialize), idle from now.
func (t *sessions) add(ss *sdk.ServerSession) {
	id := ss.ID()
	if id == "" {
		return // a stateless request's temporary session
	}
	t.mu.Lock()
	if _, ok := t.m[id]; ok {
		t.mu.Unlock()
		return
	}
	s := &session{ss: ss}
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

// begin marks a request of session id in flight and returns the session,
// or nil for a session not tracked (unknown, closed, or before initialize).
// Every non-nil begin needs its end.
func (t *sessions) begin(id string) *session {
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

func (t *sessions) end(s *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inflight--; s.inflight == 0 {
		s.idle(t.timeout)
	}
}

// idle starts the idle timer; s.mu is held.
func (s *session) idle(timeout time.Duration) {
	if s.closed || timeout <= 0 {
		return
	}
	s.timer = time.AfterFunc(timeout, func() { _ = s.ss.Close() })
}

// trackSessions is the middleware that starts tracking a session once its
// initialize succeeded.
func (s *Server) trackSessions(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		res, err := next(ctx, method, req)
		if method == "initialize" && err == nil {
			if ss, ok := req.GetSession().(*sdk.ServerSession); ok {
				s.sessions.add(ss)
			}
		}
		return res, err
	}
}
