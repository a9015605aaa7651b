package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"unsafe"

	bolt "go.etcd.io/bbolt"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/skill"
)

// encodedSkill is one skill record, encoded before the transaction opens.
type encodedSkill struct {
	key []byte
	val []byte
	sk  *skill.Skill
}

// savedSkills is what the last save of a source stored: the snapshot's
// kind and its skills, sorted by path (8 bytes a skill: the values are the
// snapshot's own).
type savedSkills struct {
	kind   catalog.Kind
	skills []*skill.Skill
}

// countsDigests reports whether the digest map holds the file keys of a
// snapshot of this kind. Only git's keys (blob ids) are worth keeping
// across a restart: they name bytes wherever they appear, in another
// path, commit or source. A directory's keys are the file's path and stat
// data, which only that same file can match again, and the restored
// snapshot's skills already carry them with their digests (skill.Index
// reuses an unchanged skill from them without reading); at 100,000 skills
// the 300,000 entries took 50 MiB of the file and 80 MiB of heap once
// loaded, to save rehashing a changed skill's other files.
func countsDigests(k catalog.Kind) bool { return k == catalog.KindGit }

// Saves whose records come to more than stagedBytes (estimated) are
// written in transactions of about stageBatchBytes each into a staging
// bucket, then switched in by one small transaction: a transaction holds
// every page it writes on the heap until it commits (a first save of
// 100,000 skills in one transaction held the whole file), while a restart
// must never see a catalog without its commit.
var (
	stagedBytes     = 8 << 20
	stageBatchBytes = 4 << 20
	// stageHook, when set (by tests), runs after each staged batch
	// commits; an error stops the save there.
	stageHook func(batch int) error
)

// SaveSnapshot stores a source's snapshot (replacing the previous one) and
// its state in one transaction, so that a restart never sees a catalog
// without the commit it came from. Skill records equal to the stored ones
// are not rewritten, so a sync that changed one skill of thousands writes
// a few pages; the digest map gains the new files' keys and loses the
// keys no stored snapshot references any more, in the same transaction.
// A save that writes many records writes them first into a staging
// bucket, in several transactions, and then switches the snapshot's
// header, state and records in one.
//
// Skills are taken to be immutable once saved, as the registry's are: the
// store remembers which skill values it stored last for each source, and
// a later save of the same source encodes and writes only the skills that
// are not among them. Other skills (after a restart, or after a failed
// save) are encoded and compared with the stored records.
func (s *Store) SaveSnapshot(snap *catalog.Snapshot, st catalog.State) error {
	if snap == nil {
		return errors.New("save snapshot: nil snapshot")
	}
	name := snap.Source
	if name == "" || st.Source != name {
		return fmt.Errorf("save snapshot of source %q with the state of source %q: they must name the same source", name, st.Source)
	}
	sorted, err := sortedSkills(snap.Skills)
	if err != nil {
		return fmt.Errorf("save snapshot of %s at %s: %w", name, snap.Commit, err)
	}
	lock := s.sourceLock(name)
	lock.Lock()
	defer lock.Unlock()
	written, err := s.saveSnapshot(snap, sorted, st)
	s.mu.Lock()
	s.gens[name]++
	if err != nil {
		// The file may or may not hold what was written: compare bytes
		// next time.
		delete(s.saved, name)
	} else {
		s.saved[name] = &savedSkills{kind: snap.Kind, skills: sorted}
	}
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("save snapshot of %s at %s: %w", name, snap.Commit, err)
	}
	s.log.Debug("snapshot stored", "source", name, "commit", snap.Commit, "skills", len(snap.Skills), "written", written)
	return nil
}

// sortedSkills returns the skills sorted by path (skills itself when it
// is), refusing nil skills and two skills at one path.
func sortedSkills(skills []*skill.Skill) ([]*skill.Skill, error) {
	for i, sk := range skills {
		if sk == nil {
			return nil, fmt.Errorf("skill %d is nil", i)
		}
	}
	byPath := func(a, b *skill.Skill) int { return strings.Compare(a.Path, b.Path) }
	if !slices.IsSortedFunc(skills, byPath) {
		skills = slices.SortedStableFunc(slices.Values(skills), byPath)
	}
	for i := 1; i < len(skills); i++ {
		if skills[i-1].Path == skills[i].Path {
			return nil, fmt.Errorf("two skills at path %q", skills[i].Path)
		}
	}
	return skills, nil
}

// sourceLock returns the lock that orders saves and deletes of a source.
func (s *Store) sourceLock(name string) *sync.Mutex {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.locks[name]
	if !ok {
		l = new(sync.Mutex)
		s.locks[name] = l
	}
	return l
}

// storedKind reads the kind of the snapshot stored in a source's bucket:
// known is false when there is none, damaged when its header does not
// check out.
func storedKind(src *bolt.Bucket) (kind catalog.Kind, known, damaged bool) {
	h := src.Get(keySnapshot)
	if h == nil {
		return "", false, false
	}
	payload, err := unseal(keySnapshot, h)
	if err != nil {
		return "", false, true
	}
	hdr, _, _, err := decodeHeader(string(payload))
	if err != nil {
		return "", false, true
	}
	return hdr.Kind, true, false
}

