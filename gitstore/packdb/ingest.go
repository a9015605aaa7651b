package packdb

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/go-git/go-git/v5/plumbing"
)

// IngestOptions says how to read one incoming pack.
type IngestOptions struct {
	// Thin allows deltas against objects the store already holds, as a
	// fetch that told the server what it has receives them. Those bases
	// are appended to the pack, as git's index-pack --fix-thin does,
	// because a pack on disk must stand alone.
	Thin bool
	// OnTree, if set, sees every tree's content (already checked against
	// its id) as it is indexed, so the caller need not read it back.
	OnTree func(id plumbing.Hash, content []byte)
}

// Ingest reads a pack from src, writes it under a temporary name while
// indexing it in the same pass, and places it (index first, both synced)
// in the directory. It returns the pack's name ("pack-<checksum>") and
// index, for the caller to check the pack brings what it asked for;
// readers see it after the next Reload. Nothing is left behind on
// failure. A pack that does not parse fails with ErrMalformed, an object
// or delta over MaxObjectBytes with ErrTooLarge; src's own errors are
// returned as they are. Bound src: Ingest reads it to the trailer.
func (db *DB) Ingest(ctx context.Context, src io.Reader, opts IngestOptions) (string, *Index, error) {
	f, err := os.CreateTemp(db.dir, "tmp_pack_")
	if err != nil {
		return "", nil, err
	}
	keep := false
	defer func() {
		if !keep {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	var external func(plumbing.Hash) (externalObject, bool, error)
	if opts.Thin {
		s, err := db.Snapshot()
		if err != nil {
			return "", nil, err
		}
		defer s.Release()
		external = func(id plumbing.Hash) (externalObject, bool, error) {
			obj, err := s.Object(plumbing.AnyObject, id)
			if errors.Is(err, ErrNotFound) {
				return externalObject{}, false, nil
			}
			if err != nil {
				return externalObject{}, false, fmt.Errorf("thin pack base %s: %w", id, err)
			}
			data := obj.Data
			if obj.Stream != nil {
				data, err = io.ReadAll(obj.Stream)
				obj.Close()
				if err != nil {
					return externalObject{}, false, fmt.Errorf("thin pack base %s: %w", id, err)
				}
			}
			return externalObject{typ: obj.Type, data: data}, true, nil
		}
	}
	data, sum, err := indexPack(src, f, db.opts.StreamAbove, external, opts.OnTree)
	if err != nil {
		return "", nil, err
	}
	if err := ctx.Err(); err != nil {
		return "", nil, err
	}
	idx, err := parseIndex(data)
	if err != nil { // what encodeIndex wrote must parse
		return "", nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	name, err := placePack(f, data, sum)
	if err != nil {
		return "", nil, err
	}
	keep = true
	return "pack-" + name, idx, nil
}

// Verify checks that the pack name ("pack-<checksum>") has an index that
// decodes and belongs to it, and that its trailer is its name; with full,
// also that the pack's content hashes to its trailer. It returns the
// decoded index, for Reload. The full check re-reads and hashes the whole
// pack, a large share of a restart (the `make bench` row "restart to first
// skills/list answer, ... of a git source" is a clean restart, without
// it): it is for a store whose last process did not close it cleanly. After a clean close
// every pack was synced before it was renamed into place, and every
// object read checks the object's id anyway. File system errors are
// returned as they are, for the caller to tell a disk that refuses for
// now from a pack that is damaged.
func (db *DB) Verify(name string, full bool) (*Index, error) {
	want, ok := cutPackName(name)
	if !ok {
		return nil, fmt.Errorf("%w: unexpected pack name %q", ErrCorrupt, name)
	}
	idx, err := readIndex(filepath.Join(db.dir, name+".idx"))
	if err != nil {
		return nil, err
	}
	if err := checkPack(filepath.Join(db.dir, name+".pack"), want, idx, full); err != nil {
		return nil, err
	}
	return idx, nil
}

// cutPackName returns the checksum of "pack-<40 lowercase hex digits>".
func cutPackName(name string) (string, bool) {
	sum, ok := bytes.CutPrefix([]byte(name), []byte("pack-"))
	if !ok || len(sum) != 40 {
		return "", false
	}
	for _, c := range sum {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return "", false
		}
	}
	return string(sum), true
}

func checkPack(path, want string, idx *Index, full bool) error {
	if got := idx.PackChecksum().String(); got != want {
		return fmt.Errorf("%w: index is for pack %s", ErrCorrupt, got)
	}
	count := int64(idx.Count())
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	size := st.Size()
	if size < packHeaderLen+packTrailerLen {
		return fmt.Errorf("%w: pack of %d bytes", ErrCorrupt, size)
	}
	var hdr [packHeaderLen]byte
	if _, err := f.ReadAt(hdr[:], 0); err != nil {
		return err
	}
	if string(hdr[:4]) != "PACK" || int64(binary.BigEndian.Uint32(hdr[8:])) < count {
		return fmt.Errorf("%w: pack header does not match its index", ErrCorrupt)
	}
	var trailer [packTrailerLen]byte
	if _, err := f.ReadAt(trailer[:], size-packTrailerLen); err != nil {
		return err
	}
	if plumbing.Hash(trailer).String() != want {
		return fmt.Errorf("%w: pack checksum mismatch", ErrCorrupt)
	}
	if !full {
		return nil
	}
	h := sha1.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, size-packTrailerLen)); err != nil {
		return err
	}
	if !bytes.Equal(h.Sum(nil), trailer[:]) {
		return fmt.Errorf("%w: pack checksum mismatch", ErrCorrupt)
	}
	return nil
}
