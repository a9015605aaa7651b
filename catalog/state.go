package catalog

import "time"

// State is what the registry knows about a source's syncs.
type State struct {
	Source      string    `json:"source"`
	Kind        Kind      `json:"kind"`
	Repository  string    `json:"repository,omitempty"`
	Ref         string    `json:"ref,omitempty"`
	Commit      string    `json:"commit,omitempty"`
	Skills      int       `json:"skills"`
	Excluded    int       `json:"excluded"`
	LastStart   time.Time `json:"last_start,omitzero"`
	LastEnd     time.Time `json:"last_end,omitzero"`
	LastResult  string    `json:"last_result,omitempty"` // "updated", "unchanged" or "failed"
	LastSuccess time.Time `json:"last_success,omitzero"`
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
	Failures    int       `json:"consecutive_failures"`
	NextRetry   time.Time `json:"next_retry,omitzero"`
	NextPoll    time.Time `json:"next_poll,omitzero"`
	Syncing     bool      `json:"syncing"`
	Attempted   bool      `json:"attempted"` // at least one sync finished since start

	// PersistError is why the catalog served could not be stored (a full
	// disk, say); empty once it is. Until then the store is retried with
	// backoff (NextPersist), and a restart would find an older catalog.
	PersistError    string    `json:"persist_error,omitempty"`
	PersistErrorAt  time.Time `json:"persist_error_at,omitzero"`
	PersistFailures int       `json:"persist_failures,omitempty"`
	NextPersist     time.Time `json:"next_persist_retry,omitzero"`
	// Stale means the catalog served was restored from the store and is
	// older than the one served before the restart (its persist had
	// failed); the resync the restart starts replaces it.
	Stale bool `json:"stale,omitempty"`
}

// Persisted is what a store kept of one source: its last snapshot (nil when
// it never synced) and its state.
type Persisted struct {
	Snapshot *Snapshot
	State    State
	// Damaged says why the store could not return this source's records
	// (one failed its checksum or did not decode); Snapshot is nil then,
	// State is whatever checked out, and Restore resyncs the source.
	Damaged error
}