// oldRefs prepares the digest delta of replacing the records of a source
// whose stored snapshot is described by storedKind with records of kind
// newKind: counted tells whether the stored records' references are in
// the map (so dropping them must decrement). When that is unknown, or the
// kinds count differently (the unchanged records would have to move
// too), apply recounts from the records instead.
func oldRefs(src *bolt.Bucket, newKind catalog.Kind) (refs *refDelta, counted bool) {
	refs = newRefDelta()
	kind, known, damaged := storedKind(src)
	skills := src.Bucket(keySkills)
	switch {
	case damaged:
		refs.broken = true
	case !known:
		refs.broken = skills != nil && notEmpty(skills)
	case countsDigests(kind) != countsDigests(newKind):
		refs.broken = true
	}
	return refs, known && countsDigests(kind)
}

// saveSnapshot writes a snapshot and returns how many skill records it
// wrote or deleted.
func (s *Store) saveSnapshot(snap *catalog.Snapshot, sorted []*skill.Skill, st catalog.State) (written int, err error) {
	name := snap.Source
	stateJSON, err := json.Marshal(st)
	if err != nil {
		return 0, fmt.Errorf("encode state: %w", err)
	}
	stateJSON = seal(keyState, stateJSON)
	// Every snapshot the registry stores passed this version's
	// CheckStored: indexed by it, or restored and judged.
	header := seal(keySnapshot, encodeHeader(snap, skill.StoredRules))
	s.mu.Lock()
	stored := s.saved[name]
	s.mu.Unlock()

	// What to write: when the stored skills are known, the skills that
	// are not among them, found before the transaction; otherwise, for a
	// big snapshot, the records that differ from the stored ones, found
	// a batch at a time; for a small one, all of them, compared in the
	// transaction.
	var toEncode []*skill.Skill
	var removed [][]byte // keys of stored records the snapshot no longer has
	compare := false
	switch {
	case stored != nil:
		old := stored.skills
		i, j := 0, 0
		for i < len(sorted) || j < len(old) {
			switch {
			case j == len(old) || i < len(sorted) && sorted[i].Path < old[j].Path:
				toEncode = append(toEncode, sorted[i])
				i++
			case i == len(sorted) || old[j].Path < sorted[i].Path:
				removed = append(removed, skillKey(old[j].Path))
				j++
			default:
				if sorted[i] != old[j] {
					toEncode = append(toEncode, sorted[i])
				}
				i++
				j++
			}
		}
	case estimateRecords(sorted) > stagedBytes:
		var n int
		if removed, n, err = s.removedRecords(name, sorted); err != nil {
			return 0, err
		}
		if n == 0 { // a first save: nothing to compare with
			return s.saveStaged(snap, sorted, stateJSON, header)
		}
		toEncode = sorted
	default:
		toEncode, compare = sorted, true
	}
	if !compare && estimateRecords(toEncode) > stagedBytes {
		// Other values may still encode to the stored bytes (a source
		// indexed afresh, say).
		if toEncode, err = s.changedRecords(name, toEncode); err != nil {
			return 0, err
		}
	}
	if estimateRecords(toEncode) > stagedBytes {
		return s.saveStaged(snap, sorted, stateJSON, header)
	}
	recs := encodeSkills(toEncode)

	err = s.update("save snapshot", func(tx *bolt.Tx) error {
		written = 0
		src, err := sourceBucket(tx, name)
		if err != nil {
			return err
		}
		refs, counted := oldRefs(src, snap.Kind)
		adds := countsDigests(snap.Kind)
		drop := func(k, v []byte) {
			if counted && v != nil {
				refs.drop(k, v)
			}
		}
		add := func(sk *skill.Skill) {
			if adds {
				refs.add(sk)
			}
		}
		if err := src.Put(keyState, stateJSON); err != nil {
			return err
		}
		if err := src.Put(keySnapshot, header); err != nil {
			return err
		}
		if err := dropStaging(src, refs); err != nil { // left by a staged save that failed
			return err
		}
		skills, err := src.CreateBucketIfNotExists(keySkills)
		if err != nil {
			return err
		}
		if !compare {
			written = len(removed) + len(recs)
			for _, k := range removed {
				drop(k, skills.Get(k))
				if err := skills.Delete(k); err != nil {
					return err
				}
			}
			for _, r := range recs {
				drop(r.key, skills.Get(r.key))
				add(r.sk)
				if err := skills.Put(r.key, r.val); err != nil {
					return fmt.Errorf("skill %q: %w", r.sk.Path, err)
				}
			}
			return refs.apply(tx)
		}
		// Plan against the stored records first (bbolt cursors do not
		// survive changes to their bucket), then apply.
		var puts []int
		var dels [][]byte
		c := skills.Cursor()
		k, v := c.First()
		i := 0
		for k != nil || i < len(recs) {
			switch cmp := compareNext(k, recs, i); {
			case cmp < 0: // stored, gone from the snapshot
				drop(k, v)
				dels = append(dels, bytes.Clone(k))
				k, v = c.Next()
			case cmp > 0: // new
				add(recs[i].sk)
				puts = append(puts, i)
				i++
			default:
				if !bytes.Equal(v, recs[i].val) {
					drop(k, v)
					add(recs[i].sk)
					puts = append(puts, i)
				}
				k, v = c.Next()
				i++
			}
		}
		written = len(dels) + len(puts)
		for _, k := range dels {
			if err := skills.Delete(k); err != nil {
				return err
			}
		}
		// Fill leaves when the records arrive in order (a first save):
		// the default half-full split would double the file.
		if len(puts) == len(recs) && len(dels) == 0 {
			skills.FillPercent = 0.9
		}
		for _, i := range puts {
			if err := skills.Put(recs[i].key, recs[i].val); err != nil {
				return fmt.Errorf("skill %q: %w", recs[i].sk.Path, err)
			}
		}
		return refs.apply(tx)
	})
	return written, err
}

