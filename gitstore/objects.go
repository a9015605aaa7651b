package gitstore

import (
	"fmt"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/skillreg/skillreg/gitref"
)

// MaxObjectRead bounds the content ReadObject returns: commits and tags
// are a few hundred bytes, and a tree above this is refused by Walk
// already (largeObject). Blobs are read with OpenBlob, which streams.
const MaxObjectRead = 4 << 20

// ReadObject returns an object's type ("commit", "tag", "tree" or "blob")
// and its content without the "<type> <size>\0" header, read from the
// store and checked against its id: the raw bytes a signature covers
// (commits, tags) and a proof carries. ErrObjectNotFound when the store
// does not hold it, ErrTooLarge above MaxObjectRead. Errors start
// "read object <id> in <url>".
func (r *Repo) ReadObject(id string) (kind string, data []byte, err error) {
	kind, data, err = r.readObject(id)
	if err != nil {
		return "", nil, fmt.Errorf("read object %s in %s: %w", id, r.url, err)
	}
	return kind, data, nil
}

func (r *Repo) readObject(id string) (string, []byte, error) {
	if err := r.usable(); err != nil {
		return "", nil, err
	}
	h, err := parseID(id)
	if err != nil {
		return "", nil, err
	}
	s, err := r.db.Snapshot()
	if err != nil {
		return "", nil, err
	}
	defer s.Release()
	obj, err := s.Object(plumbing.AnyObject, h)
	if err != nil {
		r.noteError(err)
		return "", nil, err
	}
	if obj.Stream != nil || obj.Size > MaxObjectRead {
		obj.Close()
		return "", nil, fmt.Errorf("%w: a %s of %d bytes (at most %d)", ErrTooLarge, obj.Type, obj.Size, MaxObjectRead)
	}
	return obj.Type.String(), obj.Data, nil
}

// hasObject reports whether the store holds an object, without reading it.
func (r *Repo) hasObject(id string) bool {
	if r.usable() != nil || !gitref.IsCommitID(id) {
		return false
	}
	s, err := r.db.Snapshot()
	if err != nil {
		return false
	}
	defer s.Release()
	return s.Has(plumbing.NewHash(id))
}
