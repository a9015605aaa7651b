package pull

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skillreg/skillreg/proof"
	"github.com/skillreg/skillreg/sigverify"
)

// ErrKeysRequired ends a run without keys (Options.Keys) that would
// install a skill skills.lock records as verified: such a skill is
// installed again, by Pull, Update or Locked, only verified.
var ErrKeysRequired = errors.New("skills.lock records verified skills; pass the keys to verify them with")

// Verified is what a skill's proof proved, as skills.lock records it: the
// commit (and tag) the files are from, whose signature verified, and the
// key and signer that made it (from the client's own keys). Keys are in
// sorted order, like the rest of the lock.
type Verified struct {
	Commit string `json:"commit"`
	Key    string `json:"key"`
	// Object is the object whose signature verified: "commit", or "tag"
	// when only the annotated tag's did.
	Object string `json:"object"`
	Signer string `json:"signer,omitempty"`
	Tag    string `json:"tag,omitempty"`
	Type   string `json:"type"` // "openpgp" or "ssh"
}

func (v *Verified) equal(w *Verified) bool {
	if v == nil || w == nil {
		return v == w
	}
	return *v == *w
}

// String is one line for a person: what was verified, by whom.
func (v *Verified) String() string {
	s := "commit " + v.Commit
	if v.Object == string(sigverify.Tag) {
		s = "tag " + v.Tag + " of " + s
	}
	s += " signed with " + v.Type + " key " + v.Key
	if v.Signer != "" {
		s += " by " + clip(v.Signer)
	}
	return s
}

// proofURI is the proof resource an entry's provenance names, or "".
func proofURI(e Entry) string {
	raw, ok := e.Meta[MetaProvenance]
	if !ok {
		return ""
	}
	var p struct {
		Proof string `json:"proof"`
	}
	if json.Unmarshal(raw, &p) != nil {
		return ""
	}
	return p.Proof
}

// prove reads the proof the entry's provenance names and checks it against
// the skill's verified files and c.o.Keys (see proof.Check), then checks
// that the proof is the entry's (the skill its URI names, the commit and
// path its provenance names: rule 6).
func (c *Client) prove(ctx context.Context, m *manifest, s *Skill) (*Verified, error) {
	skillURI := m.entry.URI
	uri := proofURI(m.entry)
	if uri == "" {
		return nil, refuse(skillURI, "", CheckNoProof, "the entry's provenance names no proof; --verify-keys installs only skills whose bytes a proof ties to a signed commit")
	}
	if len(uri) > maxURILen || strings.ContainsFunc(uri, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return nil, refuse(skillURI, "", CheckProof, "the proof URI %s is not a URI", clip(uri))
	}
	source, skillPath, err := proof.ParseURI(uri)
	if err != nil {
		return nil, refuse(skillURI, uri, CheckProof, "%s", clipN(err.Error(), maxDetail))
	}
	if source != m.loc.segs[0] || skillPath != strings.Join(m.loc.segs[1:], "/") {
		return nil, refuse(skillURI, uri, CheckProof, "the proof URI names another skill")
	}
	data, err := c.readProof(ctx, skillURI, uri)
	if err != nil {
		return nil, err
	}
	files := make(map[string][]byte, len(s.Files))
	for _, f := range s.Files {
		files[f.Path] = f.Data
	}
	res, err := proof.Check(data, files, c.o.Keys)
	if err != nil {
		check := CheckProof
		if errors.Is(err, proof.ErrSignature) {
			check = CheckSignature
		}
		return nil, refuse(skillURI, uri, check, "%s", clipN(err.Error(), maxDetail))
	}
	if res.Source != source || res.Skill != skillPath {
		return nil, refuse(skillURI, uri, CheckProof, "the proof is for skill %q of source %q", clip(res.Skill), clip(res.Source))
	}
	// Rule 6: what the lock and the user are told is what was proven.
	p := s.Provenance
	switch {
	case p == nil || p.Commit == "":
		return nil, refuse(skillURI, uri, CheckProof, "the entry's provenance names no commit")
	case p.Commit != res.Commit:
		return nil, refuse(skillURI, uri, CheckProof, "the proof is for commit %s, the entry's provenance says %s", res.Commit, p.Commit)
	case p.Path != res.Path:
		return nil, refuse(skillURI, uri, CheckProof, "the proof is for directory %q, the entry's provenance says %q", clip(res.Path), clip(p.Path))
	}
	v := &Verified{
		Commit: res.Commit, Object: string(res.Signed),
		Key: res.Signature.Key, Signer: res.Signature.Signer, Type: res.Signature.Type,
	}
	if res.Signed == sigverify.Tag {
		v.Tag = res.Tag
	}
	return v, nil
}

// maxProofResponse bounds the response that carries a proof: a proof of
// proof.MaxBytes as a JSON string (text) or base64 (blob), with room for
// the envelope. A proof is JSON of base64 and a few short names, so its
// escaping as a string at most doubles it; base64 adds a third.
const maxProofResponse = 2*proof.MaxBytes + 64<<10

// readProof reads a proof resource: one content item for its URI, at most
// proof.MaxBytes. The response is read to at most maxProofResponse bytes,
// not ClientOptions.MaxResponseBytes: a larger one ends the run with
// ErrResponseTooLarge, like any response over its bound.
func (c *Client) readProof(ctx context.Context, skillURI, uri string) ([]byte, error) {
	res, err := c.cs.ReadResource(withResponseLimit(ctx, maxProofResponse), &sdk.ReadResourceParams{URI: uri})
	if err != nil {
		var we *jsonrpc.Error
		switch {
		case c.tr.broken() != nil:
			return nil, c.callError("resources/read", err)
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			return nil, fmt.Errorf("resources/read: %w", err)
		case errors.As(err, &we):
			return nil, refuse(skillURI, uri, CheckNoProof, "the server did not serve the proof its entry names: %s (%d)", clip(we.Message), we.Code)
		case connectionFailed(err):
			return nil, fmt.Errorf("resources/read: %w: %v", ErrUnreachable, err)
		}
		return nil, refuse(skillURI, uri, CheckProof, "unreadable result: %s", clip(err.Error()))
	}
	if len(res.Contents) != 1 || res.Contents[0] == nil || res.Contents[0].URI != uri {
		return nil, refuse(skillURI, uri, CheckProof, "the read of the proof returned %d content items, not the proof alone", len(res.Contents))
	}
	ct := res.Contents[0]
	data := ct.Blob
	if data == nil {
		data = []byte(ct.Text)
	} else if ct.Text != "" {
		return nil, refuse(skillURI, uri, CheckProof, "the proof's content has both text and blob")
	}
	if len(data) > proof.MaxBytes {
		return nil, refuse(skillURI, uri, CheckProof, "the proof is %d bytes, more than the %d allowed", len(data), proof.MaxBytes)
	}
	return data, nil
}

// againstLockVerified compares what a locked run proved with what the lock
// records: the same commit and tag, signed with the same key.
func againstLockVerified(t LockedSkill, got *Verified) error {
	want := t.Verified
	if want == nil || got == nil {
		return nil
	}
	if got.Commit != want.Commit || got.Tag != want.Tag || got.Key != want.Key || got.Object != want.Object {
		return refuse(t.URI, "", CheckLock, "verified %s; %s records %s", got, LockFile, want)
	}
	return nil
}
