package catalog

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"hash"
	"strings"
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
	h := sha256.New()
	w := digestWriter{h: h}
	w.str("skillreg generation")
	w.num(IndexVersion)
	w.num(int64(len(digests)))
	for i := range digests {
		w.bytes(digests[i][:])
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:16])
}

// snapshotDigest is the digest of one source's part of a generation's
// name (see generationName). A generation built from another keeps the
// digests of the snapshots it shares with it: a sync hashes the one
// source it changed, not the whole catalog.
func snapshotDigest(s *Snapshot) [sha256.Size]byte {
	h := sha256.New()
	w := digestWriter{h: h}
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
	w.num(int64(len(s.Skills)))
	for _, sk := range s.Skills {
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
			w.str(f.Digest)
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
	}
	w.num(int64(len(s.Excluded)))
	for _, e := range s.Excluded {
		w.str(e.Path)
		w.str(e.File)
		w.str(string(e.Problem.Rule))
		w.str(e.Problem.Detail)
	}
	var d [sha256.Size]byte
	h.Sum(d[:0])
	return d
}

// digestWriter writes length-prefixed fields, so that no two sequences of
// fields hash alike.
type digestWriter struct {
	h   hash.Hash
	buf [binary.MaxVarintLen64]byte
}

func (w *digestWriter) num(n int64) {
	w.h.Write(w.buf[:binary.PutVarint(w.buf[:], n)])
}

func (w *digestWriter) str(s string) {
	w.num(int64(len(s)))
	_, _ = strings.NewReader(s).WriteTo(w.h)
}

func (w *digestWriter) bytes(b []byte) {
	w.num(int64(len(b)))
	w.h.Write(b)
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
