// Package sigverify checks the signatures git puts on commits and annotated
// tags, against trusted keys given as OpenPGP keyrings or an SSH
// allowed_signers file, the way git itself decides (git verify-commit,
// git verify-tag), without running git, gpg or ssh-keygen.
//
// It reads raw object content (the bytes after git's "type size\0"
// header), so the bytes checked are the bytes a server fetched or a client
// received, not a re-encoding of them. Every input is hostile: objects and
// signature blocks are bounded, and a parse failure is ErrMalformed, never
// a panic.
package sigverify

import (
	"errors"
	"fmt"
)

// Kind is the kind of a signed git object.
type Kind string

// The two kinds of git objects that carry signatures.
const (
	Commit Kind = "commit"
	Tag    Kind = "tag"
)

// The signature types Signature.Type names.
const (
	TypeOpenPGP = "openpgp"
	TypeSSH     = "ssh"
	// TypeX509 is a gpgsm (S/MIME) signature: recognised so that a reason
	// names it, never verified.
	TypeX509 = "x509"
)

// MaxObject is the largest object content Verify, Split and SignedAt read.
// Commits and tags are small; a larger one is ErrMalformed.
const MaxObject = 4 << 20

// maxSignature bounds one signature block (an armored OpenPGP signature
// with a large RSA key is about 1 KiB; an SSH signature less).
const maxSignature = 64 << 10

// Signature is what is known about an object's signature: as much as could
// be learnt even when it does not verify, so a reason can say who signed
// with which key. It is a plain value (stored, shown, put in provenance).
type Signature struct {
	// Verified is true when the signature is good, by a trusted key, valid
	// at the signing time.
	Verified bool `json:"verified"`
	// Type is "openpgp" or "ssh" ("x509" when recognised but unsupported);
	// "" when the object is unsigned.
	Type string `json:"type,omitempty"`
	// Key identifies the signing key. OpenPGP: the upper-case hex
	// fingerprint of the primary key of the signing (sub)key when the key
	// is known, else the issuer fingerprint (or 16-digit key id) the
	// signature names. SSH: "SHA256:..." of the signing public key.
	Key string `json:"key,omitempty"`
	// Signer is the allowed_signers principal (as the line lists it:
	// comma-separated when it lists several), or the OpenPGP primary user
	// id; "" when the key is not trusted.
	Signer string `json:"signer,omitempty"`
}

// String describes the signature for a reason or a log line: "unsigned",
// "ssh key SHA256:… by alice@example.com", "ssh key SHA256:… (no allowed
// signer)", "openpgp key 3AF0… (not in the keyring)", "openpgp key 3AF0… by
// Alice <alice@example.com> (not verified)", ...
func (s Signature) String() string {
	if s.Type == "" {
		return "unsigned"
	}
	if s.Key == "" {
		if s.Type == TypeX509 {
			return "x509 signature (not supported)"
		}
		return "malformed " + s.Type + " signature"
	}
	d := s.Type + " key " + s.Key
	switch {
	case s.Verified:
		return d + " by " + s.Signer
	case s.Signer != "":
		return d + " by " + s.Signer + " (not verified)"
	case s.Type == TypeSSH:
		return d + " (no allowed signer)"
	default:
		return d + " (not in the keyring)"
	}
}

// The errors Verify returns (wrapped, with detail); compare with errors.Is.
var (
	// ErrUnsigned: the object carries no signature.
	ErrUnsigned = errors.New("unsigned")
	// ErrUnknownKey: the signing key is not among the trusted keys (or
	// the signature's type has no trusted keys here).
	ErrUnknownKey = errors.New("unknown key")
	// ErrBadSignature: the signature does not match the object's bytes
	// (changed content, another object's signature, a wrong SSH
	// namespace).
	ErrBadSignature = errors.New("bad signature")
	// ErrNotValid: a trusted key made a good signature, but the key was not
	// valid for it: outside the allowed signer's valid-after/valid-before
	// at the committer (tagger) time, not allowed for namespace "git" by
	// its namespaces= option, or an OpenPGP key expired or revoked at the
	// signature's creation time.
	ErrNotValid = errors.New("key not valid for this signature")
	// ErrMalformed: the object, the signature block or a key could not be
	// parsed.
	ErrMalformed = errors.New("malformed")
)

// Namespace is the SSH signature namespace git signs and checks.
const Namespace = "git"

// Verify checks the signature of a commit or tag object. raw is the
// object's content without git's "type size\0" header. The Signature is
// filled as far as known even when err is not nil; err wraps one of the
// package's sentinels. SSH signatures must be in namespace "git" and are
// checked against the allowed signers' valid-after/valid-before at the
// committer (tagger) time, as git does; OpenPGP signatures against the
// key's expiry and revocations at the signature's creation time.
//
// A nil *Keys trusts no key: a signed object is ErrUnknownKey.
func (k *Keys) Verify(kind Kind, raw []byte) (Signature, error) {
	if k == nil {
		k = &Keys{}
	}
	payload, sig, err := Split(kind, raw)
	if err != nil {
		return Signature{}, err
	}
	if sig == nil {
		return Signature{}, fmt.Errorf("%s: %w", kind, ErrUnsigned)
	}
	var s Signature
	switch signatureType(sig) {
	case TypeOpenPGP:
		s, err = k.verifyOpenPGP(payload, sig)
	case TypeSSH:
		s, err = k.verifySSH(kind, raw, payload, sig)
	default:
		s = Signature{Type: TypeX509}
		err = fmt.Errorf("x509 signatures are not supported: %w", ErrUnknownKey)
	}
	if err != nil {
		return s, fmt.Errorf("%s: %s: %w", kind, s.Type, err)
	}
	return s, nil
}
