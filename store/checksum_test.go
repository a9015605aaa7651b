package store

import (
	"bytes"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/skillreg/skillreg/catalog"

	"github.com/skillreg/skillreg/releases"
	"github.com/skillreg/skillreg/skill"
)

// TestChecksumEveryRecord flips bytes inside each kind of stored value
// (as a bad disk does, leaving bbolt's pages consistent) and checks that
// the damage is caught where the value is decoded and by Check, which
// names the record, and that the next save heals what it replaces.
func TestChecksumEveryRecord(t *testing.T) {
	const skillPath = "group-001/skill-00001"
	type record struct {
		bucket func(tx *bolt.Tx) *bolt.Bucket
		key    []byte
		// caught checks that reading the store notices the damage.
		caught func(t *testing.T, s *Store, path string)
		names  string // what Check's message must say
		// heal repairs the damage through the store's API; nil when only
		// a rebuild does.
		heal func(t *testing.T, s *Store)
	}
	src := func(tx *bolt.Tx) *bolt.Bucket { return tx.Bucket(bucketSources).Bucket([]byte("src")) }
	damagedSource := func(t *testing.T, s *Store, path string) {
		p := load(t, s)["src"]
		if !errors.Is(p.Damaged, ErrCorrupt) || p.Snapshot != nil {
			t.Fatalf("load of a damaged source: damaged=%v snapshot=%v, want ErrCorrupt and no snapshot", p.Damaged, p.Snapshot != nil)
		}
		if p := load(t, s)["other"]; p.Damaged != nil || p.Snapshot == nil {
			t.Fatalf("the other source: damaged=%v snapshot=%v, want it served", p.Damaged, p.Snapshot != nil)
		}
	}
	// Git snapshots, whose file keys the digest map holds.
	var snap = corpusSnapshot(t, "src", 10)
	other := corpusSnapshot(t, "other", 3)
	snap.Kind, other.Kind = catalog.KindGit, catalog.KindGit
	resave := func(t *testing.T, s *Store) {
		s = reopen(t, s) // a restart: the store does not know what it saved
		if err := s.SaveSnapshot(snap, stateOf(snap)); err != nil {
			t.Fatal(err)
		}
		if p := load(t, s)["src"]; p.Damaged != nil {
			t.Fatalf("after a save: %v", p.Damaged)
		}
		if err := s.Check(); err != nil {
			t.Fatalf("after a save: %v", err)
		}
	}
	digestKey := []byte(snap.Skills[1].Files[0].Key)
	records := map[string]record{
		"skill record": {
			bucket: func(tx *bolt.Tx) *bolt.Bucket { return src(tx).Bucket(keySkills) },
			key:    skillKey(skillPath), caught: damagedSource, names: `skill record "` + skillPath + `"`, heal: resave,
		},
		"snapshot header": {bucket: src, key: keySnapshot, caught: damagedSource, names: "snapshot header record", heal: resave},
		"state":           {bucket: src, key: keyState, caught: damagedSource, names: "state record", heal: resave},
		"digest entry": {
			bucket: func(tx *bolt.Tx) *bolt.Bucket { return tx.Bucket(bucketDigests) },
			key:    digestKey,
			caught: func(t *testing.T, s *Store, _ string) {
				d, err := s.Digests()
				if err != nil {
					t.Fatal(err)
				}
				if _, ok := d[string(digestKey)]; ok || len(d) == 0 {
					t.Fatalf("digests hold the damaged entry (or nothing): %d entries", len(d))
				}
			},
			names: "digest of " + `"` + string(digestKey) + `"`,
			heal: func(t *testing.T, s *Store) {
				// A save that replaces the skill holding the key recounts.
				s = reopen(t, s)
				changed := *snap
				changed.Skills = changed.Skills[2:]
				if err := s.SaveSnapshot(&changed, stateOf(&changed)); err != nil {
					t.Fatal(err)
				}
				if err := s.SaveSnapshot(snap, stateOf(snap)); err != nil {
					t.Fatal(err)
				}
				if err := s.Check(); err != nil {
					t.Fatalf("after a save: %v", err)
				}
			},
		},
		"release cache entry": {
			bucket: func(tx *bolt.Tx) *bolt.Bucket { return tx.Bucket(bucketReleases) },
			key:    []byte("team/skills"),
			caught: func(t *testing.T, s *Store, _ string) {
				if _, _, err := s.LoadRelease("team/skills"); !errors.Is(err, releases.ErrCorruptCache) {
					t.Fatalf("load release: %v, want ErrCorruptCache", err)
				}
			},
			names: "release cache of team/skills",
			heal: func(t *testing.T, s *Store) {
				if err := s.SaveRelease("team/skills", releases.Cached{Tag: "v2.0.0", HTMLURL: "https://github.com/team/skills/releases/tag/v2.0.0", PublishedAt: when, FetchedAt: when}); err != nil {
					t.Fatal(err)
				}
				if err := s.Check(); err != nil {
					t.Fatal(err)
				}
			},
		},
		"delivery": {
			bucket: func(tx *bolt.Tx) *bolt.Bucket { return tx.Bucket(bucketDeliveries) },
			key:    seqKey(1),
			caught: func(t *testing.T, s *Store, path string) {
				_, err := s.RecentDeliveries(0)
				mustCorrupt(t, err, path)
			},
			names: "delivery 0000000000000001",
		},
		"delivery id count": {
			bucket: func(tx *bolt.Tx) *bolt.Bucket { return tx.Bucket(bucketDeliveryIDs) },
			key:    []byte("d1"),
			caught: func(t *testing.T, s *Store, _ string) {
				if err := s.RecordDelivery(Delivery{ID: "d1", At: when}); err == nil {
					t.Fatal("a delivery was counted onto a damaged count")
				}
			},
			names: `delivery id "d1"`,
		},
	}
	for name, rec := range records {
		// Where the bytes flip: the record's format byte, six bytes in the
		// middle (the reproduction), its checksum.
		for _, where := range []string{"start", "middle", "checksum"} {
			t.Run(name+"/"+where, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), FileName)
				s, err := Open(path, Options{})
				if err != nil {
					t.Fatal(err)
				}
				defer func() { s.Close() }()
				if err := s.SaveSnapshot(snap, stateOf(snap)); err != nil {
					t.Fatal(err)
				}
				if err := s.SaveSnapshot(other, stateOf(other)); err != nil {
					t.Fatal(err)
				}
				if err := s.SaveRelease("team/skills", releases.Cached{Tag: "v1.0.0", HTMLURL: "https://github.com/team/skills/releases/tag/v1.0.0", PublishedAt: when, FetchedAt: when}); err != nil {
					t.Fatal(err)
				}
				if err := s.RecordDelivery(Delivery{ID: "d1", Event: "push", At: when, Outcome: "accepted"}); err != nil {
					t.Fatal(err)
				}
				if err := s.Check(); err != nil {
					t.Fatalf("before the damage: %v", err)
				}
				err = s.db.Update(func(tx *bolt.Tx) error {
					b := rec.bucket(tx)
					v := bytes.Clone(b.Get(rec.key))
					if v == nil {
						t.Fatalf("no record %q", rec.key)
					}
					switch where {
					case "start":
						v[0] ^= 0x01
					case "middle":
						for i := len(v) / 2; i < min(len(v)/2+6, len(v)); i++ {
							v[i] ^= 0x20
						}
					case "checksum":
						v[len(v)-1] ^= 0x80
					}
					return b.Put(rec.key, v)
				})
				if err != nil {
					t.Fatal(err)
				}
				rec.caught(t, s, path)
				s.Close()
				err = Check(path)
				mustCorrupt(t, err, path)
				if !strings.Contains(err.Error(), rec.names) {
					t.Fatalf("check: %v\nwant it to name %s", err, rec.names)
				}
				if s, err = Open(path, Options{}); err != nil {
					t.Fatal(err)
				}
				if rec.heal != nil {
					rec.heal(t, s)
				}
			})
		}
	}
}

