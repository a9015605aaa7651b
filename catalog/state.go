package catalog

import (
	"time"

	"github.com/skillreg/skillreg/sigverify"
)

// State is what the registry knows about a source's syncs.
type State struct {
	Source     string `json:"source"`
	Kind       Kind   `json:"kind"`
	Repository string `json:"repository,omitempty"`
	Ref        string `json:"ref,omitempty"`
	Commit     string `json:"commit,omitempty"`
	// Verify is the signature check the source requires (a
	// catalog.VerifyMode), "" for none; Signature is the verified
	// signature of what it serves. A commit or tag that does not verify
	// is not served: the source is stalled (StallUnverified) and
	// LastError says "unverified: " and who signed with which key.
	Verify      string               `json:"verify,omitempty"`
	Signature   *sigverify.Signature `json:"signature,omitempty"`
	Skills      int                  `json:"skills"`
	Excluded    int                  `json:"excluded"`
	LastStart   time.Time            `json:"last_start,omitzero"`
	LastEnd     time.Time            `json:"last_end,omitzero"`
	LastResult  string               `json:"last_result,omitempty"` // ResultUpdated, ResultUnchanged, ResultFailed or ResultStalled
	LastSuccess time.Time            `json:"last_success,omitzero"`
	LastError   string               `json:"last_error,omitempty"`
	LastErrorAt time.Time            `json:"last_error_at,omitzero"`
	Failures    int                  `json:"consecutive_failures"`
	// Stalled says why the last sync failed in a way that retrying cannot
	// mend until something changes (the configuration, the remote): no
	// backoff is scheduled (NextRetry stays zero), and Hint says what to
	// fix. Empty unless LastResult is ResultStalled.
	Stalled   StallReason `json:"stalled,omitempty"`
	Hint      string      `json:"hint,omitempty"`
	NextRetry time.Time   `json:"next_retry,omitzero"`
	NextPoll  time.Time   `json:"next_poll,omitzero"`
	Syncing   bool        `json:"syncing"`
	Attempted bool        `json:"attempted"` // at least one sync finished since start

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
	// Saving means the catalog served is not stored yet: a directory
	// source's first catalog is served as soon as it is indexed and
	// stored right after. Once stored it is false; a failed store sets
	// PersistError instead.
	Saving bool `json:"saving,omitempty"`

	// Watch says how the changes of a directory source are noticed
	// (zero for other kinds). It is the running process's, never stored.
	Watch Watch `json:"watch,omitzero"`
}

// Persisted is what a store kept of one source: its last snapshot (nil when
// it never synced) and its state.
type Persisted struct {
	Snapshot *Snapshot
	// Rules is the skill.StoredRules the snapshot's skills were judged
	// by when stored ("" when the store did not record it): a restart
	// judges them again only under other rules.
	Rules string
	State State
	// Damaged says why the store could not return this source's records
	// (one failed its checksum or did not decode); Snapshot is nil then,
	// State is whatever checked out, and Restore resyncs the source.
	Damaged error
}

// The results of a sync, as State.LastResult records them.
const (
	ResultUpdated   = "updated"   // a new snapshot is served
	ResultUnchanged = "unchanged" // the source had not moved
	ResultFailed    = "failed"    // a transient failure: retried with backoff
	ResultStalled   = "stalled"   // a failure retrying cannot mend (State.Stalled says which)
)

// StallReason is why a source's sync is stalled: the configuration or the
// remote must change before a sync can succeed.
type StallReason string

// The stall reasons.
const (
	StallInvalidPin   StallReason = "invalid_pin"          // the pin does not parse or validate
	StallInvalidRepo  StallReason = "invalid_repository"   // the repository URL is not one skillreg fetches
	StallRefNotFound  StallReason = "ref_not_found"        // the pinned branch, tag, range or release does not exist
	StallRepoNotFound StallReason = "repository_not_found" // the remote says there is no such repository
	StallAuthRefused  StallReason = "auth_refused"         // the remote refused the credentials (or their absence)
	StallPathMissing  StallReason = "path_missing"         // the source's directory or subpath does not exist
	StallUnverified   StallReason = "unverified"           // the commit or tag to serve is not signed by one of the source's verify keys
)

// Hint says, for people, what to fix and when the source is tried again:
// at its polls when polled is set, else only on a change of configuration
// or a webhook.
func (r StallReason) Hint(polled bool) string {
	var fix string
	switch r {
	case StallInvalidPin:
		fix = "the source's ref is not a valid pin: fix it in the configuration"
	case StallInvalidRepo:
		fix = "the source's repository URL is not an accepted https, http or file URL without credentials: fix it in the configuration"
	case StallRefNotFound:
		fix = "the pinned branch, tag, version range or release does not exist on the remote: fix the ref in the configuration, or push it"
	case StallRepoNotFound:
		fix = "the remote has no such repository: fix the URL in the configuration, or check that the token may see it"
	case StallAuthRefused:
		fix = "the remote refused the credentials: check the source's token (or add one)"
	case StallPathMissing:
		fix = "the source's directory (or path inside the repository) does not exist: fix the path, or create it"
	case StallUnverified:
		fix = "the commit or tag to serve does not carry a valid signature by one of the source's verify keys (the last verified snapshot, if any, stays served): push a signed one, or trust its key in the source's verify keys and reload"
	default:
		return ""
	}
	if polled {
		return fix + "; tried again when the configuration is reloaded, when a webhook names the source, or at its next poll"
	}
	return fix + "; tried again when the configuration is reloaded or a webhook names the source"
}

// Watch is how a directory source's changes are noticed: a watch on each
// of its directories (inotify is not recursive), each change rescanning
// what it touched; the periodic rescan (poll) is the fallback.
type Watch struct {
	// Dirs is the number of directories watched (those the walks added; a
	// directory deleted since is counted until the next walk).
	Dirs int `json:"dirs"`
	// Complete: every directory of the source is watched (false while the
	// source's directory does not exist). While it is, a poll rescans the
	// whole tree at most every registry.WatchedPoll.
	Complete bool `json:"complete"`
	// Exhausted: the kernel refused a watch for lack of room (inotify's
	// fs.inotify.max_user_watches, or max_user_instances): changes beneath
	// the directories left unwatched are found only by the periodic
	// rescan. The walk is tried again every few minutes.
	Exhausted bool `json:"exhausted,omitempty"`
	// Blind: some directory is unwatched and the source has no poll
	// (poll: 0), so changes beneath it are never noticed. An error of the
	// source, not only a warning.
	Blind bool `json:"blind,omitempty"`
	// Error is why some directory is not watched; Hint says what to do.
	Error   string    `json:"error,omitempty"`
	ErrorAt time.Time `json:"error_at,omitzero"`
	Hint    string    `json:"hint,omitempty"`
	// Overflows counts the kernel's event queue overflowing (events were
	// lost); each is answered by a full rescan.
	Overflows int `json:"overflows,omitempty"`
	// Rescans counts the syncs that rescanned only what changed, and
	// FullRescans the others (first scan, polls, overflows, reloads).
	Rescans     int `json:"rescans,omitempty"`
	FullRescans int `json:"full_rescans,omitempty"`
}
