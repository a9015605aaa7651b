package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/sigverify"
	"github.com/skillreg/skillreg/skill"
)

// Snapshots are stored in a compact binary form: uvarint lengths and
// counts, strings as they are. It decodes about thirty times faster than
// JSON and five times faster than gob on a 10,000-skill snapshot (see
// BenchmarkEncoding), which is what makes a restart cheap. Every record
// starts with a format byte so that a later schema can tell records
// apart, and decoding checks every length and refuses trailing bytes, so a
// damaged value is reported, never misread.
const recordFormat = 1

// Snapshot headers have formats of their own: format 1 ends with the
// count of skill records, format 2 adds the skill.StoredRules those
// skills were judged by, so that a restart judges only what older rules
// passed, and format 3 adds the annotated tag the pin resolved through
// and the signature the commit was verified by. All three decode.
const (
	headerFormatBare  = 1
	headerFormatRules = 2
	headerFormat      = 3
)

// Skill records have formats of their own: format 1 held the skill's
// body (SKILL.md after the frontmatter), format 2 holds none (a body is
// read back from the tree when something needs it), format 3 holds each
// file's digest as its 32 bytes where 2 spelled it ("sha256:" and 64 hex
// digits: 39 bytes more a file, in the file and in the restore's arena,
// which the restored skills' strings keep alive), and no license or
// allowed-tools beside the JSON that holds them. All three decode.
const (
	skillFormatBody    = 1
	skillFormatSpelled = 2
	skillFormat        = 3
)

// errShort and errTrailing are the decoding failures of damaged values.
var (
	errShort    = errors.New("value ends early")
	errTrailing = errors.New("value has trailing bytes")
	errFormat   = errors.New("unknown record format")
	// errOverlong: a varint longer than its shortest form, which the
	// encoder always writes, so that a value has one encoding.
	errOverlong = errors.New("varint not in its shortest form")
)

// enc appends a record.
type enc struct {
	b   []byte
	rec int // where the skill record being written starts in b (see ref)
}

func (e *enc) byte(v byte)      { e.b = append(e.b, v) }
func (e *enc) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *enc) varint(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *enc) str(s string)     { e.uvarint(uint64(len(s))); e.b = append(e.b, s...) }
func (e *enc) bytes(b []byte)   { e.uvarint(uint64(len(b))); e.b = append(e.b, b...) }
func (e *enc) bool(v bool)      { e.byte(b2u(v)) }

// digest writes a digest in its manifest spelling, as str wrote the
// strings files held before (digest entries, and skill records before
// format 3).
func (e *enc) digest(s skill.Sum) {
	var b [71]byte
	e.bytes(s.AppendDigest(b[:0]))
}

// sum writes a digest's 32 bytes (skill records of format 3).
func (e *enc) sum(s skill.Sum) { e.b = append(e.b, s[:]...) }
func (e *enc) count(n int, isNil bool) {
	// 0 is nil, n+1 is n elements: a decoded value deep-equals the encoded one.
	if isNil {
		e.uvarint(0)
		return
	}
	e.uvarint(uint64(n) + 1)
}

// minRef is the shortest string ref writes as a reference: a shorter
// one costs about as much inline.
const minRef = 8

// ref writes a string of a skill record (formats 2 and 3): inline (uvarint
// len<<1, bytes), or, when it occurs in e.b[lo:hi] (bytes of this record
// already written), as where it occurs (uvarint off<<1|1, uvarint len,
// off counted from the record's start). The decoder then returns a
// substring of the record: in memory, the string shares the bytes of the
// one it occurs in (a file's path in its ID, its ID in its key, the
// description in the frontmatter JSON).
func (e *enc) ref(s string, lo, hi int) {
	if len(s) >= minRef && hi > lo {
		if i := bytes.Index(e.b[lo:hi], []byte(s)); i >= 0 {
			e.uvarint(uint64(lo+i-e.rec)<<1 | 1)
			e.uvarint(uint64(len(s)))
			return
		}
	}
	e.uvarint(uint64(len(s)) << 1)
	e.b = append(e.b, s...)
}

