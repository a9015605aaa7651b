package webhook

import (
	"slices"
	"sync"
	"time"
)

// Delivery is one authenticated webhook delivery as the delivery log keeps
// it, for operators and for the web catalog's sources page.
type Delivery struct {
	ID         string    // X-GitHub-Delivery; empty when GitHub sent none
	Event      string    // X-GitHub-Event, e.g. "push"
	Action     string    // the payload's action, e.g. "published" ("" for push)
	Repo       string    // repository.full_name as the payload spells it
	At         time.Time // when it was received
	Outcome    string    // one of the Outcome constants
	Redelivery bool      // the ID had been seen before
	Sources    []string  // the sources it asked to sync, sorted
}

// DeliveryLog is the bounded record of deliveries. Seen reports whether a
// delivery ID was recorded before, so redeliveries never apply a release
// change twice. The in-memory MemoryLog implements it; the store implements
// it persistently. Only deliveries whose signature checked out are recorded,
// so an unauthenticated caller can neither fill the log nor make a genuine
// delivery look like a redelivery.
type DeliveryLog interface {
	Seen(id string) (bool, error)
	Record(d Delivery) error
	Recent(n int) ([]Delivery, error)
}

// DefaultLogSize is how many deliveries NewMemoryLog keeps when asked for a
// non-positive capacity.
const DefaultLogSize = 1000

// MemoryLog is a DeliveryLog that keeps the last deliveries in memory, in a
// ring. It is safe for concurrent use.
type MemoryLog struct {
	mu    sync.Mutex
	ring  []Delivery
	next  int // where the next record goes
	count int // how many slots are filled
	ids   map[string]int
}

// NewMemoryLog returns an empty MemoryLog that keeps the last capacity
// deliveries (DefaultLogSize when capacity is not positive).
func NewMemoryLog(capacity int) *MemoryLog {
	if capacity <= 0 {
		capacity = DefaultLogSize
	}
	return &MemoryLog{ring: make([]Delivery, capacity), ids: make(map[string]int)}
}

// Seen reports whether a delivery with this ID is still in the log. The
// empty ID is never seen.
func (l *MemoryLog) Seen(id string) (bool, error) {
	if id == "" {
		return false, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ids[id] > 0, nil
}

// Record appends d, evicting the oldest delivery when the log is full. A
// redelivery is appended as its own entry.
func (l *MemoryLog) Record(d Delivery) error {
	d.Sources = slices.Clone(d.Sources)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.count == len(l.ring) {
		l.forget(l.ring[l.next].ID)
	} else {
		l.count++
	}
	l.ring[l.next] = d
	l.next = (l.next + 1) % len(l.ring)
	if d.ID != "" {
		l.ids[d.ID]++
	}
	return nil
}

func (l *MemoryLog) forget(id string) {
	if id == "" {
		return
	}
	if l.ids[id] <= 1 {
		delete(l.ids, id)
		return
	}
	l.ids[id]--
}

// Recent returns up to n deliveries, newest first (all of them when n is not
// positive). The result is a copy the caller may keep.
func (l *MemoryLog) Recent(n int) ([]Delivery, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n <= 0 || n > l.count {
		n = l.count
	}
	out := make([]Delivery, 0, n)
	for i := 1; i <= n; i++ {
		d := l.ring[(l.next-i+len(l.ring))%len(l.ring)]
		d.Sources = slices.Clone(d.Sources)
		out = append(out, d)
	}
	return out, nil
}
