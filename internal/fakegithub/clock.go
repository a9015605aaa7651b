package fakegithub

import (
	"sync"
	"time"
)

// Clock is a manual clock for tests: time moves only when the test says so,
// so nothing that depends on TTLs or rate-limit windows depends on timing.
// Share one Clock between the fake server and the code under test.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a Clock that reads t until it is advanced.
func NewClock(t time.Time) *Clock {
	return &Clock{now: t}
}

// Now returns the clock's current time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}
