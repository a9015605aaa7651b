package store

import (
	"slices"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/sigverify"
	"github.com/skillreg/skillreg/skill"
)

// TestSnapshotKeepsTagAndSignature: a verified snapshot's tag object and
// signature survive a reopen (a restart shows the signature it serves
// under, and verifies the tag again), and a header of the format before
// them still decodes, as unsigned and without a tag.
func TestSnapshotKeepsTagAndSignature(t *testing.T) {
	s, _ := openTemp(t, Options{})
	snap := edgeSnapshot(t, "edge", "c1", nil)
	snap.Tag = strings.Repeat("7a", 20)
	snap.Signature = &sigverify.Signature{Verified: true, Type: sigverify.TypeOpenPGP, Key: "3AF0C1D2E3F4A5B6C7D8E9F0A1B2C3D4E5F6A7B8", Signer: "Alice <alice@example.com>"}
	if err := s.SaveSnapshot(catalog.NewSnapshot(snap, nil), stateOf(snap)); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, s)
	got := load(t, s)["edge"].Snapshot
	sameSnapshot(t, got, snap)
	if got.Signature == snap.Signature {
		t.Fatal("the loaded signature is the saved pointer, not a decoded copy")
	}

	// Format 2, as the version before wrote it: the same header without
	// the last two fields.
	plain := edgeSnapshot(t, "edge", "c1", nil)
	old := encodeHeader(plain, skill.StoredRules)
	old = slices.Clone(old[:len(old)-2])
	old[0] = headerFormatRules
	dec, _, rules, err := decodeHeader(string(old))
	if err != nil || rules != skill.StoredRules || dec.Tag != "" || dec.Signature != nil || dec.Commit != "c1" {
		t.Fatalf("format 2 header decoded to %+v, rules %q, %v", dec, rules, err)
	}
}
