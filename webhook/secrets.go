package webhook

import (
	"encoding/hex"
	"strings"

	"github.com/google/go-github/v60/github"
)

// ParseSecrets splits the value of the webhook secret variable or file into
// secrets: one per line or comma-separated, each trimmed, empty ones
// dropped. Several secrets allow rotation: a delivery signed with any of
// them passes. It returns nil when there is none.
func ParseSecrets(s string) []string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		for _, part := range strings.Split(line, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
	}
	return out
}

const sha256Prefix = "sha256="

// wellFormedSignature reports whether sig has the shape of an
// X-Hub-Signature-256 value: "sha256=" and 64 hex digits. Anything else
// (missing, truncated, sha1=, sha512=) is refused before the body is read.
func wellFormedSignature(sig string) bool {
	digest, ok := strings.CutPrefix(sig, sha256Prefix)
	if !ok || len(digest) != 64 {
		return false
	}
	_, err := hex.DecodeString(digest)
	return err == nil
}

// verify reports whether sig is the HMAC-SHA256 of body under one of the
// secrets. Every secret is tried, whichever matches, so the time taken does
// not tell which one did; each comparison is constant-time (go-github's
// ValidateSignature uses hmac.Equal).
func verify(sig string, body []byte, secrets [][]byte) bool {
	if !wellFormedSignature(sig) {
		return false
	}
	ok := false
	for _, secret := range secrets {
		if github.ValidateSignature(sig, body, secret) == nil {
			ok = true
		}
	}
	return ok
}
