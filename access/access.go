// Package access decides who may see what. The Gate is what every surface
// asks who a request's credential belongs to: the configured clients, each
// with a bearer token kept only as its SHA-256 hash and the sources it may
// see, checked in constant time, then the access tokens of the
// organisation's OpenID Connect provider (through a TokenVerifier), mapped
// to sources by the access Rules. Failed attempts are rate-limited per
// remote address; a request without a credential is not one. Middleware
// answers refusals with the RFC 9728 challenge, and ResourceMetadataHandler
// serves the protected resource metadata it points to. The Host and Origin
// checks and the networks that see operational detail live here too.
package access

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/skillreg/skillreg/catalog"
)

// Client is one configured caller.
type Client struct {
	Name    string
	Hash    [sha256.Size]byte
	Sources []string // source names; "*" means all
}

// Filter is what the client may see.
func (c Client) Filter() catalog.Filter {
	only := map[string]bool{}
	for _, s := range c.Sources {
		if s == "*" {
			return catalog.Filter{}
		}
		only[s] = true
	}
	return catalog.Filter{Only: only}
}

// Clients is the set of configured clients. The zero value (none) means
// access is open.
type Clients struct {
	list []Client
}

// New returns the clients, from hex SHA-256 hashes.
func New(clients []Client) *Clients { return &Clients{list: clients} }

// ParseHash reads a token hash as written in the configuration.
func ParseHash(s string) ([sha256.Size]byte, error) {
	var h [sha256.Size]byte
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != sha256.Size {
		return h, fmt.Errorf("token_sha256 must be %d hex digits", 2*sha256.Size)
	}
	copy(h[:], b)
	return h, nil
}

// Required reports whether callers must present a token.
func (c *Clients) Required() bool { return c != nil && len(c.list) > 0 }

// Check returns the client a token belongs to. Every client's hash is
// compared, in constant time, whatever matches, so the time taken says
// nothing about which tokens exist.
func (c *Clients) Check(token string) (Client, bool) {
	if c == nil || token == "" {
		return Client{}, false
	}
	sum := sha256.Sum256([]byte(token))
	var found Client
	ok := 0
	for _, cl := range c.list {
		if subtle.ConstantTimeCompare(sum[:], cl.Hash[:]) == 1 {
			found = cl
			ok = 1
		}
	}
	return found, ok == 1
}

// Bearer extracts a bearer token from an Authorization header value.
func Bearer(h string) string {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}

// TokenPrefix marks skillreg tokens, so they are recognisable in secret
// scanners and in a user's config.
const TokenPrefix = "skr_"

// NewToken returns a fresh random token and the hex SHA-256 hash to put in
// the configuration.
func NewToken() (token, hash string, err error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", "", err
	}
	token = TokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	sum := sha256.Sum256([]byte(token))
	return token, hex.EncodeToString(sum[:]), nil
}

// Limiter rate-limits failed authentication attempts per remote address:
// a burst, then a steady trickle, so a guessing client slows to nothing
// while a mistyped token recovers within a minute.
type Limiter struct {
	mu      sync.Mutex
	byAddr  map[string]*limitEntry
	every   time.Duration
	burst   int
	maxKeys int
	now     func() time.Time
}

type limitEntry struct {
	lim  *rate.Limiter
	seen time.Time
}

// NewLimiter allows burst failures per address, then one per every.
func NewLimiter(every time.Duration, burst int) *Limiter {
	return &Limiter{byAddr: map[string]*limitEntry{}, every: every, burst: burst, maxKeys: 10000, now: time.Now}
}

// WithClock makes l read the time from now (for tests); call it before use.
func (l *Limiter) WithClock(now func() time.Time) *Limiter {
	l.now = now
	return l
}

// RetryAfter is how long an address over its budget waits for its next
// attempt.
func (l *Limiter) RetryAfter() time.Duration { return l.every }

// Allow reports whether addr may try again; it spends nothing.
func (l *Limiter) Allow(addr string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.byAddr[addr]
	return !ok || e.lim.TokensAt(l.now()) >= 1
}

// Failed records a failed attempt from addr.
func (l *Limiter) Failed(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	e, ok := l.byAddr[addr]
	if !ok {
		if len(l.byAddr) >= l.maxKeys {
			l.evict(now)
		}
		e = &limitEntry{lim: rate.NewLimiter(rate.Every(l.every), l.burst)}
		l.byAddr[addr] = e
	}
	e.seen = now
	e.lim.AllowN(now, 1)
}

// evict drops addresses that have been quiet long enough to be full again
// (and, if that frees nothing, the oldest), keeping the map bounded.
func (l *Limiter) evict(now time.Time) {
	full := l.every * time.Duration(l.burst)
	var oldest string
	for a, e := range l.byAddr {
		if now.Sub(e.seen) > full {
			delete(l.byAddr, a)
		} else if oldest == "" || e.seen.Before(l.byAddr[oldest].seen) {
			oldest = a
		}
	}
	if len(l.byAddr) >= l.maxKeys && oldest != "" {
		delete(l.byAddr, oldest)
	}
}
