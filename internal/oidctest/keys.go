package oidctest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/hex"
	"fmt"
	"sync"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// signingKey is one key pair; it implements op.SigningKey, and publicKey
// op.Key.
type signingKey struct {
	id   string
	alg  jose.SignatureAlgorithm
	priv crypto.Signer
}

func (k *signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return k.alg }
func (k *signingKey) Key() any                                    { return k.priv }
func (k *signingKey) ID() string                                  { return k.id }

type publicKey struct{ k *signingKey }

func (k publicKey) ID() string                         { return k.k.id }
func (k publicKey) Algorithm() jose.SignatureAlgorithm { return k.k.alg }
func (k publicKey) Use() string                        { return "sig" }
func (k publicKey) Key() any                           { return k.k.priv.Public() }

func newSigningKey(alg jose.SignatureAlgorithm) (*signingKey, error) {
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, err
	}
	var (
		priv crypto.Signer
		err  error
	)
	switch alg {
	case jose.RS256, jose.PS256:
		priv, err = rsa.GenerateKey(rand.Reader, 2048)
	case jose.ES256:
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case jose.EdDSA:
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	default:
		return nil, fmt.Errorf("unsupported signing algorithm %q", alg)
	}
	if err != nil {
		return nil, fmt.Errorf("generate %s key: %w", alg, err)
	}
	return &signingKey{id: hex.EncodeToString(id[:]), alg: alg, priv: priv}, nil
}

// keyRing holds the published keys, the current one last.
type keyRing struct {
	mu   sync.Mutex
	alg  jose.SignatureAlgorithm
	keys []*signingKey
}

func newKeyRing(alg jose.SignatureAlgorithm) (*keyRing, error) {
	k, err := newSigningKey(alg)
	if err != nil {
		return nil, err
	}
	return &keyRing{alg: alg, keys: []*signingKey{k}}, nil
}

func (r *keyRing) current() *signingKey {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.keys[len(r.keys)-1]
}

func (r *keyRing) rotate() error {
	k, err := newSigningKey(r.alg)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.keys = append(r.keys, k)
	r.mu.Unlock()
	return nil
}

func (r *keyRing) retireOld() {
	r.mu.Lock()
	r.keys = r.keys[len(r.keys)-1:]
	r.mu.Unlock()
}

func (r *keyRing) published() []op.Key {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]op.Key, len(r.keys))
	for i, k := range r.keys {
		out[i] = publicKey{k}
	}
	return out
}

func (r *keyRing) publishedIDs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, len(r.keys))
	for i, k := range r.keys {
		out[i] = k.id
	}
	return out
}
