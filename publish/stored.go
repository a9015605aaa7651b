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

// digestSave is what a view has to store once built: the entries whose
// archives its build digested (neither the view before nor the store had
// them), or, when the store holds many digests no entry uses, every
// entry's.
type digestSave struct {
	fresh   []int32
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

// saveDigests stores what v's build digested (see digestSave), once per
// view. It runs after the view is served, from Warm: a 100,000-skill
// first view's digests are one write of a few megabytes.
func (h *Handler) saveDigests(v *view) {
	if h.o.Digests == nil {
		return
	}
	v.save.once.Do(func() {
		// In batches: at 100,000 skills one transaction would hold
		// every key, value and page it touched at once, beside the
		// daemon's peak.
		var keys, digests [][32]byte
		replace, stored := v.save.replace, 0
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
		add := func(e *entry) bool {
			if e.skip() == "" && e.zipOK {
				keys, digests = append(keys, e.key), append(digests, e.zip)
			}
			return len(keys) < saveBatch || flush()
		}
		if v.save.replace {
			for i := range v.entries {
				if !add(&v.entries[i]) {
					return
				}
			}
		} else {
			for _, i := range v.save.fresh {
				if !add(&v.entries[i]) {
					return
				}
			}
		}
		v.save.fresh = nil
		flush()
	})
}

// saveBatch is how many digests one write stores (a variable for tests).
var saveBatch = 8192
