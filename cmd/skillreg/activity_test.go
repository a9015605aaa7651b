package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestActivityYieldsToRequests: the background work of a restart passes
// at once while no request is in flight (even under an ended context: it
// does not wait at all), and while one is it waits (here until its
// context ends, which it then says).
func TestActivityYieldsToRequests(t *testing.T) {
	var a activity
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.yield(ended); err != nil {
		t.Fatalf("yield with no request = %v; want nil at once", err)
	}
	inside, release := make(chan struct{}), make(chan struct{})
	h := a.track(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		close(inside)
		<-release
	}))
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	}()
	<-inside
	if err := a.yield(ended); !errors.Is(err, context.Canceled) {
		t.Fatalf("yield during a request under an ended context = %v; want context.Canceled", err)
	}
	if n := a.inflight.Load(); n != 1 {
		t.Fatalf("%d requests in flight; want 1", n)
	}
	close(release)
	<-done
	if n := a.inflight.Load(); n != 0 {
		t.Fatalf("%d requests in flight after the request; want 0", n)
	}
	if err := a.yield(context.Background()); err != nil {
		t.Fatalf("yield after the request = %v", err)
	}
}
