package gitsync

import "errors"

// Sentinel errors; compare with errors.Is. Every error this package returns
// wraps one of them or a context error, plus the cause.
var (
	// ErrInvalidPin means a pin's kind or value is malformed.
	ErrInvalidPin = errors.New("invalid pin")
	// ErrInvalidURL means a remote URL is not an accepted https, http or
	// file URL, or carries credentials.
	ErrInvalidURL = errors.New("invalid repository URL")
	// ErrRefNotFound means the pinned branch, tag, version range or commit
	// does not exist on the remote (or the remote has no refs at all).
	ErrRefNotFound = errors.New("ref not found")
	// ErrRepoNotFound means the remote answered that the repository does
	// not exist.
	ErrRepoNotFound = errors.New("repository not found")
	// ErrAuth means the remote refused the credentials (HTTP 401 or 403).
	ErrAuth = errors.New("authentication failed")
	// ErrNetwork means the remote could not be reached or misbehaved
	// (connection failure, unexpected HTTP status, truncated or malformed
	// answer). Timeouts and cancellation wrap the context's error instead.
	ErrNetwork = errors.New("network error")
	// ErrPathNotFound means a walked subpath does not exist in the commit's
	// tree or is not a directory.
	ErrPathNotFound = errors.New("path not found")
	// ErrObjectNotFound means an object is missing from the local store.
	ErrObjectNotFound = errors.New("object not found")
	// ErrCorrupt means the local store holds an object that does not decode
	// or does not hash to its id. The store repairs itself on the next
	// Fetch, which then downloads the commit again.
	ErrCorrupt = errors.New("corrupt object store")
	// ErrBadTree means a commit's tree breaks git's own rules in a way no
	// path can carry (an empty entry name, a slash in one, an entry listed
	// twice): the repository's content is at fault, not the network or the
	// store, so fetching again cannot help. Entries named "." or ".." are
	// reported as path segments instead, for the index to exclude only the
	// skill holding them.
	ErrBadTree = errors.New("bad tree")
	// ErrTooLarge means a pack or a tree exceeded a configured bound.
	ErrTooLarge = errors.New("too large")
	// ErrClosed means the Pool was closed.
	ErrClosed = errors.New("pool closed")
)
