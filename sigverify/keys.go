package sigverify

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
)

// Keys is a set of trusted keys: OpenPGP public keys and SSH allowed
// signers. It is immutable once made, so one value may be shared by every
// sync and reader.
type Keys struct {
	openpgp openpgp.EntityList
	signers []allowedSigner
	id      string
}

// maxKeyFile bounds a key file (a keyring of a few hundred keys).
const maxKeyFile = 16 << 20

// armoredPublicKey is the first line of an armored OpenPGP public key.
var armoredPublicKey = []byte("-----BEGIN PGP PUBLIC KEY BLOCK-----")

// Parse makes Keys from OpenPGP keyrings (each armored or binary, as `gpg
// --export [--armor]` writes them) and an allowed_signers file (nil for
// none). Private keys are refused (give the public key). At least one key
// must be trusted. Errors name the keyring (by position) or the
// allowed_signers line.
func Parse(openpgpKeyrings [][]byte, allowedSigners []byte) (*Keys, error) {
	names := make([]string, len(openpgpKeyrings))
	for i := range names {
		names[i] = fmt.Sprintf("openpgp keyring %d", i+1)
	}
	return parse(names, openpgpKeyrings, "allowed_signers", allowedSigners)
}

// parse is Parse with the names errors give the keyrings and the
// allowed_signers file.
func parse(names []string, keyrings [][]byte, signersName string, allowedSigners []byte) (*Keys, error) {
	k := &Keys{}
	for i, data := range keyrings {
		el, err := parseKeyring(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", names[i], err)
		}
		k.openpgp = append(k.openpgp, el...)
	}
	signers, err := parseAllowedSigners(allowedSigners)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", signersName, err)
	}
	k.signers = signers
	if len(k.openpgp) == 0 && len(k.signers) == 0 {
		return nil, fmt.Errorf("no trusted keys (no OpenPGP key and no allowed signer): %w", ErrMalformed)
	}
	k.id = k.digest()
	return k, nil
}

// parseKeyring reads one armored or binary OpenPGP keyring.
func parseKeyring(data []byte) (openpgp.EntityList, error) {
	if len(data) > maxKeyFile {
		return nil, fmt.Errorf("%d bytes, more than %d: %w", len(data), maxKeyFile, ErrMalformed)
	}
	if isKeybox(data) {
		return nil, errKeybox
	}
	var r io.Reader = bytes.NewReader(data)
	if bytes.Contains(data, armoredPublicKey) {
		var all []byte
		for _, block := range armoredBlocks(data) {
			b, err := armor.Decode(bytes.NewReader(block))
			if err != nil {
				return nil, fmt.Errorf("armor: %v: %w", err, ErrMalformed)
			}
			if b.Type != openpgp.PublicKeyType {
				return nil, fmt.Errorf("armored %q, not a public key block: %w", b.Type, ErrMalformed)
			}
			body, err := io.ReadAll(io.LimitReader(b.Body, maxKeyFile+1))
			if err != nil {
				return nil, fmt.Errorf("armor: %v: %w", err, ErrMalformed)
			}
			all = append(all, body...)
		}
		r = bytes.NewReader(all)
	} else if bytes.Contains(data, []byte("-----BEGIN PGP PRIVATE KEY BLOCK-----")) {
		return nil, fmt.Errorf("a private key: give the public key (gpg --export --armor): %w", ErrMalformed)
	}
	el, err := openpgp.ReadKeyRing(r)
	if err != nil {
		return nil, fmt.Errorf("%v: %w", err, ErrMalformed)
	}
	for _, e := range el {
		if e.PrivateKey != nil {
			return nil, fmt.Errorf("key %X is a private key: give the public key (gpg --export --armor): %w", e.PrimaryKey.Fingerprint, ErrMalformed)
		}
	}
	if len(el) == 0 {
		return nil, fmt.Errorf("no public key: %w", ErrMalformed)
	}
	return el, nil
}

