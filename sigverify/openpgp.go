package sigverify

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	pgperrors "github.com/ProtonMail/go-crypto/openpgp/errors"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// verifyOpenPGP checks an armored detached OpenPGP signature over payload
// (what gpg --verify does for git). The key's expiry and revocations are
// judged at the signature's creation time: a key that expired after it
// signed still vouches for what it signed then.
func (k *Keys) verifyOpenPGP(payload, armored []byte) (Signature, error) {
	s := Signature{Type: TypeOpenPGP}
	block, err := armor.Decode(bytes.NewReader(armored))
	if err != nil {
		return s, fmt.Errorf("armor: %v: %w", err, ErrMalformed)
	}
	if block.Type != openpgp.SignatureType {
		return s, fmt.Errorf("armored %q, not a signature: %w", block.Type, ErrMalformed)
	}
	body, err := io.ReadAll(io.LimitReader(block.Body, maxSignature+1))
	if err != nil {
		return s, fmt.Errorf("armor: %v: %w", err, ErrMalformed)
	}
	// Find the signature packet go-crypto will check (the first whose
	// issuer is a signing key here), to learn its issuer and time first.
	var chosen *packet.Signature
	var first *packet.Signature
	packets := packet.NewReader(bytes.NewReader(body))
	for chosen == nil {
		p, err := packets.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return s, fmt.Errorf("signature packet: %v: %w", err, ErrMalformed)
		}
		sig, ok := p.(*packet.Signature)
		if !ok {
			return s, fmt.Errorf("a %T packet in a signature: %w", p, ErrMalformed)
		}
		if sig.IssuerKeyId == nil {
			return s, fmt.Errorf("signature without an issuer: %w", ErrMalformed)
		}
		if first == nil {
			first = sig
		}
		if len(k.openpgp.KeysByIdUsage(*sig.IssuerKeyId, packet.KeyFlagSign)) > 0 {
			chosen = sig
		}
	}
	if first == nil {
		return s, fmt.Errorf("no signature packet: %w", ErrMalformed)
	}
	if chosen == nil {
		s.Key = issuer(first)
		if len(k.openpgp) == 0 {
			return s, fmt.Errorf("key %s: no OpenPGP keys are trusted: %w", s.Key, ErrUnknownKey)
		}
		return s, fmt.Errorf("key %s: %w", s.Key, ErrUnknownKey)
	}
	// Name the trusted key now, so that a bad signature by it says whose.
	known := k.openpgp.KeysByIdUsage(*chosen.IssuerKeyId, packet.KeyFlagSign)[0].Entity
	s.Key = fmt.Sprintf("%X", known.PrimaryKey.Fingerprint)
	if id := known.PrimaryIdentity(); id != nil {
		s.Signer = id.Name
	}
	at := chosen.CreationTime
	cfg := &packet.Config{Time: func() time.Time { return at }}
	_, signer, err := openpgp.VerifyDetachedSignature(k.openpgp, bytes.NewReader(payload), bytes.NewReader(body), cfg)
	if signer != nil {
		s.Key = fmt.Sprintf("%X", signer.PrimaryKey.Fingerprint)
		if id := signer.PrimaryIdentity(); id != nil {
			s.Signer = id.Name
		}
	}
	if (err == nil || errors.Is(err, pgperrors.ErrSignatureExpired)) && signer != nil {
		// go-crypto judges every signature involved at one time, so a
		// binding signature made after this signature (a key whose expiry
		// was extended later) counts as "expired" then, and no signature
		// is ever past its own lifetime at its creation. Those checks come
		// last, after the revocation and key expiry checks passed; redo
		// them as gpg does: each signature's own lifetime, now.
		err = expiredNow(k.openpgp, signer, *chosen.IssuerKeyId, chosen, time.Now())
	}
	if err != nil {
		return s, fmt.Errorf("key %s: %w", s.Key, openPGPError(err, at))
	}
	if signer == nil { // not reached: go-crypto names the signer of a good signature
		return s, fmt.Errorf("key %s: no signer: %w", s.Key, ErrBadSignature)
	}
	s.Verified = true
	return s, nil
}

// expiredNow reports ErrSignatureExpired when the message signature or a
// binding signature of the key that made it has outlived its own lifetime
// at now.
func expiredNow(ring openpgp.EntityList, signer *openpgp.Entity, id uint64, sig *packet.Signature, now time.Time) error {
	sigs := []*packet.Signature{sig}
	if self, _ := signer.PrimarySelfSignature(); self != nil {
		sigs = append(sigs, self)
	}
	for _, key := range ring.KeysByIdUsage(id, packet.KeyFlagSign) {
		if key.Entity != signer || key.PublicKey == signer.PrimaryKey || key.SelfSignature == nil {
			continue
		}
		sigs = append(sigs, key.SelfSignature)
		if key.SelfSignature.EmbeddedSignature != nil {
			sigs = append(sigs, key.SelfSignature.EmbeddedSignature)
		}
		break
	}
	for _, s := range sigs {
		if s.SigLifetimeSecs != nil && *s.SigLifetimeSecs != 0 &&
			now.After(s.CreationTime.Add(time.Duration(*s.SigLifetimeSecs)*time.Second)) {
			return pgperrors.ErrSignatureExpired
		}
	}
	return nil
}

// issuer names the key a signature says made it: the issuer fingerprint
// when the signature carries one (gpg 2.2 and later), else the key id.
func issuer(sig *packet.Signature) string {
	if len(sig.IssuerFingerprint) > 0 {
		return fmt.Sprintf("%X", sig.IssuerFingerprint)
	}
	return fmt.Sprintf("%016X", *sig.IssuerKeyId)
}

// openPGPError maps go-crypto's errors to the package's sentinels.
func openPGPError(err error, at time.Time) error {
	when := at.UTC().Format(time.RFC3339)
	switch {
	case errors.Is(err, pgperrors.ErrKeyExpired):
		return fmt.Errorf("key expired before the signature was made (%s): %w", when, ErrNotValid)
	case errors.Is(err, pgperrors.ErrKeyRevoked):
		return fmt.Errorf("key revoked before the signature was made (%s): %w", when, ErrNotValid)
	case errors.Is(err, pgperrors.ErrSignatureExpired):
		return fmt.Errorf("the signature (made %s) or the key's binding has expired: %w", when, ErrNotValid)
	case errors.Is(err, pgperrors.ErrUnknownIssuer):
		return ErrUnknownKey
	}
	var se pgperrors.SignatureError
	var ia pgperrors.InvalidArgumentError
	var ue pgperrors.UnsupportedError
	switch {
	case errors.As(err, &se), errors.As(err, &ia):
		return fmt.Errorf("%s: %w", strings.TrimPrefix(err.Error(), "openpgp: "), ErrBadSignature)
	case errors.As(err, &ue):
		return fmt.Errorf("%s: %w", strings.TrimPrefix(err.Error(), "openpgp: "), ErrMalformed)
	}
	return fmt.Errorf("%s: %w", strings.TrimPrefix(err.Error(), "openpgp: "), ErrMalformed)
}
