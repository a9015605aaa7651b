package netlimit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/skillreg/skillreg/internal/testkit"
)

// trickle is a body that has delivered some bytes and then waits (as a
// client that sent one byte of a large Content-Length does).
type trickle struct {
	data []byte
	wait chan struct{}
}

func (t *trickle) Read(p []byte) (int, error) {
	if len(t.data) > 0 {
		n := copy(p, t.data)
		t.data = t.data[n:]
		return n, nil
	}
	<-t.wait
	return 0, io.EOF
}

// TestReadAllGrowsWithArrival: what a body holds follows the bytes that
// arrived, not what Content-Length (or the limit) promises, and every
// byte held is paid from the budget.
func TestReadAllGrowsWithArrival(t *testing.T) {
	t.Parallel()
	b := NewBudget(64<<10, 20*time.Millisecond)
	release := make(chan struct{})
	type result struct {
		data []byte
		rel  func()
		err  error
	}
	results := make(chan result)
	// 64 KiB of budget holds 128 bodies that have sent one byte each,
	// whatever their limit.
	for range 128 {
		go func() {
			data, rel, err := b.ReadAll(context.Background(), &trickle{data: []byte{'x'}, wait: release}, 25<<20)
			results <- result{data, rel, err}
		}()
	}
	// One more cannot get budget and is refused, not buffered.
	waitHeld(t, b, 128*firstChunk)
	_, rel, err := b.ReadAll(context.Background(), &trickle{data: []byte{'x'}, wait: release}, 25<<20)
	rel()
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("body over the budget: err %v, want ErrBusy", err)
	}
	close(release)
	for range 128 {
		r := <-results
		if r.err != nil || string(r.data) != "x" {
			t.Fatalf("got %q, %v", r.data, r.err)
		}
		r.rel()
		r.rel() // twice is harmless
	}
	if !b.sem.TryAcquire(b.Size()) || b.InUse() != 0 {
		t.Fatalf("budget not fully returned (%d in use)", b.InUse())
	}
}

// waitHeld waits until n bytes of b are held (the goroutines got there).
func waitHeld(t *testing.T, b *Budget, n int64) {
	t.Helper()
	testkit.WaitUntil(t, fmt.Sprintf("%d bytes held", n), func() bool { return b.InUse() >= n })
}

func TestReadAllLimits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		size, limit int
		err         error
	}{
		{0, 10, nil}, {10, 10, nil}, {11, 10, ErrTooLarge}, {511, 512, nil}, {512, 512, nil}, {513, 512, ErrTooLarge},
		{100000, 100000, nil}, {100001, 100000, ErrTooLarge}, {1 << 20, 4 << 20, nil},
	} {
		body := bytes.Repeat([]byte{'a'}, tc.size)
		for _, b := range []*Budget{nil, NewBudget(8<<20, 0)} {
			data, rel, err := b.ReadAll(context.Background(), bytes.NewReader(body), int64(tc.limit))
			rel()
			if !errors.Is(err, tc.err) || (err == nil && !bytes.Equal(data, body)) {
				t.Errorf("size %d limit %d budget %v: %d bytes, %v; want %v", tc.size, tc.limit, b != nil, len(data), err, tc.err)
			}
			if err == nil && int64(cap(data)) > int64(tc.limit)+1 {
				t.Errorf("size %d limit %d: buffer of %d", tc.size, tc.limit, cap(data))
			}
		}
	}
	// A body larger than the whole budget is refused.
	b := NewBudget(1<<10, 10*time.Millisecond)
	_, rel, err := b.ReadAll(context.Background(), bytes.NewReader(make([]byte, 4<<10)), 1<<20)
	rel()
	if !errors.Is(err, ErrBusy) {
		t.Errorf("body over the whole budget: %v", err)
	}
}

func bodiesServer(t *testing.T, budget *Budget, p BodyPolicy) string {
	t.Helper()
	srv := httptest.NewServer(Bodies(budget, func(*http.Request) BodyPolicy { return p }, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			WriteError(w, budget, err)
			return
		}
		fmt.Fprintf(w, "%d", len(b))
	})))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// rawPost sends headers and the first part of a body and returns the
// connection, for the test to go on or stall.
func rawPost(t *testing.T, addr string, length int, first string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST /x HTTP/1.1\r\nHost: localhost\r\nContent-Length: %d\r\n\r\n%s", length, first)
	return c
}

func status(t *testing.T, c net.Conn) string {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	b, _ := io.ReadAll(c)
	line, _, _ := strings.Cut(string(b), "\r\n")
	return line
}

// TestBodiesPace: a body that stops arriving after its grace is cut with
// 408, buffered or not; one that arrives is served; a Content-Length over
// the limit is refused before any byte is read.
func TestBodiesPace(t *testing.T) {
	t.Parallel()
	for _, buffer := range []bool{true, false} {
		t.Run(fmt.Sprint("buffer=", buffer), func(t *testing.T) {
			slow := bodiesServer(t, NewBudget(1<<20, 0), BodyPolicy{Limit: 1 << 20, Grace: 100 * time.Millisecond, MinRate: 1 << 10, Buffer: buffer})
			c := rawPost(t, slow, 100000, "abc")
			if got := status(t, c); !strings.Contains(got, " 408 ") {
				t.Errorf("stalled body: %q, want 408", got)
			}
			ok := bodiesServer(t, NewBudget(1<<20, 0), BodyPolicy{Limit: 1 << 20, Grace: 10 * time.Second, MinRate: 1 << 10, Buffer: buffer})
			c = rawPost(t, ok, 5000, strings.Repeat("a", 5000))
			c.(*net.TCPConn).CloseWrite()
			if got := status(t, c); !strings.Contains(got, " 200 ") {
				t.Errorf("whole body: %q, want 200", got)
			}
			c = rawPost(t, ok, 2<<20, "a")
			if got := status(t, c); !strings.Contains(got, " 413 ") {
				t.Errorf("Content-Length over the limit: %q, want 413", got)
			}
		})
	}
}

// TestBodiesBudget: with the budget held by a body in flight, another is
// answered 503 with Retry-After, and once it is released, served.
func TestBodiesBudget(t *testing.T) {
	t.Parallel()
	budget := NewBudget(8<<10, 50*time.Millisecond)
	addr := bodiesServer(t, budget, BodyPolicy{Limit: 1 << 20, Grace: time.Minute, Buffer: true})
	// 4,000 bytes in: a 4 KiB buffer held. A 3,000-byte body needs 6 KiB
	// at its peak (its 2 KiB buffer while it moves into 4 KiB): more than
	// the 4 KiB left.
	hog := rawPost(t, addr, 1<<20, strings.Repeat("a", 4000))
	waitHeld(t, budget, 4096)
	c := rawPost(t, addr, 3000, strings.Repeat("b", 3000))
	resp := readAll(t, c)
	if !strings.Contains(resp, " 503 ") || !strings.Contains(resp, "Retry-After: 1") {
		t.Fatalf("over the budget: %q, want 503 with Retry-After", resp)
	}
	hog.Close()
	testkit.WaitUntil(t, "the budget back (a body served 200)", func() bool {
		return strings.Contains(readAll(t, rawPost(t, addr, 3000, strings.Repeat("b", 3000))), " 200 ")
	})
}

func readAll(t *testing.T, c net.Conn) string {
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	c.(*net.TCPConn).CloseWrite()
	b, _ := io.ReadAll(c)
	return string(b)
}
