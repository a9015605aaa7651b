package store

import (
	"bytes"
	"encoding/gob"
	"encoding/json"
	"flag"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/skill"
)

// The benchmarks below are how the store's encoding was chosen: a
// 10,000-skill snapshot stored one record per skill or as one blob, in
// JSON, gob or the store's binary form, then loaded back (copied out of a
// read transaction and decoded), saved whole, and saved with one skill
// changed (what a push of one file costs). Run:
//
//	go test ./store -run '^$' -bench Encoding -benchtime 5x

var benchSkills = flag.Int("bench-skills", 10000, "skills in the corpus of the encoding benchmarks")

var (
	benchOnce sync.Once
	benchSnap *catalog.Snapshot
)

func benchSnapshot(b *testing.B) *catalog.Snapshot {
	benchOnce.Do(func() { benchSnap = corpusSnapshot(b, "bench", *benchSkills) })
	return benchSnap
}

// codec is one way to store the skills of a snapshot as records.
type codec struct {
	name   string
	encode func(*skill.Skill) ([]byte, error)
	decode func(path string, v []byte) (*skill.Skill, error)
}

var codecs = []codec{
	{
		name:   "json",
		encode: func(s *skill.Skill) ([]byte, error) { return json.Marshal(s) },
		decode: func(_ string, v []byte) (*skill.Skill, error) {
			var s skill.Skill
			return &s, json.Unmarshal(v, &s)
		},
	},
	{
		name: "gob",
		encode: func(s *skill.Skill) ([]byte, error) {
			var buf bytes.Buffer
			err := gob.NewEncoder(&buf).Encode(s)
			return buf.Bytes(), err
		},
		decode: func(_ string, v []byte) (*skill.Skill, error) {
			var s skill.Skill
			return &s, gob.NewDecoder(bytes.NewReader(v)).Decode(&s)
		},
	},
	{
		name: "binary",
		encode: func(s *skill.Skill) ([]byte, error) {
			e := enc{}
			encodeSkill(&e, s)
			return e.b, nil
		},
		decode: func(path string, v []byte) (*skill.Skill, error) {
			var s skill.Skill
			var fm skill.Frontmatter
			return &s, decodeSkill(path, string(v), &s, &fm, decoding{})
		},
	},
}

// writeCodec stores the snapshot's skills with c, per skill or as one
// blob (length-prefixed path and record, one after the other; gob and
// JSON blobs are whole-slice encodings).
func writeCodec(db *bolt.DB, snap *catalog.Snapshot, c codec, blob bool) error {
	var recs [][2][]byte
	if blob {
		var v []byte
		var err error
		switch c.name {
		case "json":
			v, err = json.Marshal(snap.Skills)
		case "gob":
			var buf bytes.Buffer
			err = gob.NewEncoder(&buf).Encode(snap.Skills)
			v = buf.Bytes()
		default:
			e := enc{}
			for _, sk := range snap.Skills {
				e.str(sk.Path)
				r, _ := c.encode(sk)
				e.bytes(r)
			}
			v = e.b
		}
		if err != nil {
			return err
		}
		recs = append(recs, [2][]byte{[]byte("blob"), v})
	} else {
		for _, sk := range snap.Skills {
			v, err := c.encode(sk)
			if err != nil {
				return err
			}
			recs = append(recs, [2][]byte{skillKey(sk.Path), v})
		}
	}
	return db.Update(func(tx *bolt.Tx) error {
		tx.DeleteBucket([]byte("bench"))
		b, err := tx.CreateBucket([]byte("bench"))
		if err != nil {
			return err
		}
		b.FillPercent = 0.9
		for _, r := range recs {
			if err := b.Put(r[0], r[1]); err != nil {
				return err
			}
		}
		return nil
	})
}

