package gitref

import (
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
)

func TestDigest(t *testing.T) {
	// sha256("hello\n"), as sha256sum prints it.
	const hello = "sha256:5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"
	d := Sum([]byte("hello\n"))
	if d != hello || d.String() != hello || !d.Valid() || d.Hex() != hello[len("sha256:"):] {
		t.Fatalf("Sum = %q (hex %q)", d, d.Hex())
	}
	h := sha256.New()
	h.Write([]byte("hel"))
	h.Write([]byte("lo\n"))
	if got := SumHash(h); got != d {
		t.Fatalf("SumHash = %q, want %q", got, d)
	}
	if p, err := ParseDigest(hello); err != nil || p != d {
		t.Fatalf("ParseDigest = %q, %v", p, err)
	}
	if err := d.Verify([]byte("hello\n")); err != nil {
		t.Fatalf("Verify of the same bytes: %v", err)
	}
	err := d.Verify([]byte("hello"))
	if !errors.Is(err, ErrDigestMismatch) || !strings.Contains(err.Error(), hello) {
		t.Fatalf("Verify of other bytes: %v", err)
	}
	if err := Digest("").Verify(nil); !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("the zero Digest verified: %v", err)
	}
	for _, bad := range []string{
		"",
		hello[len("sha256:"):],
		"sha256:" + strings.ToUpper(hello[len("sha256:"):]),
		"sha512:" + hello[len("sha256:"):],
		hello[:len(hello)-1],
		hello + "0",
		"sha256:" + strings.Repeat("g", 64),
		"SHA256:" + hello[len("sha256:"):],
	} {
		if _, err := ParseDigest(bad); !errors.Is(err, ErrInvalidDigest) {
			t.Errorf("ParseDigest(%q) error = %v, want ErrInvalidDigest", bad, err)
		}
		if Digest(bad).Valid() || Digest(bad).Hex() != "" {
			t.Errorf("Digest(%q) is valid", bad)
		}
	}
}
