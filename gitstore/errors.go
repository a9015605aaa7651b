package gitstore

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/skillreg/skillreg/gitref"
	"github.com/skillreg/skillreg/gitstore/packdb"
)

// Sentinel errors; compare with errors.Is. Every error this package returns
// wraps one of them or a context error, plus the cause.
var (
	// ErrInvalidPin means a pin's kind or value is malformed. It is
	// gitref's sentinel: pins are validated there, once.
	ErrInvalidPin = gitref.ErrInvalidPin
	// ErrInvalidURL means a remote URL is not an accepted https, http or
	// file URL, or carries credentials. It is gitref's sentinel:
	// repositories are validated there, once.
	ErrInvalidURL = gitref.ErrInvalidRepo
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
	// It is packdb.ErrNotFound.
	ErrObjectNotFound = packdb.ErrNotFound
	// ErrCorrupt means the local store holds an object that does not decode
	// or does not hash to its id. The store repairs itself on the next
	// Fetch, which then downloads the commit again. It is packdb.ErrCorrupt.
	ErrCorrupt = packdb.ErrCorrupt
	// ErrBadTree means a commit's tree breaks git's own rules in a way no
	// path can carry (an empty entry name, a slash in one, an entry listed
	// twice): the repository's content is at fault, not the network or the
	// store, so fetching again cannot help. Entries named "." or ".." are
	// reported as path segments instead, for the index to exclude only the
	// skill holding them.
	ErrBadTree = errors.New("bad tree")
	// ErrTooLarge means a pack or a tree exceeded a configured bound, or
	// an object one that keeps memory bounded. It is packdb.ErrTooLarge.
	ErrTooLarge = packdb.ErrTooLarge
	// ErrStorage means the file system refused to write (or read) the
	// local store for now: a full disk, a quota, a read-only mount, an I/O
	// error, permissions. Nothing is discarded for it; the store keeps
	// what it holds and the next Fetch repairs it again.
	ErrStorage = errors.New("object store cannot be written now")
	// ErrClosed means the Pool was closed.
	ErrClosed = errors.New("pool closed")
)

// cannotWriteNow reports whether err is the file system refusing an
// operation for a reason that says nothing about the store's contents,
// and that may pass: only proven damage (an object or pack that does not
// check out, a directory that is not a store) may cost the store its
// files.
func cannotWriteNow(err error) bool {
	for _, errno := range []syscall.Errno{
		syscall.ENOSPC, syscall.EDQUOT, syscall.EROFS, syscall.EIO, syscall.EFBIG,
		syscall.EACCES, syscall.EPERM, syscall.ENOMEM, syscall.EMFILE, syscall.ENFILE,
	} {
		if errors.Is(err, errno) {
			return true
		}
	}
	return errors.Is(err, ErrStorage)
}

// storageErr wraps err in ErrStorage when it is a refusal of that kind.
func storageErr(err error) error {
	if cannotWriteNow(err) && !errors.Is(err, ErrStorage) {
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	return err
}
