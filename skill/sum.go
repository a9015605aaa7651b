package skill

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"strings"

	"github.com/skillreg/skillreg/gitref"
)

// Sum is the SHA-256 of a file's bytes, kept as its 32 bytes: every file
// of every skill holds one, and the manifest spelling ("sha256:" and 64
// hex digits, gitref.Digest) takes 71 bytes and a string header more. The
// zero Sum means not known. The spelling is made where a surface writes
// it (String, AppendDigest).
type Sum [sha256.Size]byte

// SumOf returns the Sum of b.
func SumOf(b []byte) Sum { return sha256.Sum256(b) }

// SumOfHash returns the Sum a SHA-256 hash has computed so far (h must
// come from sha256.New).
func SumOfHash(h hash.Hash) Sum {
	var s Sum
	h.Sum(s[:0])
	return s
}

// ParseSum reads a digest in the manifest spelling ("sha256:" and 64
// lowercase hex digits), without allocating.
func ParseSum(d string) (Sum, error) {
	var s Sum
	h, ok := strings.CutPrefix(d, digestPrefix)
	if !ok || len(h) != 2*len(s) {
		return Sum{}, fmt.Errorf("%w: %.80q (want sha256: and 64 lowercase hex digits)", gitref.ErrInvalidDigest, d)
	}
	for i := range s {
		hi, ok1 := fromHex(h[2*i])
		lo, ok2 := fromHex(h[2*i+1])
		if !ok1 || !ok2 {
			return Sum{}, fmt.Errorf("%w: %.80q (want sha256: and 64 lowercase hex digits)", gitref.ErrInvalidDigest, d)
		}
		s[i] = hi<<4 | lo
	}
	return s, nil
}

func fromHex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// IsZero reports whether s is the zero Sum (not known).
func (s Sum) IsZero() bool { return s == Sum{} }

// Digest returns the manifest spelling, or "" for the zero Sum.
func (s Sum) Digest() gitref.Digest {
	if s.IsZero() {
		return ""
	}
	return gitref.Digest(s.AppendDigest(make([]byte, 0, len(digestPrefix)+2*sha256.Size)))
}

// String returns the manifest spelling ("" for the zero Sum).
func (s Sum) String() string { return string(s.Digest()) }

// Hex returns the 64 hex digits, or "" for the zero Sum.
func (s Sum) Hex() string {
	if s.IsZero() {
		return ""
	}
	return hex.EncodeToString(s[:])
}

// AppendDigest appends the manifest spelling to b, without allocating
// when b has room (nothing for the zero Sum).
func (s Sum) AppendDigest(b []byte) []byte {
	if s.IsZero() {
		return b
	}
	b = append(b, digestPrefix...)
	return hex.AppendEncode(b, s[:])
}

// Verify returns nil when b hashes to s, else an error wrapping
// gitref.ErrDigestMismatch that names both digests.
func (s Sum) Verify(b []byte) error {
	if got := SumOf(b); got != s {
		return fmt.Errorf("%w: want %s, got %s", gitref.ErrDigestMismatch, s, got)
	}
	return nil
}

// MarshalText writes the manifest spelling, so JSON shows a Sum as before.
func (s Sum) MarshalText() ([]byte, error) { return s.AppendDigest(nil), nil }

// UnmarshalText reads the manifest spelling ("" is the zero Sum).
func (s *Sum) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*s = Sum{}
		return nil
	}
	v, err := ParseSum(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

const digestPrefix = "sha256:"