// armoredBlocks returns each "-----BEGIN PGP ...-----" to "-----END PGP
// ...-----" block of data (files made by appending exports hold several).
func armoredBlocks(data []byte) [][]byte {
	var out [][]byte
	for {
		i := bytes.Index(data, []byte("-----BEGIN PGP "))
		if i < 0 {
			return out
		}
		data = data[i:]
		j := bytes.Index(data, []byte("-----END PGP "))
		if j < 0 {
			return append(out, data)
		}
		end := bytes.IndexByte(data[j:], '\n')
		if end < 0 {
			return append(out, data)
		}
		out = append(out, data[:j+end+1])
		data = data[j+end+1:]
	}
}

// LoadFiles reads the OpenPGP keyring files and the allowed_signers file
// ("" for none) and parses them like Parse; errors name the file.
func LoadFiles(openpgpFiles []string, allowedSignersFile string) (*Keys, error) {
	rings := make([][]byte, len(openpgpFiles))
	for i, f := range openpgpFiles {
		data, err := readKeyFile(f)
		if err != nil {
			return nil, err
		}
		rings[i] = data
	}
	var signers []byte
	if allowedSignersFile != "" {
		data, err := readKeyFile(allowedSignersFile)
		if err != nil {
			return nil, err
		}
		signers = data
	}
	return parse(openpgpFiles, rings, allowedSignersFile, signers)
}

// LoadFile reads one key file of either kind, told apart by its content:
// an OpenPGP keyring (armored, or binary) or an allowed_signers file. It is
// what `skillreg pull --verify-keys FILE` takes.
func LoadFile(path string) (*Keys, error) {
	data, err := readKeyFile(path)
	if err != nil {
		return nil, err
	}
	if isOpenPGP(data) || isKeybox(data) {
		return parse([]string{path}, [][]byte{data}, path, nil)
	}
	return parse(nil, nil, path, data)
}

// errKeybox refuses GnuPG's own key database, which is not OpenPGP.
var errKeybox = fmt.Errorf("a GnuPG keybox (pubring.kbx), not a keyring: export the keys with gpg --export --armor: %w", ErrMalformed)

// isKeybox recognises a GnuPG keybox file by its first blob's magic.
func isKeybox(data []byte) bool {
	return len(data) >= 12 && bytes.Equal(data[8:12], []byte("KBXf"))
}

// isOpenPGP tells an OpenPGP keyring from an allowed_signers file: armor,
// or a binary packet (the first byte has its high bit set, which no text
// line of an allowed_signers file starts with).
func isOpenPGP(data []byte) bool {
	return bytes.Contains(data, []byte("-----BEGIN PGP ")) || (len(data) > 0 && data[0]&0x80 != 0)
}

func readKeyFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("key file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	if len(data) > maxKeyFile {
		return nil, fmt.Errorf("key file %s: more than %d bytes: %w", path, maxKeyFile, ErrMalformed)
	}
	return data, nil
}

// ID is a stable digest of the trusted keys ("sha256:" and hex): the same
// keys give the same ID whatever the files' order, comments or layout, and
// any change to a key (a new subkey, an expiry, a revocation) or to an
// allowed signer changes it. A change of ID means "verify again".
// A nil *Keys has the ID "".
func (k *Keys) ID() string {
	if k == nil {
		return ""
	}
	return k.id
}

func (k *Keys) digest() string {
	var parts []string
	for _, e := range k.openpgp {
		var b bytes.Buffer
		if err := e.Serialize(&b); err != nil {
			// A key that parsed but cannot be written back still has a
			// fingerprint; its detail just does not count.
			b.Reset()
			b.Write(e.PrimaryKey.Fingerprint)
		}
		parts = append(parts, "openpgp "+hex.EncodeToString(b.Bytes()))
	}
	for i := range k.signers {
		parts = append(parts, "ssh "+k.signers[i].canonical())
	}
	sort.Strings(parts)
	parts = dedupe(parts)
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s\n", len(p), p)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

func dedupe(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}
