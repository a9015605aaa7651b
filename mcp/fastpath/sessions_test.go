package fastpath

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// idTransport gives an in-memory transport's connection a session id, as
// Streamable HTTP's have (Sessions tracks only sessions with one).
type idTransport struct{ sdk.Transport }

func (t idTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	return idConn{c}, err
}

type idConn struct{ sdk.Connection }

func (idConn) SessionID() string { return "s1" }

// TestSessionsCloseWhenIdle checks the idle timer the fast path's sessions
// need (the SDK's sees only the SDK's requests) on a fake clock, over a
// real SDK client and server connected in memory: a session with a
// request in flight stays however long the request takes; once none is
// in flight, it closes after the timeout and is no longer tracked.
func TestSessionsCloseWhenIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = time.Minute
		sessions := NewSessions(timeout)
		srv := sdk.NewServer(&sdk.Implementation{Name: "s", Version: "1"}, nil)
		srv.AddReceivingMiddleware(sessions.Middleware)
		ct, st := sdk.NewInMemoryTransports()
		ss, err := srv.Connect(t.Context(), idTransport{st}, nil)
		if err != nil {
			t.Fatal(err)
		}
		// 2025-11-25: the generation with sessions and initialize.
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "c", Version: "1"}, nil).Connect(t.Context(), ct, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		closed := make(chan struct{})
		go func() { _ = ss.Wait(); close(closed) }()
		isClosed := func() bool {
			synctest.Wait()
			select {
			case <-closed:
				return true
			default:
				return false
			}
		}

		sess := sessions.Begin("s1")
		if sess == nil || sess.ServerSession() != ss {
			t.Fatal("the session is not tracked after initialize")
		}
		time.Sleep(10 * timeout) // a long request
		if isClosed() {
			t.Fatal("a session with a request in flight was closed")
		}
		sessions.End(sess)
		time.Sleep(timeout - time.Second)
		if isClosed() {
			t.Fatal("closed before the idle timeout")
		}
		time.Sleep(2 * time.Second)
		if !isClosed() {
			t.Fatal("not closed after the idle timeout")
		}
		if sessions.Begin("s1") != nil {
			t.Fatal("a closed session is still tracked")
		}
	})
}
