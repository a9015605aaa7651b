package packdb

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
)

// Repack writes the objects in keep (id -> type), read from s, into one
// new pack and places it; it returns the pack's name ("pack-<checksum>").
// Commits come first, then trees, then blobs, so that what a tree walk
// reads sits together. Whole (non-delta) entries are copied as they are,
// compressed bytes and all, after checking them against the CRC-32 their
// index recorded when they arrived; deltas are resolved and written
// whole, because their bases may not be kept. The old packs stay: the
// caller removes them (Remove) once it no longer needs them, and then
// Reloads. ErrNotFound if s lacks an object of keep, ErrCorrupt if one is
// damaged.
func (db *DB) Repack(ctx context.Context, s *Snapshot, keep map[plumbing.Hash]plumbing.ObjectType) (string, error) {
	type source struct {
		id  plumbing.Hash
		p   *pack
		off int64
	}
	srcs := make([]source, 0, len(keep))
	for id := range keep {
		p, off, ok := s.find(id)
		if !ok {
			return "", fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		srcs = append(srcs, source{id, p, off})
	}
	slices.SortFunc(srcs, func(a, b source) int {
		if c := int(keep[a.id]) - int(keep[b.id]); c != 0 {
			return c
		}
		if c := strings.Compare(a.p.name, b.p.name); c != 0 {
			return c
		}
		return int(a.off - b.off) // sequential reads of each pack
	})
	f, err := os.CreateTemp(db.dir, "tmp_pack_")
	if err != nil {
		return "", err
	}
	defer func() {
		f.Close()
		os.Remove(f.Name()) // a no-op once renamed
	}()
	pw, err := newPackWriter(f, uint32(len(srcs)))
	if err != nil {
		return "", err
	}
	ends := map[*pack][]int64{}
	for i, src := range srcs {
		if i%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return "", err
			}
		}
		offs, ok := ends[src.p]
		if !ok {
			offs = src.p.idx.offsets()
			ends[src.p] = offs
		}
		copied, err := copyWholeEntry(pw, src.p, offs, src.off, src.id)
		if err != nil {
			return "", err
		}
		if copied {
			continue
		}
		obj, err := s.Object(keep[src.id], src.id)
		if err != nil {
			return "", err
		}
		err = pw.add(obj.Type, obj.Size, obj.Reader())
		obj.Close()
		if err != nil {
			return "", err
		}
	}
	sum, err := pw.finish()
	if err != nil {
		return "", err
	}
	idx := encodeIndex(pw.entries, idxKey, sum)
	pw.entries = nil
	name, err := placePack(f, idx, sum)
	if err != nil {
		return "", err
	}
	return "pack-" + name, nil
}

// copyWholeEntry copies the entry at off verbatim if it is a whole object
// and reports whether it did; deltas are left to the caller.
func copyWholeEntry(pw *packWriter, p *pack, offs []int64, off int64, id plumbing.Hash) (bool, error) {
	i, found := slices.BinarySearch(offs, off)
	if !found {
		return false, fmt.Errorf("%w: %s: no entry at %d", ErrCorrupt, p.name, off)
	}
	end := p.size - packTrailerLen
	if i+1 < len(offs) {
		end = offs[i+1]
	}
	t, _, _, _, err := readEntryHeader(bufio.NewReaderSize(io.NewSectionReader(p.f, off, end-off), 64))
	if err != nil {
		return false, fmt.Errorf("%w: %s entry at %d: %v", ErrCorrupt, p.name, off, err)
	}
	if t.IsDelta() {
		return false, nil
	}
	at, ok := p.idx.find(id)
	if !ok {
		return false, fmt.Errorf("%w: %s: not in the index of %s", ErrCorrupt, id, p.name)
	}
	return true, pw.addRaw(id, io.NewSectionReader(p.f, off, end-off), p.idx.crc(at))
}
