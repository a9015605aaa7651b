package sigverify

import (
	"bytes"
	"fmt"
	"strconv"
	"time"
)

// The headers that carry a commit's signature: gpgsig in a SHA-1
// repository, gpgsig-sha256 in a SHA-256 one. Git leaves every gpgsig*
// header out of the signed payload.
var (
	sigHeaderSHA1   = []byte("gpgsig")
	sigHeaderSHA256 = []byte("gpgsig-sha256")
)

// The first lines of the signature blocks git appends to a tag (and puts
// in a commit's gpgsig header), as git's gpg-interface.c lists them.
var sigBegins = []struct {
	typ    string
	prefix []byte
}{
	{TypeOpenPGP, []byte("-----BEGIN PGP SIGNATURE-----")},
	{TypeOpenPGP, []byte("-----BEGIN PGP MESSAGE-----")},
	{TypeX509, []byte("-----BEGIN SIGNED MESSAGE-----")},
	{TypeSSH, []byte("-----BEGIN SSH SIGNATURE-----")},
}

// signatureType is the type of a signature block by its first line.
func signatureType(sig []byte) string {
	for _, b := range sigBegins {
		if bytes.HasPrefix(sig, b.prefix) {
			return b.typ
		}
	}
	return ""
}

// Split separates a signed object's content into the payload the
// signature covers and the signature block, the way git does: for a
// commit, the payload is the object without its gpgsig (or gpgsig-sha256)
// header and that header's continuation lines, and the signature is the
// header's value (gpgsig preferred when both are present); for a tag, the
// signature is the object's tail from the last line that begins a
// signature block. An unsigned object gives (raw, nil, nil).
func Split(kind Kind, raw []byte) (payload, signature []byte, err error) {
	if len(raw) > MaxObject {
		return nil, nil, fmt.Errorf("%s of %d bytes, more than %d: %w", kind, len(raw), MaxObject, ErrMalformed)
	}
	switch kind {
	case Commit:
		payload, signature = splitCommit(raw, sigHeaderSHA1)
		if signature == nil {
			payload, signature = splitCommit(raw, sigHeaderSHA256)
		}
	case Tag:
		payload, signature = splitTag(raw)
	default:
		return nil, nil, fmt.Errorf("object kind %q: %w", kind, ErrMalformed)
	}
	if signature != nil {
		if len(signature) > maxSignature {
			return nil, nil, fmt.Errorf("%s signature of %d bytes, more than %d: %w", kind, len(signature), maxSignature, ErrMalformed)
		}
		if signatureType(signature) == "" {
			return nil, nil, fmt.Errorf("%s signature header without a signature block: %w", kind, ErrMalformed)
		}
	}
	return payload, signature, nil
}

// splitCommit follows git's parse_buffer_signed_by_header: in the headers
// (up to the first empty line), lines of the wanted header and its
// continuation lines (" " then the rest) make the signature; every other
// gpgsig* header and its continuations are dropped; the rest, body
// included, is the payload.
func splitCommit(raw, header []byte) (payload, signature []byte) {
	var sig []byte
	saw, inSig, other := false, false, false
	out := make([]byte, 0, len(raw))
	for line := 0; line < len(raw); {
		next := bytes.IndexByte(raw[line:], '\n')
		if next < 0 {
			next = len(raw)
		} else {
			next += line + 1
		}
		l := raw[line:next]
		var part []byte
		isSig := false
		switch {
		case inSig && l[0] == ' ':
			part, isSig = l[1:], true
		case bytes.HasPrefix(l, header) && len(l) > len(header) && l[len(header)] == ' ':
			part, isSig = l[len(header)+1:], true
			other = false
		case bytes.HasPrefix(l, sigHeaderSHA1):
			other = true
		case other && l[0] != ' ':
			other = false
		}
		if isSig {
			sig = append(sig, part...)
			saw, inSig = true, true
		} else {
			if l[0] == '\n' {
				next = len(raw) // the body: the rest, as it is
				l = raw[line:]
			}
			if !other {
				out = append(out, l...)
			}
			inSig = false
		}
		line = next
	}
	if !saw {
		return raw, nil
	}
	if sig == nil {
		sig = []byte{} // an empty header: signed, with nothing (malformed)
	}
	return out, sig
}