// changedRecords compares the records of skills (sorted by path) with
// the stored ones, a batch at a time in read transactions, and returns
// the skills whose records differ or are new.
func (s *Store) changedRecords(name string, sorted []*skill.Skill) (changed []*skill.Skill, err error) {
	for lo := 0; lo < len(sorted); {
		hi := nextBatch(sorted, lo)
		recs := encodeSkills(sorted[lo:hi])
		err := s.view("compare snapshot", func(tx *bolt.Tx) error {
			var skills *bolt.Bucket
			if src := tx.Bucket(bucketSources).Bucket([]byte(name)); src != nil {
				skills = src.Bucket(keySkills)
			}
			for _, r := range recs {
				if skills == nil || !bytes.Equal(skills.Get(r.key), r.val) {
					changed = append(changed, r.sk)
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		lo = hi
	}
	return changed, nil
}

// removedRecords returns the keys of the stored records of a source that
// are not records of these skills (sorted by path), and how many records
// are stored.
func (s *Store) removedRecords(name string, sorted []*skill.Skill) (removed [][]byte, stored int, err error) {
	err = s.view("compare snapshot", func(tx *bolt.Tx) error {
		src := tx.Bucket(bucketSources).Bucket([]byte(name))
		if src == nil || src.Bucket(keySkills) == nil {
			return nil
		}
		i := 0
		for k := range eachRecord(src.Bucket(keySkills)) {
			stored++
			if len(k) == 0 || k[0] != skillKeyPrefix {
				removed = append(removed, bytes.Clone(k))
				continue
			}
			for i < len(sorted) && sorted[i].Path < string(k[1:]) {
				i++
			}
			if i == len(sorted) || sorted[i].Path != string(k[1:]) {
				removed = append(removed, bytes.Clone(k))
			}
		}
		return nil
	})
	return removed, stored, err
}

// nextBatch returns where the batch of records starting at lo ends:
// about stageBatchBytes of them, at least one.
func nextBatch(sorted []*skill.Skill, lo int) int {
	hi, size := lo, 0
	for hi < len(sorted) && (hi == lo || size+estimateRecord(sorted[hi]) <= stageBatchBytes) {
		size += estimateRecord(sorted[hi])
		hi++
	}
	return hi
}

// skillKey is the key of the record of the skill at path.
func skillKey(path string) []byte { return append([]byte{skillKeyPrefix}, path...) }

// saveStaged writes every record of a snapshot into the source's staging
// bucket, a batch per transaction, then switches it in with the header
// and state in one more: until that commits, the stored snapshot is the
// previous one, whole. A failure in between leaves the staging bucket,
// which the next save of the source deletes.
func (s *Store) saveStaged(snap *catalog.Snapshot, sorted []*skill.Skill, stateJSON, header []byte) (int, error) {
	name := snap.Source
	err := s.update("stage snapshot", func(tx *bolt.Tx) error {
		src, err := sourceBucket(tx, name)
		if err != nil {
			return err
		}
		left := newRefDelta()
		if err := dropStaging(src, left); err != nil {
			return err
		}
		staging, err := src.CreateBucket(keyStaging)
		if err != nil {
			return err
		}
		if _, err = staging.CreateBucket(keySkills); err != nil {
			return err
		}
		return left.apply(tx)
	})
	if err != nil {
		return 0, err
	}
	staged := func(tx *bolt.Tx) (*bolt.Bucket, error) {
		if src := tx.Bucket(bucketSources).Bucket([]byte(name)); src != nil {
			if st := src.Bucket(keyStaging); st != nil && st.Bucket(keySkills) != nil {
				return st, nil
			}
		}
		return nil, errors.New("staging bucket gone")
	}
	for batch, lo := 0, 0; lo < len(sorted); batch++ {
		hi := nextBatch(sorted, lo)
		recs := encodeSkills(sorted[lo:hi])
		err := s.update("stage skills", func(tx *bolt.Tx) error {
			st, err := staged(tx)
			if err != nil {
				return err
			}
			skills := st.Bucket(keySkills)
			skills.FillPercent = 0.9 // in key order
			for _, r := range recs {
				if err := skills.Put(r.key, r.val); err != nil {
					return fmt.Errorf("skill %q: %w", r.sk.Path, err)
				}
			}
			return nil
		})
		if err == nil && stageHook != nil {
			err = stageHook(batch)
		}
		if err != nil {
			return 0, err
		}
		lo = hi
	}
	if countsDigests(snap.Kind) {
		if err := s.stageDigests(name, sorted, nBatches(sorted)); err != nil {
			return 0, err
		}
	}
	err = s.update("save snapshot", func(tx *bolt.Tx) error {
		st, err := staged(tx)
		if err != nil {
			return err
		}
		src := tx.Bucket(bucketSources).Bucket([]byte(name))
		refs, counted := oldRefs(src, snap.Kind)
		if old := src.Bucket(keySkills); old != nil {
			if counted && !refs.broken {
				if err := old.ForEach(func(k, v []byte) error { refs.drop(k, v); return nil }); err != nil {
					return err
				}
			}
			if err := src.DeleteBucket(keySkills); err != nil {
				return err
			}
		}
		// The staged records' references are counted already
		// (stageDigests): switched in, they stay counted.
		if err := st.MoveBucket(keySkills, src); err != nil {
			return fmt.Errorf("switch in the staged records: %w", err)
		}
		if err := src.DeleteBucket(keyStaging); err != nil {
			return err
		}
		if err := src.Put(keyState, stateJSON); err != nil {
			return err
		}
		if err := src.Put(keySnapshot, header); err != nil {
			return err
		}
		return refs.apply(tx)
	})
	if err != nil {
		return 0, err
	}
	return len(sorted), nil
}

// nBatches is how many record batches saveStaged writes for sorted.
func nBatches(sorted []*skill.Skill) int {
	n := 0
	for lo := 0; lo < len(sorted); n++ {
		lo = nextBatch(sorted, lo)
	}
	return n
}

// digestEntryBytes is about what one digest entry costs a transaction
// (its key, its sealed value and bbolt's node for them).
const digestEntryBytes = 192

// stageDigests adds the references of a staged save's records to the
// digest map, in key order, about stageBatchBytes per transaction, each
// moving the staging bucket's "digested" mark to the last key it added:
// the map then counts every staged key up to the mark (stagedFileKeys),
// which is what a failed save's cleanup takes off again. In one
// transaction, the 300,000 keys of a first save of 100,000 skills held
// their maps, encoded values and bbolt's nodes together, about 150 MB at
// the top of the sync's memory; in key order each batch also writes only
// the leaves of its range. Batches are numbered on from first for
// stageHook.
func (s *Store) stageDigests(name string, sorted []*skill.Skill, first int) error {
	type ref struct {
		key string
		dg  skill.Digest
	}
	n := 0
	for _, sk := range sorted {
		for _, f := range sk.Files {
			if f.Key != "" {
				n++
			}
		}
	}
	refs := make([]ref, 0, n) // 12 MB at 300,000 keys: grown by append, twice that
	for _, sk := range sorted {
		for _, f := range sk.Files {
			if f.Key != "" {
				refs = append(refs, ref{f.Key, skill.Digest{Digest: f.Digest, Size: f.Size}})
			}
		}
	}
	slices.SortFunc(refs, func(a, b ref) int { return strings.Compare(a.key, b.key) })
	per := max(1, stageBatchBytes/digestEntryBytes)
	for batch, lo := first, 0; lo < len(refs); batch++ {
		hi := min(lo+per, len(refs))
		for hi < len(refs) && refs[hi].key == refs[hi-1].key { // a key's references in one batch
			hi++
		}
		part := refs[lo:hi]
		err := s.update("stage digests", func(tx *bolt.Tx) error {
			src := tx.Bucket(bucketSources).Bucket([]byte(name))
			var st *bolt.Bucket
			if src != nil {
				st = src.Bucket(keyStaging)
			}
			b := tx.Bucket(bucketDigests)
			switch {
			case st == nil || st.Bucket(keySkills) == nil:
				return errors.New("staging bucket gone")
			case b == nil:
				return corrupt(tx.DB().Path(), errors.New("digests bucket missing"))
			}
			if last, _ := b.Cursor().Last(); last == nil || string(last) < part[0].key {
				b.FillPercent = 0.9 // appended in key order
			}
			damaged := false
			for i := 0; i < len(part); {
				j := i + 1
				for j < len(part) && part[j].key == part[i].key {
					j++
				}
				k, dg, refs := []byte(part[i].key), part[i].dg, uint64(j-i)
				if v := b.Get(k); v != nil {
					n, _, err := openDigest(k, v)
					if err != nil {
						damaged = true
						break
					}
					refs += n
				}
				if err := b.Put(k, seal(k, encodeDigest(refs, dg))); err != nil {
					return fmt.Errorf("digest of %q: %w", k, err)
				}
				i = j
			}
			if err := st.Put(keyDigested, []byte(part[len(part)-1].key)); err != nil {
				return err
			}
			if damaged {
				// A damaged count: recount every entry, this batch's
				// staged keys included (the mark covers them now).
				return recountDigests(tx)
			}
			return nil
		})
		if err == nil && stageHook != nil {
			err = stageHook(batch)
		}
		if err != nil {
			return err
		}
		lo = hi
	}
	return nil
}

// estimateRecord is about how many bytes a skill's record takes.
func estimateRecord(sk *skill.Skill) int {
	n := len(sk.Path) + 1 + 128 + 160*len(sk.Files)
	if sk.Frontmatter != nil {
		n += 2 * len(sk.Frontmatter.JSON)
	}
	return n
}

func estimateRecords(skills []*skill.Skill) int {
	n := 0
	for _, sk := range skills {
		n += estimateRecord(sk)
	}
	return n
}

// encodeSkills encodes the records of skills (sorted by path, none nil)
// into one buffer, in that order.
func encodeSkills(skills []*skill.Skill) []encodedSkill {
	e := enc{b: make([]byte, 0, estimateRecords(skills))}
	offs := make([][3]int, len(skills)) // key start, value start, end
	for i, sk := range skills {
		offs[i][0] = len(e.b)
		e.byte(skillKeyPrefix)
		e.b = append(e.b, sk.Path...)
		offs[i][1] = len(e.b)
		encodeSkill(&e, sk)
		e.b = appendContiguousSum(e.b, offs[i][0]) // key and value are contiguous
		offs[i][2] = len(e.b)
	}
	recs := make([]encodedSkill, len(skills))
	for i, o := range offs {
		recs[i] = encodedSkill{key: e.b[o[0]:o[1]:o[1]], val: e.b[o[1]:o[2]:o[2]], sk: skills[i]}
	}
	return recs
}

// compareNext compares the stored key k (nil when the cursor is done) with
// recs[i] (none when i is past the end): <0 when k comes first.
func compareNext(k []byte, recs []encodedSkill, i int) int {
	switch {
	case k == nil:
		return 1
	case i >= len(recs):
		return -1
	}
	return bytes.Compare(k, recs[i].key)
}

// sourceBucket returns a source's bucket, creating it.
func sourceBucket(tx *bolt.Tx, name string) (*bolt.Bucket, error) {
	sources := tx.Bucket(bucketSources)
	if sources == nil {
		return nil, corrupt(tx.DB().Path(), errors.New("sources bucket missing"))
	}
	b, err := sources.CreateBucketIfNotExists([]byte(name))
	if err != nil {
		return nil, fmt.Errorf("source bucket %q: %w", name, err)
	}
	return b, nil
}

// refDelta accumulates changes to the digest map's reference counts.
type refDelta struct {
	delta map[string]int64
	dg    map[string]skill.Digest // digests of keys gaining references
	// broken is set when a stored record that loses its references does
	// not check out: which keys it held is unknown, so apply recounts the
	// whole map from the records instead.
	broken bool
}

func newRefDelta() *refDelta {
	return &refDelta{delta: map[string]int64{}, dg: map[string]skill.Digest{}}
}

func (r *refDelta) add(sk *skill.Skill) {
	for _, f := range sk.Files {
		if f.Key != "" {
			r.delta[f.Key]++
			r.dg[f.Key] = skill.Digest{Digest: f.Digest, Size: f.Size}
		}
	}
}

// drop removes the references of a stored record. A record that does not
// check out (it is being replaced or deleted, which is how a damaged
// source heals) makes apply recount instead.
func (r *refDelta) drop(k, v []byte) {
	if err := recordFileKeys(k, v, func(key string, _ skill.Digest) { r.delta[key]-- }); err != nil {
		r.broken = true
	}
}

// recordFileKeys verifies a stored skill record and calls fn with the key,
// size and digest of each of its files that has a key.
func recordFileKeys(k, v []byte, fn func(key string, dg skill.Digest)) error {
	payload, err := unseal(k, v)
	if err != nil {
		return err
	}
	return skillFileKeys(string(payload), fn)
}

// apply writes the counts, in key order (bbolt writes sorted keys
// fastest), deleting entries that reach zero.
func (r *refDelta) apply(tx *bolt.Tx) error {
	b := tx.Bucket(bucketDigests)
	if b == nil {
		return corrupt(tx.DB().Path(), errors.New("digests bucket missing"))
	}
	if r.broken {
		return recountDigests(tx)
	}
	keys := make([]string, 0, len(r.delta))
	for k, d := range r.delta {
		if d != 0 {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	if k, _ := b.Cursor().First(); k == nil {
		b.FillPercent = 0.9 // a first save, in key order
	}
	for _, k := range keys {
		var refs int64
		dg, known := r.dg[k]
		if v := b.Get([]byte(k)); v != nil {
			n, old, err := openDigest([]byte(k), v)
			if err != nil {
				// A damaged count: recount every entry from the records.
				return recountDigests(tx)
			}
			refs = int64(n)
			if !known {
				dg = old
			}
		}
		refs += r.delta[k]
		if refs <= 0 {
			if err := b.Delete([]byte(k)); err != nil {
				return err
			}
			continue
		}
		if err := b.Put([]byte(k), seal([]byte(k), encodeDigest(uint64(refs), dg))); err != nil {
			return fmt.Errorf("digest of %q: %w", k, err)
		}
	}
	return nil
}

// SaveState stores a source's state, leaving its snapshot as it is.
func (s *Store) SaveState(st catalog.State) error {
	if st.Source == "" {
		return errors.New("save state: no source name")
	}
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("save state of %s: encode: %w", st.Source, err)
	}
	b = seal(keyState, b)
	err = s.update("save state", func(tx *bolt.Tx) error {
		src, err := sourceBucket(tx, st.Source)
		if err != nil {
			return err
		}
		return src.Put(keyState, b)
	})
	if err != nil {
		return fmt.Errorf("save state of %s: %w", st.Source, err)
	}
	return nil
}

// StampRules records that the skills of a source's stored snapshot passed
// rules (skill.StoredRules): a restart that judged a snapshot stored under
// other rules stamps it, so that the next one does not judge it again.
// The header is rewritten; the records are not touched. A source without
// a snapshot, or stamped with rules already, is left as it is.
func (s *Store) StampRules(source, rules string) error {
	lock := s.sourceLock(source)
	lock.Lock()
	defer lock.Unlock()
	err := s.update("stamp rules", func(tx *bolt.Tx) error {
		sources := tx.Bucket(bucketSources)
		if sources == nil {
			return corrupt(tx.DB().Path(), errors.New("sources bucket missing"))
		}
		src := sources.Bucket([]byte(source))
		if src == nil {
			return nil
		}
		h := src.Get(keySnapshot)
		if h == nil {
			return nil
		}
		payload, err := unseal(keySnapshot, h)
		if err != nil {
			return corrupt(tx.DB().Path(), fmt.Errorf("snapshot header of %s: %w", source, err))
		}
		snap, n, had, err := decodeHeader(string(payload))
		if err != nil {
			return corrupt(tx.DB().Path(), fmt.Errorf("snapshot header of %s: %w", source, err))
		}
		if had == rules {
			return nil
		}
		if n >= 0 {
			snap.Skills = make([]*skill.Skill, n) // only counted
		}
		return src.Put(keySnapshot, seal(keySnapshot, encodeHeader(snap, rules)))
	})
	if err != nil {
		return fmt.Errorf("stamp rules of %s: %w", source, err)
	}
	return nil
}

// DeleteSource forgets a source: its snapshot, its state and the digests
// only it referenced. Forgetting an unknown source is not an error.
func (s *Store) DeleteSource(name string) error {
	lock := s.sourceLock(name)
	lock.Lock()
	defer lock.Unlock()
	s.mu.Lock()
	delete(s.saved, name)
	s.gens[name]++
	s.mu.Unlock()
	err := s.update("delete source", func(tx *bolt.Tx) error {
		sources := tx.Bucket(bucketSources)
		if sources == nil {
			return corrupt(tx.DB().Path(), errors.New("sources bucket missing"))
		}
		src := sources.Bucket([]byte(name))
		if src == nil {
			return nil
		}
		refs := newRefDelta()
		kind, known, damaged := storedKind(src)
		skills := src.Bucket(keySkills)
		switch {
		case damaged || !known && skills != nil && notEmpty(skills):
			refs.broken = true // recounted once the source is gone
		case known && countsDigests(kind) && skills != nil:
			if err := skills.ForEach(func(k, v []byte) error { refs.drop(k, v); return nil }); err != nil {
				return err
			}
		}
		if err := dropStaging(src, refs); err != nil {
			return err
		}
		if err := sources.DeleteBucket([]byte(name)); err != nil {
			return err
		}
		return refs.apply(tx)
	})
	if err != nil {
		return fmt.Errorf("delete source %s: %w", name, err)
	}
	return nil
}

// rawSource is one source's values, copied out of a read transaction.
type rawSource struct {
	name     string
	state    string            // the state's JSON, checked
	stateErr error             // the state record does not check out
	hasHdr   bool              // the source has a snapshot
	snap     *catalog.Snapshot // decoded header and skills, when hasHdr
	rules    string            // the StoredRules the header names
	err      error             // what is wrong with the snapshot's records
}

// Load returns every stored source's last snapshot (nil when it has none)
// and state, sorted by source name. Snapshots come back unsealed: the
// registry verifies them against their trees and seals them with
// catalog.NewSnapshot.
//
// The skills loaded are the stored ones, so the store takes them as what
// it saved last (see SaveSnapshot): the first save after a restart writes
// only the skills that are not the restored values, as any later save.
func (s *Store) Load() ([]catalog.Persisted, error) {
	var raws []rawSource
	s.mu.Lock()
	gens := maps.Clone(s.gens)
	s.mu.Unlock()
	err := s.view("load", func(tx *bolt.Tx) error {
		sources := tx.Bucket(bucketSources)
		if sources == nil {
			return corrupt(s.path, errors.New("sources bucket missing"))
		}
		return sources.ForEachBucket(func(name []byte) error {
			raws = append(raws, readSource(s.path, name, sources.Bucket(name)))
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", s.path, err)
	}
	out := make([]catalog.Persisted, 0, len(raws))
	for i := range raws {
		p, err := decodeSource(&raws[i])
		if err != nil {
			// One source's damaged records cost that source its stored
			// catalog, not the daemon its start: it is not served and
			// resyncs, and its next save replaces the records.
			p.Snapshot = nil
			p.Damaged = fmt.Errorf("%s: %w: source %s: %w", s.path, ErrCorrupt, raws[i].name, err)
		}
		out = append(out, p)
	}
	if !s.readOnly {
		s.mu.Lock()
		for _, p := range out {
			// Not when a save or delete of the source ran meanwhile: what
			// was read may be older than what is stored.
			if p.Snapshot != nil && s.saved[p.State.Source] == nil && s.gens[p.State.Source] == gens[p.State.Source] {
				s.saved[p.State.Source] = &savedSkills{kind: p.Snapshot.Kind, skills: p.Snapshot.Skills}
			}
		}
		s.mu.Unlock()
	}
	return out, nil
}

// readSource copies and decodes one source's bucket in a read transaction.
func readSource(path string, name []byte, src *bolt.Bucket) rawSource {
	r := rawSource{name: string(name)}
	if v := src.Get(keyState); v != nil {
		if st, err := unseal(keyState, v); err != nil {
			r.stateErr = fmt.Errorf("state record: %w", err)
		} else {
			r.state = string(st)
		}
	}
	h := src.Get(keySnapshot)
	skills := src.Bucket(keySkills)
	switch {
	case h != nil:
		r.hasHdr = true
		if hdr, err := unseal(keySnapshot, h); err != nil {
			r.err = fmt.Errorf("snapshot header record: %w", err)
		} else {
			r.snap, r.rules, r.err = loadSnapshot(path, string(hdr), skills)
		}
	case skills != nil && notEmpty(skills):
		r.err = errors.New("skills without a snapshot")
	}
	return r
}

// eachRecord yields a bucket's keys and values in order; none for nil.
func eachRecord(b *bolt.Bucket) iter.Seq2[[]byte, []byte] {
	return func(yield func(k, v []byte) bool) {
		if b == nil {
			return
		}
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if !yield(k, v) {
				return
			}
		}
	}
}

func notEmpty(b *bolt.Bucket) bool {
	k, _ := b.Cursor().First()
	return k != nil
}

// decodeSource checks one source's state against its snapshot. On error
// the Persisted still names the source, with its state when that record
// checks out.
func decodeSource(r *rawSource) (catalog.Persisted, error) {
	p := catalog.Persisted{State: catalog.State{Source: r.name}}
	switch {
	case r.stateErr != nil:
		return p, r.stateErr
	case r.state == "":
		return p, errors.New("no state")
	}
	var st catalog.State
	if err := json.Unmarshal([]byte(r.state), &st); err != nil {
		return p, fmt.Errorf("state: %w", err)
	}
	if st.Source != r.name {
		return p, fmt.Errorf("state names source %q", st.Source)
	}
	p.State = st
	if r.err != nil {
		return p, r.err
	}
	if r.hasHdr && r.snap.Source != r.name {
		return p, fmt.Errorf("snapshot names source %q", r.snap.Source)
	}
	p.Snapshot, p.Rules = r.snap, r.rules
	return p, nil
}

// loadSnapshot decodes a snapshot's header and its skill records while the
// read transaction is open. A restart waits for this before it serves, so
// the records are copied and decoded on every core: this goroutine sizes
// the records and allocates one arena for them all (before anything with
// pointers, so that a collection during the load has little to mark), then
// walks the keys again and hands out runs of records, which workers copy
// into their part of the arena and decode from there. Decoded strings
// and frontmatter JSON point into the arena, which no one writes again
// once a run is copied; equal metadata maps are shared (see decoding).
func loadSnapshot(path, header string, b *bolt.Bucket) (_ *catalog.Snapshot, rules string, err error) {
	snap, n, rules, err := decodeHeader(header)
	if err != nil {
		return nil, "", fmt.Errorf("snapshot: %w", err)
	}
	count, size := 0, 0
	var pages *mappedSpan
	if b != nil {
		pages = newMappedSpan(b.Tx())
	}
	for k, v := range eachRecord(b) {
		count++
		size += len(k) + len(v)
		pages.add(k)
		pages.add(v)
		if count%1024 == 0 {
			pages.release()
		}
	}
	if pages != nil {
		pages.release()
	}
	if count != max(n, 0) {
		return nil, "", fmt.Errorf("snapshot has %d skill records, its header says %d", count, max(n, 0))
	}
	if n < 0 {
		return snap, rules, nil
	}
	arena := make([]byte, size)
	skills := make([]skill.Skill, n) // one allocation for all skills
	fms := make([]skill.Frontmatter, n)
	snap.Skills = make([]*skill.Skill, n)
	type record struct{ k, v []byte } // valid while the transaction is open
	type run struct {
		first, off int // index of the first record, its offset in arena
		recs       []record
	}
	const runLen = 256
	workers := min(runtime.GOMAXPROCS(0), max(1, n/1024))
	runs := make(chan run, workers)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstBad = -1
		badErr   error
	)
	fail := func(i int, err error) {
		mu.Lock()
		defer mu.Unlock()
		if firstBad < 0 || i < firstBad { // the first bad record in key order
			firstBad, badErr = i, err
		}
	}
	str := func(off, n int) string {
		if n == 0 {
			return ""
		}
		return unsafe.String(&arena[off], n)
	}
	decodeRun := func(r run, o decoding) error {
		// The pages of this run go back to the kernel once copied.
		span := *pages
		defer span.release()
		off := r.off
		for j, rec := range r.recs {
			i := r.first + j
			copy(arena[off:], rec.k)
			copy(arena[off+len(rec.k):], rec.v)
			span.add(rec.k)
			span.add(rec.v)
			kv := arena[off : off+len(rec.k)+len(rec.v)]
			key := str(off, len(rec.k))
			off += len(kv)
			if key == "" || key[0] != skillKeyPrefix {
				fail(i, fmt.Errorf("skill key %q", key))
				return nil
			}
			// Verified here, where the record is decoded, in this run's
			// worker: no separate pass over the records.
			if !contiguousSumOK(kv) {
				fail(i, fmt.Errorf("skill record %q: %w", key[1:], errChecksum))
				return nil
			}
			val := str(off-len(kv)+len(rec.k), len(rec.v)-sumLen)
			if err := decodeSkill(key[1:], val, &skills[i], &fms[i], o); err != nil {
				fail(i, fmt.Errorf("skill %q: %w", key[1:], err))
				return nil
			}
			snap.Skills[i] = &skills[i]
		}
		return nil
	}
	for range workers {
		wg.Go(func() {
			// The arena is this function's and written once: JSON points
			// into it. Each worker interns metadata maps on its own.
			o := decoding{inPlace: true, metadata: map[string]skill.Metadata{}}
			for r := range runs {
				// Reading the mapped file can fault (a truncated file):
				// each run is guarded, and the worker goes on draining.
				if err := guard(path, "load skills", func() error { return decodeRun(r, o) }); err != nil {
					fail(r.first, err)
				}
			}
		})
	}
	cur := run{recs: make([]record, 0, runLen)}
	i, off := 0, 0
	for k, v := range eachRecord(b) {
		cur.recs = append(cur.recs, record{k, v})
		i++
		off += len(k) + len(v)
		if len(cur.recs) == runLen {
			runs <- cur
			cur = run{first: i, off: off, recs: make([]record, 0, runLen)}
		}
	}
	if len(cur.recs) > 0 {
		runs <- cur
	}
	close(runs)
	wg.Wait()
	if badErr != nil {
		return nil, "", badErr
	}
	return snap, rules, nil
}

// Digests returns the persisted digest map: every file key a stored
// snapshot references, with its digest and size. The registry loads it
// into its digest cache on the first sync after a restart (not before
// serving), so that sync hashes only what changed.
func (s *Store) Digests() (map[string]skill.Digest, error) {
	var arena string
	var offs [][3]int // key end, value end, per entry (starts follow)
	err := s.view("load digests", func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketDigests)
		if b == nil {
			return corrupt(s.path, errors.New("digests bucket missing"))
		}
		var size, n int
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			size += len(k) + len(v)
			n++
		}
		var sb strings.Builder
		sb.Grow(size)
		offs = make([][3]int, 0, n)
		for k, v := c.First(); k != nil; k, v = c.Next() {
			start := sb.Len()
			sb.Write(k)
			sb.Write(v)
			offs = append(offs, [3]int{start, start + len(k), sb.Len()})
		}
		arena = sb.String()
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load digests of %s: %w", s.path, err)
	}
	out := make(map[string]skill.Digest, len(offs))
	raw := unsafe.Slice(unsafe.StringData(arena), len(arena)) // read only
	bad := 0
	for _, o := range offs {
		// Checked on the bytes, decoded from the arena: no copy per entry.
		_, err := unseal(raw[o[0]:o[1]], raw[o[1]:o[2]])
		var dg skill.Digest
		if err == nil {
			_, dg, err = decodeDigest(arena[o[1] : o[2]-sumLen])
		}
		if err != nil {
			// Skipped: the file is hashed again, never given a wrong
			// digest. The entry is rewritten by the next save that
			// touches it.
			if bad == 0 {
				s.log.Warn("stored file digest damaged; the file will be hashed again", "key", arena[o[0]:o[1]], "err", err)
			}
			bad++
			continue
		}
		out[arena[o[0]:o[1]]] = dg
	}
	if bad > 1 {
		s.log.Warn("stored file digests damaged", "count", bad)
	}
	return out, nil
}
