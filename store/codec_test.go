package store

import (
	"bytes"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/sigverify"
	"github.com/skillreg/skillreg/skill"
	bolt "go.etcd.io/bbolt"
)

// Decoding never panics and never accepts what it cannot read back the
// same way: whatever decodes re-encodes to bytes that decode to the same
// value.
func FuzzDecodeRecords(f *testing.F) {
	snap := edgeSnapshot(f, "edge", "c1", nil)
	f.Add(byte(0), encodeHeader(snap, skill.StoredRules))
	// A format 3 header without a tag or signature ends with the rules,
	// an empty tag and a false "signed" (a byte each when empty).
	bare := encodeHeader(snap, "")
	rulesOnly := slices.Clone(bare[:len(bare)-2]) // format 2: no tag, no signature
	rulesOnly[0] = headerFormatRules
	f.Add(byte(0), rulesOnly)
	bare = bare[:len(bare)-3] // format 1 has no rules either
	bare[0] = headerFormatBare
	f.Add(byte(0), bare)
	signed := *snap
	signed.Tag = strings.Repeat("ab", 20)
	signed.Signature = &sigverify.Signature{Verified: true, Type: "ssh", Key: "SHA256:abc", Signer: "alice@example.com"}
	f.Add(byte(0), encodeHeader(&signed, skill.StoredRules))
	for _, r := range recordSeeds(f) {
		f.Add(byte(1), r.val[:len(r.val)-sumLen])
	}
	f.Add(byte(2), encodeDigest(3, skill.Digest{Digest: skill.Sum{0x10}, Size: 12}))
	f.Fuzz(func(t *testing.T, kind byte, b []byte) {
		switch kind % 3 {
		case 0:
			snap, n, rules, err := decodeHeader(string(b))
			if err != nil || n > 1<<16 {
				return // a count of up to 2^31 skills re-encodes through as many pointers
			}
			if n >= 0 {
				snap.Skills = make([]*skill.Skill, n)
			}
			again := encodeHeader(snap, rules)
			snap2, n2, rules2, err := decodeHeader(string(again))
			snap.Skills = nil
			if err != nil || n2 != n || rules2 != rules || !reflect.DeepEqual(exported(snap2), exported(snap)) {
				t.Fatalf("header does not survive a round trip: %v", err)
			}
		case 1:
			var s skill.Skill
			var fm skill.Frontmatter
			if decodeSkill("p", string(b), &s, &fm, decoding{}) != nil {
				return
			}
			e := enc{}
			encodeSkill(&e, &s)
			var s2 skill.Skill
			var fm2 skill.Frontmatter
			if err := decodeSkill("p", string(e.b), &s2, &fm2, decoding{}); err != nil || !reflect.DeepEqual(s, s2) {
				t.Fatalf("skill does not survive a round trip: %v", err)
			}
		case 2:
			refs, dg, err := decodeDigest(string(b))
			if err != nil {
				return
			}
			if again := encodeDigest(refs, dg); !bytes.Equal(again, b) {
				t.Fatalf("digest entry re-encodes as %x, was %x", again, b)
			}
		}
	})
}

// recordSeeds are sealed skill records of every format decodeSkill reads,
// each with the skill it decodes to: format 3 as encodeSkill writes it for
// a git source's tree (edgeSnapshot) and for a directory source (stat keys
// that hold the ID, which holds the path), and formats 1 and 2, which
// nothing writes any more, as the schema 2 and 3 fixtures hold them.
func recordSeeds(tb testing.TB) []encodedSkill {
	tb.Helper()
	recs := encodeSkills(edgeSnapshot(tb, "src", "c1", nil).Skills)
	recs = append(recs, encodeSkills(corpusSnapshot(tb, "local", 3).Skills)...)
	recs = append(recs, fixtureRecords(tb, "schema-v2.db")...)
	recs = append(recs, fixtureRecords(tb, "schema-v3.db")...)
	seeded := map[byte]bool{}
	for _, r := range recs {
		seeded[r.val[0]] = true
	}
	for format := byte(skillFormatBody); format <= skillFormat; format++ {
		if !seeded[format] {
			tb.Fatalf("no seed record of format %d", format)
		}
	}
	return recs
}

// fixtureRecords reads the skill records of testdata/name (a schema
// fixture that seals its values) and decodes each.
func fixtureRecords(tb testing.TB, name string) []encodedSkill {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), FileName)
	copyFile(tb, filepath.Join("testdata", name), path)
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	var recs []encodedSkill
	err = db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketSources).ForEachBucket(func(src []byte) error {
			for k, v := range eachRecord(tx.Bucket(bucketSources).Bucket(src).Bucket(keySkills)) {
				r := encodedSkill{key: bytes.Clone(k), val: bytes.Clone(v), sk: &skill.Skill{}}
				if !contiguousSumOK(append(bytes.Clone(k), v...)) {
					return fmt.Errorf("%s %q: checksum", src, k)
				}
				if err := decodeSkill(string(k[1:]), string(v[:len(v)-sumLen]), r.sk, &skill.Frontmatter{}, decoding{}); err != nil {
					return fmt.Errorf("%s %q: %w", src, k, err)
				}
				recs = append(recs, r)
			}
			return nil
		})
	})
	if err != nil || len(recs) == 0 {
		tb.Fatalf("%s: %d skill records, %v", name, len(recs), err)
	}
	return recs
}

func TestDecodeRefusesDamage(t *testing.T) {
	snap := edgeSnapshot(t, "edge", "c1", nil)
	e := enc{}
	encodeSkill(&e, snap.Skills[1])
	rec := e.b
	var s skill.Skill
	var fm skill.Frontmatter
	if err := decodeSkill("alpha", string(rec), &s, &fm, decoding{}); err != nil {
		t.Fatal(err)
	}
	for cut := range len(rec) {
		if err := decodeSkill("alpha", string(rec[:cut]), &s, &fm, decoding{}); err == nil {
			t.Fatalf("a record cut at %d of %d bytes decoded", cut, len(rec))
		}
	}
	if err := decodeSkill("alpha", string(append(bytes.Clone(rec), 0)), &s, &fm, decoding{}); err == nil {
		t.Fatal("a record with a trailing byte decoded")
	}
	bad := bytes.Clone(rec)
	bad[0] = skillFormat + 1
	if err := decodeSkill("alpha", string(bad), &s, &fm, decoding{}); err == nil {
		t.Fatal("a record of an unknown format decoded")
	}
}
