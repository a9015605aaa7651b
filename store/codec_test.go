package store

import (
	"bytes"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/sigverify"
	"github.com/skillreg/skillreg/skill"
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
	for _, sk := range snap.Skills {
		e := enc{}
		encodeSkill(&e, sk)
		f.Add(byte(1), e.b)
	}
	f.Add(byte(2), encodeDigest(3, skill.Digest{Digest: skill.Sum{0x10}, Size: 12}))
	f.Fuzz(func(t *testing.T, kind byte, b []byte) {
		switch kind % 3 {
		case 0:
			snap, n, rules, err := decodeHeader(string(b))
			if err != nil {
				return
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
