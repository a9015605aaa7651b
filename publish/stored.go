package publish

import "sync"

// ArchiveDigests keeps the skill archives' digests across restarts (the
// store implements it). A key names what determines an archive's bytes
// (entryKey: the skill's name, its files' paths, modes and content
// digests, and the archive format), so a stored digest is never wrong for
// a later catalog, only unused. Without it the first view after every
// restart reads and zips every file of the catalog again: at 100,000
// skills 300,000 files, a third of the CPU of the minutes after a restart.
type ArchiveDigests interface {
	// LookupArchiveDigests returns digests[i] for keys[i] where found[i],
	// and how many digests are stored in all.
	LookupArchiveDigests(keys [][32]byte) (digests [][32]byte, found []bool, stored int, err error)
	// PutArchiveDigests stores digests[i] under keys[i]; with replace,
	// only these stay stored.
	PutArchiveDigests(keys, digests [][32]byte, replace bool) error
}

// archiveFormat is part of every entry key: change it whenever the same
// files would make other archive bytes, so that no stored digest of the
// old format is taken for the new.
const archiveFormat = "skillreg zip 1"

// digestSave is what a view has left to store once built: when the
// store holds many digests no entry uses, every entry's (replace). The
// digests a build makes otherwise are stored as it makes them.
type digestSave struct {
	replace bool
	once    sync.Once
}

// lookupStored takes the digests of the entries still to digest from the
// store. first says the view is the process's first: then the store's
// unused digests are counted, and dropped when they are more than a
// quarter of the entries.
func (h *Handler) lookupStored(v *view, first bool) {
	if h.o.Digests == nil {
		return
	}
	var idx []int32
	var keys [][32]byte
	for i := range v.entries {
		if e := &v.entries[i]; e.skip() == "" && !e.zipOK {
			idx = append(idx, int32(i))
			keys = append(keys, e.key)
		}
	}
	if len(keys) == 0 {
		return
	}
	digests, found, stored, err := h.o.Digests.LookupArchiveDigests(keys)
	if err != nil {
		h.log.Warn("cannot read the stored archive digests; digesting the archives again", "err", err)
		return
	}
	used := 0
	for j, i := range idx {
		if found[j] {
			e := &v.entries[i]
			e.zip, e.zipOK = digests[j], true
			used++
		}
	}
	v.save.replace = first && stored-used > len(v.entries)/4
}

// saveDigests replaces the stored digests by v's when lookupStored found
// the store holding too many unused ones (see digestSave), once per view.
// It runs after the view is served, from Warm.
func (h *Handler) saveDigests(v *view) {
	if h.o.Digests == nil || !v.save.replace {
		return
	}
	v.save.once.Do(func() {
		all := make([]int32, len(v.entries))
		for i := range all {
			all[i] = int32(i)
		}
		h.putDigests(v, all, true)
	})
}

// putDigests stores the digests of v's entries at idx that have one, in
// writes of saveBatch (one transaction of 100,000 would hold every key,
// value and page it touched at once, beside the daemon's peak); with
// replace the first write drops what was stored before.
func (h *Handler) putDigests(v *view, idx []int32, replace bool) {
	if h.o.Digests == nil {
		return
	}
	var keys, digests [][32]byte
	stored := 0
	flush := func() bool {
		if len(keys) == 0 && !replace {
			return true
		}
		if err := h.o.Digests.PutArchiveDigests(keys, digests, replace); err != nil {
			h.log.Warn("cannot store the archive digests; the next restart digests these archives again", "archives", len(keys), "stored", stored, "err", err)
			return false
		}
		stored += len(keys)
		keys, digests, replace = keys[:0], digests[:0], false
		return true
	}
	for _, i := range idx {
		if e := &v.entries[i]; e.skip() == "" && e.zipOK {
			keys, digests = append(keys, e.key), append(digests, e.zip)
		}
		if len(keys) >= saveBatch && !flush() {
			return
		}
	}
	flush()
}

// saveBatch is how many digests one write stores (a variable for tests).
var saveBatch = 8192