// readCodec copies the records out and decodes them.
func readCodec(db *bolt.DB, c codec, blob bool) ([]*skill.Skill, error) {
	var recs [][2][]byte
	err := db.View(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("bench")).ForEach(func(k, v []byte) error {
			recs = append(recs, [2][]byte{bytes.Clone(k), bytes.Clone(v)})
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	if !blob {
		out := make([]*skill.Skill, len(recs))
		for i, r := range recs {
			if out[i], err = c.decode(string(r[0][1:]), r[1]); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	var out []*skill.Skill
	switch c.name {
	case "json":
		err = json.Unmarshal(recs[0][1], &out)
	case "gob":
		err = gob.NewDecoder(bytes.NewReader(recs[0][1])).Decode(&out)
	default:
		d := dec{s: string(recs[0][1])}
		for len(d.s) > 0 && d.err == nil {
			path, v := d.str(), d.str()
			sk, err := c.decode(path, []byte(v))
			if err != nil {
				return nil, err
			}
			out = append(out, sk)
		}
		err = d.err
	}
	return out, err
}

func BenchmarkEncoding(b *testing.B) {
	snap := benchSnapshot(b)
	n := len(snap.Skills)
	for _, c := range codecs {
		for _, blob := range []bool{false, true} {
			name := c.name + "-per-skill"
			if blob {
				name = c.name + "-blob"
			}
			b.Run("load/"+name, func(b *testing.B) {
				path := filepath.Join(b.TempDir(), "bench.db")
				db, err := bolt.Open(path, 0o600, &bolt.Options{PageSize: pageSize})
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				if err := writeCodec(db, snap, c, blob); err != nil {
					b.Fatal(err)
				}
				for b.Loop() {
					got, err := readCodec(db, c, blob)
					if err != nil || len(got) != n {
						b.Fatalf("decoded %d skills: %v", len(got), err)
					}
				}
				var size int64
				db.View(func(tx *bolt.Tx) error { size = tx.Size(); return nil })
				b.ReportMetric(float64(size)/float64(n)*1000/(1<<20), "MiB/1000skills")
			})
			b.Run("save/"+name, func(b *testing.B) {
				db, err := bolt.Open(filepath.Join(b.TempDir(), "bench.db"), 0o600, &bolt.Options{PageSize: pageSize})
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				for b.Loop() {
					if err := writeCodec(db, snap, c, blob); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
	// The store itself: binary records per skill, saved with the diff
	// against the stored records and the digest map.
	for _, ps := range []int{4 << 10, pageSize} {
		b.Run(fmt.Sprintf("store/page-%dKiB", ps>>10), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), FileName)
			s, err := openWithPageSize(path, ps)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if err := s.SaveSnapshot(snap, stateOf(snap)); err != nil {
				b.Fatal(err)
			}
			onDisk, err := s.SizeBytes()
			if err != nil {
				b.Fatal(err)
			}
			size := float64(onDisk) / float64(n) * 1000 / (1 << 20)
			b.Run("load", func(b *testing.B) {
				for b.Loop() {
					if _, err := s.Load(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(size, "MiB/1000skills")
			})
			b.Run("digests", func(b *testing.B) {
				for b.Loop() {
					if _, err := s.Digests(); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("save-one-changed", func(b *testing.B) {
				variants := [2]*catalog.Snapshot{snap, withOneChange(snap)}
				i := 0
				for b.Loop() {
					i++
					v := variants[i%2]
					if err := s.SaveSnapshot(v, stateOf(v)); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// withOneChange is snap with one file of one skill changed.
func withOneChange(snap *catalog.Snapshot) *catalog.Snapshot {
	c := *snap
	c.Skills = append([]*skill.Skill(nil), snap.Skills...)
	sk := *c.Skills[len(c.Skills)/2]
	sk.Files = append([]skill.File(nil), sk.Files...)
	sk.Files[1].Digest = skill.Sum{31: 1}
	sk.Files[1].Key += "|changed"
	c.Skills[len(c.Skills)/2] = &sk
	return &c
}

// openWithPageSize opens a store whose new file uses another page size.
func openWithPageSize(path string, ps int) (*Store, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{PageSize: ps})
	if err != nil {
		return nil, err
	}
	db.Close()
	return Open(path, Options{})
}