// strSpan writes s inline and returns where its bytes are in e.b.
func (e *enc) strSpan(s string) (lo, hi int) {
	e.str(s)
	return len(e.b) - len(s), len(e.b)
}

func (e *enc) time(t time.Time) {
	b, err := t.MarshalBinary()
	if err != nil {
		// Only an offset beyond ±18 hours fails; keep the instant.
		b, _ = t.UTC().MarshalBinary()
	}
	e.bytes(b)
}

func b2u(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// dec reads a record held in a string, so that every string it returns is
// a substring of that one allocation.
type dec struct {
	s   string
	all string // the whole record, which ref's references point into
	err error
}

func (d *dec) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

func (d *dec) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.s) == 0 {
		d.fail(errShort)
		return 0
	}
	v := d.s[0]
	d.s = d.s[1:]
	return v
}

func (d *dec) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	var v uint64
	var shift uint
	for i := 0; i < len(d.s) && i < binary.MaxVarintLen64; i++ {
		c := d.s[i]
		if c < 0x80 {
			if i == binary.MaxVarintLen64-1 && c > 1 {
				break
			}
			if c == 0 && i > 0 { // the byte before could have ended it
				d.fail(errOverlong)
				return 0
			}
			d.s = d.s[i+1:]
			return v | uint64(c)<<shift
		}
		v |= uint64(c&0x7f) << shift
		shift += 7
	}
	d.fail(errShort)
	return 0
}

func (d *dec) varint() int64 {
	u := d.uvarint()
	v := int64(u >> 1)
	if u&1 != 0 {
		v = ^v
	}
	return v
}

func (d *dec) int() int {
	v := d.varint()
	if v > math.MaxInt || v < math.MinInt {
		d.fail(errors.New("integer out of range"))
		return 0
	}
	return int(v)
}

// ref reads what enc.ref wrote.
func (d *dec) ref() string {
	v := d.uvarint()
	if d.err != nil {
		return ""
	}
	if v&1 == 0 {
		n := v >> 1
		if n > uint64(len(d.s)) {
			d.fail(errShort)
			return ""
		}
		r := d.s[:n]
		d.s = d.s[n:]
		return r
	}
	off, n := v>>1, d.uvarint()
	if d.err != nil {
		return ""
	}
	if off > uint64(len(d.all)) || n > uint64(len(d.all))-off {
		d.fail(errors.New("string reference out of the record"))
		return ""
	}
	return d.all[off : off+n]
}

func (d *dec) bool() bool {
	switch d.byte() {
	case 0:
		return false
	case 1:
		return true
	}
	d.fail(errors.New("invalid boolean"))
	return false
}

// digest reads a digest enc.digest wrote ("" is the zero Sum, which is
// never spelled: a value has one encoding).
func (d *dec) digest() skill.Sum {
	s := d.str()
	if s == "" {
		return skill.Sum{}
	}
	sum, err := skill.ParseSum(s)
	if err == nil && sum.IsZero() {
		err = errors.New("the zero digest spelled out")
	}
	if err != nil {
		d.fail(err)
	}
	return sum
}

// sum reads what enc.sum wrote.
func (d *dec) sum() skill.Sum {
	var s skill.Sum
	if d.err != nil {
		return s
	}
	if len(d.s) < len(s) {
		d.fail(errShort)
		return s
	}
	copy(s[:], d.s)
	d.s = d.s[len(s):]
	return s
}

func (d *dec) str() string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.s)) {
		d.fail(errShort)
		return ""
	}
	v := d.s[:n]
	d.s = d.s[n:]
	return v
}

// count reads what enc.count wrote: the element count and whether the
// value was nil. The count is bounded by the bytes left (every element
// takes at least one), so a damaged count cannot make a huge allocation.
func (d *dec) count() (n int, isNil bool) {
	v := d.uvarint()
	if d.err != nil || v == 0 {
		return 0, true
	}
	if v-1 > uint64(len(d.s)) {
		d.fail(errShort)
		return 0, true
	}
	return int(v - 1), false
}

