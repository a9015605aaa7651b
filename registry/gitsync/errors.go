// Package gitsync keeps one bare, shallow git object store per remote
// repository and reads commits straight from it: list the remote's refs,
// resolve a pin to a commit, fetch only what is new, walk a commit's tree,
// read blobs by id, and prune what no kept commit needs. It never checks
// out a working tree (go-git's checkout is quadratic on large trees) and
// knows nothing about skills.
//
// Fetches speak the smart protocol through go-git's transport but drive
// the negotiation themselves: "deepen 1" with the commits already held
// sent as both "have" and "shallow", and a thin pack completed locally
// (git's index-pack --fix-thin). go-git's own Fetch either refetches the
// whole tree on every update (Depth: 1, because it never asks for a thin
// pack, and git's pack-objects only leaves out what the client holds when
// the pack may be thin) or can miss objects after a force-push (Depth: 0
// without shallow lines lets the server assume the client holds history it
// does not).
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
	// ErrTooLarge means a pack or a tree exceeded a configured bound.
	ErrTooLarge = errors.New("too large")
	// ErrClosed means the Pool was closed.
	ErrClosed = errors.New("pool closed")
)