// A damaged record is not the whole store's failure: a record damaged
// under one source leaves a fresh save of another source, and of the
// damaged one, working (the digest map is recounted, not adjusted).
func TestDamagedRecordHealsOnSave(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	snap := saveCorpus(t, path, 20)
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	key := skillKey(snap.Skills[3].Path)
	err = s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketSources).Bucket([]byte("src")).Bucket(keySkills)
		v := bytes.Clone(b.Get(key))
		v[len(v)/2] ^= 0xff
		return b.Put(key, v)
	})
	if err != nil {
		t.Fatal(err)
	}
	s = reopen(t, s)
	if p := load(t, s)["src"]; p.Damaged == nil {
		t.Fatal("damage not noticed")
	}
	// A resync that drops the damaged skill, then one that brings it back.
	fewer := *snap
	fewer.Skills = append(fewer.Skills[:3:3], fewer.Skills[4:]...)
	fewer.Commit = "c2"
	if err := s.SaveSnapshot(&fewer, stateOf(&fewer)); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(); err != nil {
		t.Fatalf("after the resync: %v", err)
	}
	sameSnapshot(t, load(t, s)["src"].Snapshot, &fewer)
	if err := s.DeleteSource("src"); err != nil {
		t.Fatal(err)
	}
	if d, err := s.Digests(); err != nil || len(d) != 0 {
		t.Fatalf("digests after deleting the only source: %v (%v)", d, err)
	}
}

// FuzzDamagedSkillRecord changes bytes of a sealed skill record (its key
// or value, anywhere, in runs of any length): the restart path's check
// must refuse it, or the record must decode to exactly the original.
func FuzzDamagedSkillRecord(f *testing.F) {
	recs := recordSeeds(f)
	for i := range recs {
		f.Add(uint8(i), uint16(0), []byte{1})
		f.Add(uint8(i), uint16(len(recs[i].val)/2), []byte{0x20, 0x20, 0x20, 0x20, 0x20, 0x20})
		f.Add(uint8(i), uint16(len(recs[i].key)+len(recs[i].val)-1), []byte{0x80})
	}
	f.Fuzz(func(t *testing.T, which uint8, at uint16, xor []byte) {
		r := recs[int(which)%len(recs)]
		kv := append(bytes.Clone(r.key), r.val...)
		changed := false
		for i, x := range xor {
			if p := int(at) + i; p < len(kv) && x != 0 {
				kv[p] ^= x
				changed = true
			}
		}
		if !changed || kv[0] != skillKeyPrefix {
			return
		}
		if !contiguousSumOK(kv) {
			return // refused, as it must be
		}
		// Only a change that happens to keep the checksum gets here (CRC-32C
		// detects every burst of up to 32 bits): it must be no change.
		var sk skill.Skill
		var fm skill.Frontmatter
		key := string(kv[:len(r.key)])
		if err := decodeSkill(key[1:], string(kv[len(r.key):len(kv)-sumLen]), &sk, &fm, decoding{}); err == nil && !reflect.DeepEqual(&sk, r.sk) {
			t.Fatalf("a damaged record passed its checksum and decoded as %+v", sk)
		}
	})
}