func (d *dec) time() time.Time {
	b := d.str()
	if d.err != nil {
		return time.Time{}
	}
	var t time.Time
	if err := t.UnmarshalBinary([]byte(b)); err != nil {
		d.fail(fmt.Errorf("time: %w", err))
		return time.Time{}
	}
	// UnmarshalBinary takes nanoseconds past a second, which MarshalBinary
	// never writes: a value has one encoding.
	if again, err := t.MarshalBinary(); err != nil || string(again) != b {
		d.fail(errors.New("time not in its canonical form"))
		return time.Time{}
	}
	return t
}

func (d *dec) format() { d.formatOf(recordFormat) }

// formatOf reads the format byte and returns it, failing on any format
// but those given.
func (d *dec) formatOf(known ...byte) byte {
	f := d.byte()
	if d.err == nil && !slices.Contains(known, f) {
		d.fail(fmt.Errorf("%w %d", errFormat, f))
	}
	return f
}

func (d *dec) end() error {
	if d.err == nil && len(d.s) != 0 {
		d.fail(errTrailing)
	}
	return d.err
}

// skillKeyPrefix starts the key of a skill record, followed by its path,
// so that the root skill (path "") has a key bbolt accepts and records
// sort by path.
const skillKeyPrefix = '/'

// File flags in a skill record.
const (
	fileExec  = 1 << iota // File.Exec
	fileKeyID             // File.Key equals File.ID (stored once)
)

// encodeSkill encodes everything of a skill but its path (the key holds
// it), in format 3.
func encodeSkill(e *enc, s *skill.Skill) {
	e.rec = len(e.b)
	e.byte(skillFormat)
	fm := s.Frontmatter
	e.bool(fm != nil)
	if fm != nil {
		e.bytes(fm.JSON)
		jlo, jhi := len(e.b)-len(fm.JSON), len(e.b)
		e.ref(fm.Name, jlo, jhi)
		e.ref(fm.Description, jlo, jhi)
		e.ref(fm.Compatibility, jlo, jhi) // format 3: no license, no allowed-tools (the JSON has them)
		// Inline and sorted, so that equal skills encode to equal bytes
		// (an unchanged skill is not rewritten) and equal metadata to
		// equal bytes wherever it is (a restart shares the maps).
		e.count(len(fm.Metadata), fm.Metadata == nil)
		for _, m := range fm.Metadata {
			e.str(m.Key)
			e.str(m.Value)
		}
		e.ref(fm.Version, jlo, jhi)
		e.count(len(fm.Tags), fm.Tags == nil)
		for _, t := range fm.Tags {
			e.ref(t, jlo, jhi)
		}
		e.bool(fm.Deprecated)
	}
	e.varint(s.Size)
	e.count(len(s.Files), s.Files == nil)
	for i := range s.Files {
		f := &s.Files[i]
		var flags byte
		if f.Exec {
			flags |= fileExec
		}
		if f.Key == f.ID {
			flags |= fileKeyID
		}
		e.byte(flags)
		// The key, then the ID (often inside the key: a directory's key
		// is its path and stat data), then the path (the end of the ID).
		klo, khi := 0, 0
		if flags&fileKeyID == 0 {
			klo, khi = e.strSpan(f.Key)
		}
		var ilo, ihi int
		if at := strings.Index(f.Key, f.ID); khi > klo && len(f.ID) >= minRef && at >= 0 {
			e.ref(f.ID, klo, khi)
			ilo, ihi = klo+at, klo+at+len(f.ID)
		} else {
			e.ref(f.ID, 0, 0) // inline
			ilo, ihi = len(e.b)-len(f.ID), len(e.b)
		}
		e.ref(f.Path, ilo, ihi)
		e.varint(f.Size)
		e.sum(f.Digest)
	}
	e.count(len(s.Dirs), s.Dirs == nil)
	for _, d := range s.Dirs {
		e.str(d)
	}
}

// decoding says how decodeSkill may share memory. The zero value shares
// nothing but rec's strings.
type decoding struct {
	// inPlace: rec is the caller's own memory, which no one writes again,
	// so the frontmatter JSON may point into it instead of being a copy.
	inPlace bool
	// metadata, when not nil, interns frontmatter metadata maps by their
	// encoded bytes: skills whose metadata is the same share one map (a
	// small map takes about 300 bytes; skills of one repository often
	// carry the same few keys and values). Skills are immutable, so no
	// one writes the shared map.
	metadata map[string]skill.Metadata
}

