package registry

import (
	"cmp"
	"context"
	"slices"
	"sync"
)

// The sync queue's slots.
//
// Syncs run in at most MaxParallelSyncs slots (N, default 2). A slot is held
// for a whole sync, so a remote that accepts connections and never answers
// holds one until the source's timeout (60 s by default), then again at each
// retry. Before this design two such remotes held both slots all the time
// and a push to a healthy source waited for one of them to time out: 7 to
// 10 s, one time in two. Three rules keep pushes visible at once:
//
//  1. Classes, served in order: urgent (a webhook delivery asked for the
//     sync, and the source's last sync did not fail), normal (polls,
//     retries, configuration changes, changed files of a healthy source),
//     failing (the source's last sync failed: it may well hang again).
//     Within a class, first asked, first served.
//  2. Failing sources share a lane of N-1 slots (1 when N is 1): they never
//     take the last general slot, so a healthy source always finds one
//     that no failing remote can hold.
//  3. One express slot, beyond the N, runs an urgent sync when all N are
//     held: by sources that have not failed yet but hang on their first
//     attempt (after a restart, say), or by healthy syncs that are slow.
//     Someone pushed and is waiting; that sync never queues behind hung
//     remotes. Being one slot, it bounds the syncs at once to N+1.
//
// A request for a source already waiting for a slot joins that wait, and
// raises its class when it is more urgent: this queue is the one place that
// coalesces sync requests and decides their order.
type syncClass int

const (
	classUrgent syncClass = iota
	classNormal
	classFailing
)

func (c syncClass) String() string {
	switch c {
	case classUrgent:
		return "urgent"
	case classNormal:
		return "normal"
	}
	return "failing"
}

type slotKind int

const (
	slotGeneral slotKind = iota
	slotFailing          // a general slot, counted in the failing lane too
	slotExpress
)

type slots struct {
	n       int // general slots
	lane    int // of which failing syncs may hold at most this many
	mu      sync.Mutex
	busy    int  // general slots held
	failing int  // general slots held by failing syncs
	express bool // the express slot is held
	seq     uint64
	// waiting is by waiter, not by source name: a source replaced by a
	// reload may have a waiter of its old and of its new configuration.
	waiting map[*slotWaiter]struct{}
	// onGrant, when set (tests), sees each grant in order.
	onGrant func(name string, c syncClass, k slotKind)
}

type slotWaiter struct {
	name    string
	class   syncClass
	seq     uint64
	granted chan slotKind // capacity 1
}

func newSlots(n int) *slots {
	return &slots{n: n, lane: max(1, n-1), waiting: map[*slotWaiter]struct{}{}}
}

// acquire waits for a slot for a sync of source name in class c. It returns
// the function that gives the slot back, or the context's error.
func (s *slots) acquire(ctx context.Context, name string, c syncClass) (release func(), err error) {
	s.mu.Lock()
	s.seq++
	w := &slotWaiter{name: name, class: c, seq: s.seq, granted: make(chan slotKind, 1)}
	s.waiting[w] = struct{}{}
	s.dispatchLocked()
	s.mu.Unlock()
	select {
	case k := <-w.granted:
		return func() { s.release(k) }, nil
	case <-ctx.Done():
		s.mu.Lock()
		if _, ok := s.waiting[w]; ok {
			delete(s.waiting, w)
			s.mu.Unlock()
			return nil, ctx.Err()
		}
		s.mu.Unlock()
		s.release(<-w.granted) // granted meanwhile
		return nil, ctx.Err()
	}
}

// raise moves a waiting source up to class c, if that is more urgent.
func (s *slots) raise(name string, c syncClass) {
	s.mu.Lock()
	defer s.mu.Unlock()
	raised := false
	for w := range s.waiting {
		if w.name == name && c < w.class {
			w.class, raised = c, true
		}
	}
	if raised {
		s.dispatchLocked()
	}
}

func (s *slots) release(k slotKind) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch k {
	case slotExpress:
		s.express = false
	case slotFailing:
		s.failing--
		s.busy--
	default:
		s.busy--
	}
	s.dispatchLocked()
}

// dispatchLocked grants every slot it can, in class order then request
// order. Greedy is enough: a waiter that does not fit never holds back a
// later one of a more urgent class, because the more urgent fit wherever a
// less urgent one would.
func (s *slots) dispatchLocked() {
	if len(s.waiting) == 0 {
		return
	}
	ws := make([]*slotWaiter, 0, len(s.waiting))
	for w := range s.waiting {
		ws = append(ws, w)
	}
	slices.SortFunc(ws, func(a, b *slotWaiter) int {
		if a.class != b.class {
			return int(a.class) - int(b.class)
		}
		return cmp.Compare(a.seq, b.seq)
	})
	for _, w := range ws {
		k, ok := s.fitLocked(w.class)
		if !ok {
			continue
		}
		switch k {
		case slotExpress:
			s.express = true
		case slotFailing:
			s.failing++
			s.busy++
		default:
			s.busy++
		}
		delete(s.waiting, w)
		if s.onGrant != nil {
			s.onGrant(w.name, w.class, k)
		}
		w.granted <- k
	}
}

func (s *slots) fitLocked(c syncClass) (slotKind, bool) {
	switch c {
	case classFailing:
		return slotFailing, s.busy < s.n && s.failing < s.lane
	case classUrgent:
		if s.busy < s.n {
			return slotGeneral, true
		}
		return slotExpress, !s.express
	}
	return slotGeneral, s.busy < s.n
}
