package releases

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode"
)

// ErrCorruptCache marks a cache entry that cannot be decoded or does not
// make sense. The Client drops such an entry and asks GitHub again.
var ErrCorruptCache = errors.New("corrupt release cache entry")

// Cached is what the Client remembers about one repository's latest release
// between lookups and across restarts.
//
// The states it can describe:
//   - never fetched: FetchedAt is zero (Tag, HTMLURL, ETag empty); only
//     RetryNotBefore may be set, when the first lookup was refused.
//   - no release: FetchedAt set, Tag empty (GitHub answered 404).
//   - a release: FetchedAt, Tag and HTMLURL set.
type Cached struct {
	Tag            string    // tag_name as GitHub spells it
	HTMLURL        string    // the release page
	PublishedAt    time.Time // published_at, used to order webhook updates; may be zero
	ETag           string    // of the last 200 answer from /releases/latest, for If-None-Match
	FetchedAt      time.Time // when GitHub (or a webhook) last confirmed this entry
	RetryNotBefore time.Time // do not ask GitHub about this repository before then
}

// Validate checks the entry's shape: the rules of the states above, a sane
// tag, an http(s) release page and a plausible ETag. It does not look at the
// clock (the Client does).
func (c Cached) Validate() error {
	switch {
	case c.FetchedAt.IsZero() && (c.Tag != "" || c.HTMLURL != "" || c.ETag != "" || !c.PublishedAt.IsZero()):
		return fmt.Errorf("%w: release data without a fetch time", ErrCorruptCache)
	case c.Tag == "" && (c.HTMLURL != "" || !c.PublishedAt.IsZero()):
		return fmt.Errorf("%w: release page without a tag", ErrCorruptCache)
	case c.Tag != "" && !validTag(c.Tag):
		return fmt.Errorf("%w: invalid tag", ErrCorruptCache)
	case c.Tag != "" && !validPageURL(c.HTMLURL):
		return fmt.Errorf("%w: invalid release page URL", ErrCorruptCache)
	case len(c.ETag) > 256 || strings.ContainsFunc(c.ETag, unicode.IsControl):
		return fmt.Errorf("%w: invalid ETag", ErrCorruptCache)
	}
	return nil
}

// validTag accepts what git and GitHub accept as a tag name, loosely: not
// empty, bounded, no control characters or spaces.
func validTag(tag string) bool {
	return tag != "" && len(tag) <= 255 &&
		!strings.ContainsFunc(tag, func(r rune) bool { return unicode.IsControl(r) || unicode.IsSpace(r) })
}

// validPageURL accepts absolute http(s) URLs with a host and no credentials.
func validPageURL(s string) bool {
	if len(s) > 2048 || strings.ContainsFunc(s, unicode.IsControl) {
		return false
	}
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.User == nil
}

// cachedV1 is the persisted form; "v" lets a later format coexist.
type cachedV1 struct {
	V              int       `json:"v"`
	Tag            string    `json:"tag,omitempty"`
	HTMLURL        string    `json:"html_url,omitempty"`
	PublishedAt    time.Time `json:"published_at,omitzero"`
	ETag           string    `json:"etag,omitempty"`
	FetchedAt      time.Time `json:"fetched_at,omitzero"`
	RetryNotBefore time.Time `json:"retry_not_before,omitzero"`
}

// MarshalCached encodes an entry in the format a Store persists (versioned
// JSON). Store adapters that keep bytes use it with UnmarshalCached.
func MarshalCached(c Cached) ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("encode release cache entry: %w", err)
	}
	b, err := json.Marshal(cachedV1{
		V: 1, Tag: c.Tag, HTMLURL: c.HTMLURL, PublishedAt: c.PublishedAt.UTC(), ETag: c.ETag,
		FetchedAt: c.FetchedAt.UTC(), RetryNotBefore: c.RetryNotBefore.UTC(),
	})
	if err != nil {
		return nil, fmt.Errorf("encode release cache entry: %w", err)
	}
	return b, nil
}

// UnmarshalCached decodes and validates bytes written by MarshalCached.
// Every failure wraps ErrCorruptCache.
func UnmarshalCached(b []byte) (Cached, error) {
	var v cachedV1
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return Cached{}, fmt.Errorf("%w: %v", ErrCorruptCache, err)
	}
	if dec.More() {
		return Cached{}, fmt.Errorf("%w: trailing data", ErrCorruptCache)
	}
	if v.V != 1 {
		return Cached{}, fmt.Errorf("%w: unknown format version %d", ErrCorruptCache, v.V)
	}
	c := Cached{
		Tag: v.Tag, HTMLURL: v.HTMLURL, PublishedAt: v.PublishedAt, ETag: v.ETag,
		FetchedAt: v.FetchedAt, RetryNotBefore: v.RetryNotBefore,
	}
	if err := c.Validate(); err != nil {
		return Cached{}, err
	}
	return c, nil
}

// Store persists cache entries by repository ("owner/name", lower case).
// Implementations must be safe for concurrent use. LoadRelease returns
// ok=false for a repository it has nothing for, and an error (ideally
// wrapping ErrCorruptCache) for an entry it cannot decode; the Client then
// deletes the entry and asks GitHub again.
type Store interface {
	LoadRelease(repo string) (c Cached, ok bool, err error)
	SaveRelease(repo string, c Cached) error
	DeleteRelease(repo string) error
}

// MemoryStore is a Store that keeps entries in memory, encoded with
// MarshalCached exactly as a persistent store would keep them. It serves
// stdio mode and tests. The zero value is ready to use.
type MemoryStore struct {
	mu      sync.Mutex
	entries map[string][]byte
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{} }

// LoadRelease implements Store.
func (m *MemoryStore) LoadRelease(repo string) (Cached, bool, error) {
	m.mu.Lock()
	b, ok := m.entries[repo]
	m.mu.Unlock()
	if !ok {
		return Cached{}, false, nil
	}
	c, err := UnmarshalCached(b)
	if err != nil {
		return Cached{}, false, fmt.Errorf("load release cache of %s: %w", repo, err)
	}
	return c, true, nil
}

// SaveRelease implements Store.
func (m *MemoryStore) SaveRelease(repo string, c Cached) error {
	b, err := MarshalCached(c)
	if err != nil {
		return fmt.Errorf("save release cache of %s: %w", repo, err)
	}
	m.putRaw(repo, b)
	return nil
}

// DeleteRelease implements Store.
func (m *MemoryStore) DeleteRelease(repo string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.entries, repo)
	return nil
}

func (m *MemoryStore) putRaw(repo string, b []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.entries == nil {
		m.entries = make(map[string][]byte)
	}
	m.entries[repo] = append([]byte(nil), b...)
}