// maxInterned bounds the metadata maps one decoding interns, so that a
// catalog whose metadata all differ does not grow a table for nothing.
const maxInterned = 4096

// decodeSkill decodes a record into s and fm (which the caller allocates,
// in bulk). Strings point into rec; the frontmatter JSON is a copy unless
// o.inPlace.
func decodeSkill(path, rec string, s *skill.Skill, fm *skill.Frontmatter, o decoding) error {
	d := dec{s: rec, all: rec}
	format := d.formatOf(skillFormatBody, skillFormatSpelled, skillFormat)
	str := d.ref // formats 2 and 3: strings inline or within the record
	if format == skillFormatBody {
		str = d.str
	}
	s.Path = path
	if d.bool() {
		if js := d.str(); o.inPlace && js != "" {
			fm.JSON = unsafe.Slice(unsafe.StringData(js), len(js))
		} else {
			fm.JSON = []byte(js)
		}
		fm.Name = str()
		fm.Description = str()
		if format < skillFormat {
			_ = str() // license: skills keep it in JSON only
		}
		fm.Compatibility = str()
		if format < skillFormat {
			_ = str() // allowed-tools
		}
		start := d.s
		if n, isNil := d.count(); !isNil {
			fm.Metadata = make(skill.Metadata, n)
			for i := range fm.Metadata {
				fm.Metadata[i].Key = d.str()
				fm.Metadata[i].Value = d.str()
			}
			if !slices.IsSortedFunc(fm.Metadata, func(a, b skill.MetadataEntry) int { return strings.Compare(a.Key, b.Key) }) {
				d.fail(errors.New("metadata keys out of order"))
			}
			if o.metadata != nil && d.err == nil {
				raw := start[:len(start)-len(d.s)]
				if m, ok := o.metadata[raw]; ok {
					fm.Metadata = m
				} else if len(o.metadata) < maxInterned {
					o.metadata[raw] = fm.Metadata
				}
			}
		}
		fm.Version = str()
		if n, isNil := d.count(); !isNil {
			fm.Tags = make([]string, n)
			for i := range fm.Tags {
				fm.Tags[i] = str()
			}
		}
		fm.Deprecated = d.bool()
		s.Frontmatter = fm
	}
	if format == skillFormatBody {
		_ = d.str() // the body: skills hold none any more
	}
	s.Size = d.varint()
	if n, isNil := d.count(); !isNil {
		s.Files = make([]skill.File, n)
		for i := range s.Files {
			f := &s.Files[i]
			var flags byte
			if format == skillFormatBody {
				f.Path = d.str()
				f.Size = d.varint()
				f.Digest = d.digest()
				flags = d.byte()
				f.ID = d.str()
				if flags&fileKeyID != 0 {
					f.Key = f.ID
				} else {
					f.Key = d.str()
				}
			} else {
				flags = d.byte()
				if flags&fileKeyID == 0 {
					f.Key = d.str()
				}
				f.ID = d.ref()
				if flags&fileKeyID != 0 {
					f.Key = f.ID
				}
				f.Path = d.ref()
				f.Size = d.varint()
				if format == skillFormatSpelled {
					f.Digest = d.digest()
				} else {
					f.Digest = d.sum()
				}
			}
			f.Exec = flags&fileExec != 0
			if flags&^(fileExec|fileKeyID) != 0 {
				d.fail(errors.New("unknown file flags"))
			}
		}
	}
	if n, isNil := d.count(); !isNil {
		s.Dirs = make([]string, n)
		for i := range s.Dirs {
			s.Dirs[i] = d.str()
		}
	}
	return d.end()
}

// skillFileKeys calls fn with the cache key, size and digest of every file
// of an encoded skill that has a key, without building the skill.
func skillFileKeys(rec string, fn func(key string, dg skill.Digest)) error {
	var s skill.Skill
	var fm skill.Frontmatter
	if err := decodeSkill("", rec, &s, &fm, decoding{}); err != nil {
		return err
	}
	for _, f := range s.Files {
		if f.Key != "" {
			fn(f.Key, skill.Digest{Digest: f.Digest, Size: f.Size})
		}
	}
	return nil
}

