package sigverify

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/hiddeco/sshsig"
	"golang.org/x/crypto/ssh"
)

// verifySSH checks an armored SSH signature (ssh-keygen -Y sign) over
// payload, then that an allowed signer lists its key for namespace "git"
// at the object's committer (tagger) time: what git does with ssh-keygen
// -Y find-principals and -Y verify, -Overify-time.
func (k *Keys) verifySSH(kind Kind, raw, payload, armored []byte) (Signature, error) {
	s := Signature{Type: TypeSSH}
	sig, err := sshsig.Unarmor(armored)
	if err != nil {
		return s, fmt.Errorf("%v: %w", err, ErrMalformed)
	}
	s.Key = ssh.FingerprintSHA256(sig.PublicKey)
	if err := sig.HashAlgorithm.Available(); err != nil {
		return s, fmt.Errorf("key %s: %v: %w", s.Key, err, ErrMalformed)
	}
	keyBytes := sig.PublicKey.Marshal()
	var listed []*allowedSigner
	for i := range k.signers {
		if bytes.Equal(k.signers[i].keyBytes, keyBytes) {
			listed = append(listed, &k.signers[i])
		}
	}
	if len(listed) > 0 {
		// Named now, so that a bad signature by a listed key says whose.
		s.Signer = listed[0].principals
	}
	if err := sshsig.Verify(bytes.NewReader(payload), sig, sig.PublicKey, sig.HashAlgorithm, Namespace); err != nil {
		if errors.Is(err, sshsig.ErrNamespaceMismatch) {
			return s, fmt.Errorf("key %s: signed for namespace %q, not %q: %w", s.Key, sig.Namespace, Namespace, ErrBadSignature)
		}
		return s, fmt.Errorf("key %s: %v: %w", s.Key, err, ErrBadSignature)
	}
	at, terr := SignedAt(kind, raw)
	var refusals []string
	for _, a := range listed {
		if err := a.allows(Namespace, at, terr == nil); err != nil {
			refusals = append(refusals, err.Error())
			continue
		}
		s.Signer = a.principals
		s.Verified = true
		return s, nil
	}
	if len(refusals) > 0 {
		return s, fmt.Errorf("key %s: %s: %w", s.Key, strings.Join(refusals, "; "), ErrNotValid)
	}
	if len(k.signers) == 0 {
		return s, fmt.Errorf("key %s: no allowed signers are trusted: %w", s.Key, ErrUnknownKey)
	}
	return s, fmt.Errorf("key %s: no allowed signer: %w", s.Key, ErrUnknownKey)
}
