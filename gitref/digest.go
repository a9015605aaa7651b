package gitref

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strings"
)

// ErrInvalidDigest means a string is not "sha256:" followed by 64
// lowercase hex digits; ErrDigestMismatch means bytes do not hash to a
// digest.
var (
	ErrInvalidDigest  = errors.New("invalid digest")
	ErrDigestMismatch = errors.New("digest mismatch")
)

const digestPrefix = "sha256:"

// Digest is the SHA-256 of a file's bytes as manifests spell it:
// "sha256:" followed by 64 lowercase hex digits. The zero Digest is "",
// meaning not known. Make one with Sum, SumHash or ParseDigest.
type Digest string

// Sum returns the digest of b.
func Sum(b []byte) Digest {
	s := sha256.Sum256(b)
	return Digest(digestPrefix + hex.EncodeToString(s[:]))
}

// SumHash returns the digest a SHA-256 hash has computed so far, for
// content hashed while it streams (h must come from sha256.New).
func SumHash(h hash.Hash) Digest {
	var buf [sha256.Size]byte
	return Digest(digestPrefix + hex.EncodeToString(h.Sum(buf[:0])))
}

// ParseDigest checks that s is a digest in the manifest spelling.
func ParseDigest(s string) (Digest, error) {
	d := Digest(s)
	if !d.Valid() {
		return "", fmt.Errorf("%w: %.80q (want sha256: and 64 lowercase hex digits)", ErrInvalidDigest, s)
	}
	return d, nil
}

// Valid reports whether d is in the manifest spelling.
func (d Digest) Valid() bool {
	h, ok := strings.CutPrefix(string(d), digestPrefix)
	if !ok || len(h) != 2*sha256.Size {
		return false
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Hex returns the 64 hex digits without the "sha256:" prefix (for file
// names, ETags and URLs), or "" when d is not valid.
func (d Digest) Hex() string {
	if !d.Valid() {
		return ""
	}
	return string(d[len(digestPrefix):])
}

// Verify returns nil when b hashes to d, else an error wrapping
// ErrDigestMismatch that names both digests.
func (d Digest) Verify(b []byte) error {
	if got := Sum(b); got != d {
		return fmt.Errorf("%w: want %s, got %s", ErrDigestMismatch, d, got)
	}
	return nil
}

// String returns the manifest spelling.
func (d Digest) String() string { return string(d) }