// encodeHeader encodes a snapshot without its skills, which are records
// of their own; it records how many there are, so that Load notices a
// record gone missing.
func encodeHeader(snap *catalog.Snapshot, rules string) []byte {
	e := enc{b: make([]byte, 0, 256)}
	e.byte(headerFormat)
	e.str(snap.Source)
	e.str(string(snap.Kind))
	e.str(snap.Repository)
	e.str(snap.Ref)
	e.str(snap.Commit)
	e.str(snap.Path)
	e.time(snap.IndexedAt)
	st := snap.Stats
	for _, v := range []int64{int64(st.Skills), int64(st.Excluded), int64(st.Files), st.Bytes, int64(st.Hashed), int64(st.Reused), int64(st.Duration)} {
		e.varint(v)
	}
	e.count(len(snap.Excluded), snap.Excluded == nil)
	for _, x := range snap.Excluded {
		e.str(x.Path)
		e.str(x.File)
		e.str(string(x.Problem.Rule))
		e.str(x.Problem.Detail)
	}
	e.count(len(snap.Skills), snap.Skills == nil)
	e.str(rules)
	e.str(snap.Tag)
	e.bool(snap.Signature != nil)
	if sig := snap.Signature; sig != nil {
		e.bool(sig.Verified)
		e.str(sig.Type)
		e.str(sig.Key)
		e.str(sig.Signer)
	}
	return e.b
}

// decodeHeader decodes a header; skills is the number of skill records
// the snapshot had, or -1 for a nil Skills, and rules the StoredRules
// they were judged by ("" in a format 1 header).
func decodeHeader(rec string) (snap *catalog.Snapshot, skills int, rules string, err error) {
	d := dec{s: rec}
	f := d.formatOf(headerFormatBare, headerFormatRules, headerFormat)
	snap = &catalog.Snapshot{
		Source:     d.str(),
		Kind:       catalog.Kind(d.str()),
		Repository: d.str(),
		Ref:        d.str(),
		Commit:     d.str(),
		Path:       d.str(),
		IndexedAt:  d.time(),
	}
	st := &snap.Stats
	st.Skills, st.Excluded, st.Files = d.int(), d.int(), d.int()
	st.Bytes = d.varint()
	st.Hashed, st.Reused = d.int(), d.int()
	st.Duration = time.Duration(d.varint())
	if n, isNil := d.count(); !isNil {
		snap.Excluded = make([]skill.Exclusion, n)
		for i := range snap.Excluded {
			x := &snap.Excluded[i]
			x.Path, x.File = d.str(), d.str()
			x.Problem.Rule, x.Problem.Detail = skill.Rule(d.str()), d.str()
		}
	}
	// Not d.count: the skills are records of their own, not bytes here.
	n := int(min(d.uvarint(), math.MaxInt32)) - 1
	if f >= headerFormatRules {
		rules = d.str()
	}
	if f >= headerFormat {
		snap.Tag = d.str()
		if d.bool() {
			snap.Signature = &sigverify.Signature{Verified: d.bool(), Type: d.str(), Key: d.str(), Signer: d.str()}
		}
	}
	if err := d.end(); err != nil {
		return nil, 0, "", err
	}
	return snap, n, rules, nil
}

// A digest entry records a file key's digest and size and how many skill
// records of stored snapshots carry that key, so that it is dropped when
// the last one goes.
func encodeDigest(refs uint64, dg skill.Digest) []byte {
	e := enc{b: make([]byte, 0, 2+binary.MaxVarintLen64*2+72)}
	e.byte(recordFormat)
	e.uvarint(refs)
	e.varint(dg.Size)
	e.digest(dg.Digest)
	return e.b
}

func decodeDigest(rec string) (refs uint64, dg skill.Digest, err error) {
	d := dec{s: rec}
	d.format()
	refs = d.uvarint()
	dg.Size = d.varint()
	dg.Digest = d.digest()
	if err := d.end(); err != nil {
		return 0, skill.Digest{}, err
	}
	if refs == 0 {
		return 0, skill.Digest{}, errors.New("digest entry without references")
	}
	return refs, dg, nil
}