// splitTag follows git's parse_signed_buffer: the signature starts at the
// last line that begins with a signature block's first line.
func splitTag(raw []byte) (payload, signature []byte) {
	match := -1
	for line := 0; line < len(raw); {
		if signatureType(raw[line:]) != "" {
			match = line
		}
		next := bytes.IndexByte(raw[line:], '\n')
		if next < 0 {
			break
		}
		line += next + 1
	}
	if match < 0 {
		return raw, nil
	}
	return raw[:match], raw[match:]
}

// SignedAt returns the time the object says it was made: the committer
// time of a commit, the tagger time of a tag, in the zone it records. It is
// the time git checks an allowed signer's valid-after and valid-before
// against. An object without that header is ErrMalformed.
func SignedAt(kind Kind, raw []byte) (time.Time, error) {
	if len(raw) > MaxObject {
		return time.Time{}, fmt.Errorf("%s of %d bytes, more than %d: %w", kind, len(raw), MaxObject, ErrMalformed)
	}
	var name []byte
	switch kind {
	case Commit:
		name = []byte("committer ")
	case Tag:
		name = []byte("tagger ")
	default:
		return time.Time{}, fmt.Errorf("object kind %q: %w", kind, ErrMalformed)
	}
	for line := 0; line < len(raw); {
		end := bytes.IndexByte(raw[line:], '\n')
		if end < 0 {
			end = len(raw)
		} else {
			end += line
		}
		l := raw[line:end]
		if len(l) == 0 {
			break // end of the headers
		}
		if bytes.HasPrefix(l, name) {
			t, err := identTime(l[len(name):])
			if err != nil {
				return time.Time{}, fmt.Errorf("%s %s: %w", kind, bytes.TrimSpace(name), err)
			}
			return t, nil
		}
		line = end + 1
	}
	return time.Time{}, fmt.Errorf("%s without a %s header: %w", kind, bytes.TrimSpace(name), ErrMalformed)
}

// identTime parses the "<seconds> <+hhmm>" after the last '>' of a git
// identity ("Name <email> 1700000000 +0100").
func identTime(ident []byte) (time.Time, error) {
	gt := bytes.LastIndexByte(ident, '>')
	if gt < 0 {
		return time.Time{}, fmt.Errorf("identity without an email: %w", ErrMalformed)
	}
	f := bytes.Fields(ident[gt+1:])
	if len(f) != 2 {
		return time.Time{}, fmt.Errorf("identity without a time and zone: %w", ErrMalformed)
	}
	secs, err := strconv.ParseInt(string(f[0]), 10, 64)
	if err != nil || f[0][0] == '+' || f[0][0] == '-' {
		return time.Time{}, fmt.Errorf("identity time %q: %w", f[0], ErrMalformed)
	}
	z := f[1]
	if len(z) != 5 || (z[0] != '+' && z[0] != '-') {
		return time.Time{}, fmt.Errorf("identity zone %q: %w", z, ErrMalformed)
	}
	hh, err1 := strconv.Atoi(string(z[1:3]))
	mm, err2 := strconv.Atoi(string(z[3:5]))
	if err1 != nil || err2 != nil || mm > 59 || z[1] == '+' || z[1] == '-' || z[3] == '+' || z[3] == '-' {
		return time.Time{}, fmt.Errorf("identity zone %q: %w", z, ErrMalformed)
	}
	off := hh*3600 + mm*60
	if z[0] == '-' {
		off = -off
	}
	return time.Unix(secs, 0).In(time.FixedZone(string(z), off)), nil
}
