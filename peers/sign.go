// Package peers relays the webhook deliveries one replica accepts to the
// other replicas of the same catalog: the peer set (static base URLs, and
// dns:NAME:PORT names re-resolved every ResolveEvery), the sender (every
// delivery POSTed to every other peer in the background, in parallel, each
// within a timeout, bounded by a byte budget), the signature both sides
// share, and per-peer stats.
//
// The wire contract: POST <base>/webhooks/github with the delivery's
// original body, Content-Type, X-GitHub-Event and X-GitHub-Delivery, plus
// HeaderFrom (the sender's instance id) and HeaderSignature
// ("sha256=" and the hex HMAC-SHA256, under the peer secret, of from "\n"
// event "\n" delivery "\n" body). A receiver checks it against its peer
// secrets, never relays it again, applies a delivery id at most once, and
// answers a relay from its own instance id with HeaderOutcome: OutcomeSelf
// without applying it.
package peers

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// The relay's headers, besides GitHub's own.
const (
	// HeaderFrom is the sending replica's instance id.
	HeaderFrom = "X-Skillreg-Relay-From"
	// HeaderSignature is "sha256=" and 64 hex digits: Sign's value.
	HeaderSignature = "X-Skillreg-Relay-Signature-256"
	// HeaderOutcome is set by a receiver on its answer to a relay: the
	// outcome (OutcomeSelf when the relay came from its own instance id).
	HeaderOutcome = "X-Skillreg-Relay-Outcome"
)

// OutcomeSelf is a receiver's answer to a relay from its own instance id:
// not applied; the sender skips that address until it is re-resolved.
const OutcomeSelf = "self"

// MaxInstanceIDLen bounds an instance id a receiver accepts in HeaderFrom:
// NewInstanceID makes 32 hex digits; other senders may use up to this.
const MaxInstanceIDLen = 64

const sigPrefix = "sha256="

// NewInstanceID returns a random instance id: 128 bits in lowercase hex,
// made once per process, so that a replica recognises its own relays.
func NewInstanceID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// ValidInstanceID reports whether id may be a relay's HeaderFrom: 1 to
// MaxInstanceIDLen characters of [0-9a-zA-Z-]. The sender's id is part of
// what is signed, so this only keeps junk out of logs and metrics.
func ValidInstanceID(id string) bool {
	if id == "" || len(id) > MaxInstanceIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '-') {
			return false
		}
	}
	return true
}

// Sign is the HeaderSignature value of a relay: "sha256=" and the hex
// HMAC-SHA256 under secret of from "\n" event "\n" delivery "\n" body.
func Sign(secret []byte, from, event, delivery string, body []byte) string {
	return sigPrefix + hex.EncodeToString(mac(secret, from, event, delivery, body))
}

// WellFormed reports whether sig has the shape of a HeaderSignature value,
// so that a receiver refuses anything else before reading the body.
func WellFormed(sig string) bool {
	digest, ok := strings.CutPrefix(sig, sigPrefix)
	if !ok || len(digest) != 2*sha256.Size {
		return false
	}
	_, err := hex.DecodeString(digest)
	return err == nil
}

// Verify reports whether sig is Sign's value under one of secrets (several
// allow rotation: add the new secret everywhere, then sign with it, then
// remove the old one). Every secret is tried whichever matches, each
// comparison in constant time, so the time taken does not tell which one
// did. Empty secrets never match.
func Verify(sig string, secrets [][]byte, from, event, delivery string, body []byte) bool {
	if !WellFormed(sig) {
		return false
	}
	want, _ := hex.DecodeString(sig[len(sigPrefix):])
	ok := false
	for _, s := range secrets {
		if len(s) == 0 {
			continue
		}
		if hmac.Equal(mac(s, from, event, delivery, body), want) {
			ok = true
		}
	}
	return ok
}

func mac(secret []byte, from, event, delivery string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(from))
	m.Write([]byte{'\n'})
	m.Write([]byte(event))
	m.Write([]byte{'\n'})
	m.Write([]byte(delivery))
	m.Write([]byte{'\n'})
	m.Write(body)
	return m.Sum(nil)
}
