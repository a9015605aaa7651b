package catalog

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"

	"github.com/skillreg/skillreg/skill"
)

// IndexVersion is the version of what the indexer and the listings make of
// a tree. It is part of every generation's name: bump it whenever the same
// commit would index or list differently (a new rule, another entry
// shape), so that during a rolling upgrade an old and a new replica never
// answer one generation name with different pages.
const IndexVersion = 1

// nameLen is the length of a generation name: 16 bytes of SHA-256 in
// unpadded base64url.
const nameLen = 22

// generationName names a generation by what it holds: the index version
// and, per source in name order (as c.sources is sorted), everything a
// listing renders from it: name, kind, repository, pin, resolved commit and
// tag, signature, path, and every skill's path, frontmatter, files (path,
// size, digest, mode) and directories, and what was excluded and why. Two
// processes that synced the same commits (or read the same directory) with
// the same limits and verification therefore name it alike and render the
// same pages; a difference in configuration that changes what is served
// (a limit that excludes a skill, a key that verifies a signature) changes
// the name. The file's local handles (ID, Key) are left out: they differ
// between processes and never reach a listing.
func generationName(digests [][sha256.Size]byte) string {
	var w digestWriter
	w.str("skillreg generation")
	w.num(IndexVersion)
	w.num(int64(len(digests)))
	for i := range digests {
		w.bytes(digests[i][:])
	}
	sum := sha256.Sum256(w.b)
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

// skillSum is the digest of one skill's part of a generation's name (see
// generationName), truncated to the name's own 16 bytes: the name can
// tell no two generations apart better than that anyway.
type skillSum [16]byte

// skillSums returns the sums of s's skills, in s.Skills' order. A skill
// that old (the previous snapshot of the same source, nil for none) holds
// as the very same value keeps its sum from oldSums: a snapshot made by
// Replace, or by a rescan that reused the unchanged skills, shares all
// but the changed skills with old, so a change hashes what changed and
// not the source (at 100,000 skills that was ~0.3 s of every change).
// Skill values never change once built; only a skill's pointer is
// compared. Both lists are sorted by path, which the merge relies on
// only to find the shared skills (an unsorted list finds fewer and
// hashes more, never a wrong sum).
func skillSums(s, old *Snapshot, oldSums []skillSum) []skillSum {
	out := make([]skillSum, len(s.Skills))
	var w digestWriter
	j := 0
	shared := func(i int, sk *skill.Skill) bool {
		if j < len(old.Skills) && old.Skills[j] == sk && j < len(oldSums) {
			out[i] = oldSums[j]
			j++
			return true
		}
		return false
	}
	for i, sk := range s.Skills {
		if old != nil {
			// The next skill of old, as it almost always is: no path
			// compared (at 100,000 skills the compares were most of it).
			if shared(i, sk) {
				continue
			}
			for j < len(old.Skills) && old.Skills[j].Path < sk.Path {
				j++
			}
			if shared(i, sk) {
				continue
			}
		}
		out[i] = w.skill(sk)
	}
	return out
}

// skill is the sum of everything a listing renders of one skill: its
// path, frontmatter, size, files (path, size, digest, mode) and
// directories.
func (w *digestWriter) skill(sk *skill.Skill) skillSum {
	w.b = w.b[:0]
	w.str(sk.Path)
	if sk.Frontmatter != nil {
		w.bytes(sk.Frontmatter.JSON)
	} else {
		w.str("")
	}
	w.num(sk.Size)
	w.num(int64(len(sk.Files)))
	for i := range sk.Files {
		f := &sk.Files[i]
		w.str(f.Path)
		w.num(f.Size)
		w.digest(f.Digest)
		if f.Exec {
			w.num(1)
		} else {
			w.num(0)
		}
	}
	w.num(int64(len(sk.Dirs)))
	for _, d := range sk.Dirs {
		w.str(d)
	}
	sum := sha256.Sum256(w.b)
	return skillSum(sum[:16])
}

// snapshotDigest is the digest of one source's part of a generation's
// name (see generationName), from its skills' sums (skillSums). A
// generation built from another keeps the digests of the snapshots it
// shares with it, and the sums of the skills it shares: a sync hashes
// the skills it changed, not the whole catalog.
func snapshotDigest(s *Snapshot, sums []skillSum) [sha256.Size]byte {
	w := digestWriter{b: make([]byte, 0, 256+len(sums)*len(skillSum{}))}
	w.str(s.Source)
	w.str(string(s.Kind))
	w.str(s.Repository)
	w.str(s.Ref)
	w.str(s.Commit)
	w.str(s.Tag)
	w.str(s.Path)
	if s.Signature != nil {
		sig, err := json.Marshal(s.Signature) // as a listing renders it
		if err != nil {
			panic(err) // strings and bools: never fails
		}
		w.bytes(sig)
	} else {
		w.str("")
	}
	w.num(int64(len(sums)))
	for i := range sums {
		w.b = append(w.b, sums[i][:]...)
	}
	w.num(int64(len(s.Excluded)))
	for _, e := range s.Excluded {
		w.str(e.Path)
		w.str(e.File)
		w.str(string(e.Problem.Rule))
		w.str(e.Problem.Detail)
	}
	return sha256.Sum256(w.b)
}

// digestWriter writes length-prefixed fields, so that no two sequences of
// fields hash alike, into a buffer hashed whole: a hash fed string by
// string copied each string to bytes first.
type digestWriter struct {
	b []byte
}

func (w *digestWriter) num(n int64) { w.b = binary.AppendVarint(w.b, n) }

func (w *digestWriter) str(s string) {
	w.num(int64(len(s)))
	w.b = append(w.b, s...)
}

// digest writes a file's digest as its manifest spelling, as str would
// have written the string: generation names stay what they were when
// files kept their digests as strings.
func (w *digestWriter) digest(d skill.Sum) {
	var b [71]byte
	w.bytes(d.AppendDigest(b[:0]))
}

func (w *digestWriter) bytes(b []byte) {
	w.num(int64(len(b)))
	w.b = append(w.b, b...)
}

// validName reports whether s could be a generation name: a cursor
// carrying anything else is malformed. (A cursor of an older release, or
// of another index version, is well formed and names a generation no
// process holds: it answers "catalog changed".)
func validName(s string) bool {
	if len(s) == 0 || len(s) > 43 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
