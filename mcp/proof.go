package mcp

import (
	"context"
	"errors"
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/proof"
)

// Proofs builds skill proofs (package proof), served as the resources
// skillreg://proof/<source>/<skill-path>; a *registry.Registry is one.
// Proof's errors: catalog.ErrNotFound for a skill without a proof (not
// served, or from a directory source), proof.ErrTooLarge above
// proof.MaxBytes. Provable says, for skills of one snapshot, which have
// a proof Proof would serve (without building them): resources/list
// lists only those.
type Proofs interface {
	Proof(ctx context.Context, source, skillPath string) ([]byte, error)
	Provable(ctx context.Context, snap *catalog.Snapshot, skillPaths []string) []bool
}

// hasProof reports whether a skill's entries point at a proof: git
// sources' skills, when proofs are served at all.
func (s *Server) hasProof(r catalog.Ref) bool {
	return s.o.Proofs != nil && r.Snap.Kind == catalog.KindGit && r.Snap.Commit != ""
}

// proofResource is resources/list's entry of a skill's proof.
func proofResource(r catalog.Ref) *sdk.Resource {
	name := r.Skill.Frontmatter.Name
	return &sdk.Resource{
		URI:         proof.URI(r.Snap.Source, r.Skill.Path),
		Name:        name + ".proof.json",
		Title:       "Proof of " + name,
		Description: "The signed commit and the git trees that prove " + name + "'s files, for a client to check against its own keys.",
		MIMEType:    proof.MediaType,
	}
}

// readProof serves one skill's proof, if the caller may see its source.
func (s *Server) readProof(ctx context.Context, uri string) (*resourceContents, error) {
	source, skillPath, err := proof.ParseURI(uri)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", catalog.ErrBadURI, err)
	}
	if s.o.Proofs == nil || !callerFrom(ctx).Filter.Allows(source) {
		return nil, fmt.Errorf("%s: %w", uri, catalog.ErrNotFound)
	}
	b, err := s.o.Proofs.Proof(ctx, source, skillPath)
	if err != nil {
		if !isClientError(err) && !errors.Is(err, proof.ErrTooLarge) {
			s.log.Error("build proof", "source", source, "skill", skillPath, "err", err)
		}
		return nil, err
	}
	return &resourceContents{URI: uri, MIMEType: proof.MediaType, Text: string(b), Meta: sdk.Meta{MetaUntrusted: true}}, nil
}

// Unproven is a served skill without a proof, and why.
type Unproven struct {
	Source string `json:"source"`
	Path   string `json:"path"`
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// unproven is diagnose's list of skills without a proof the caller may see.
func (s *Server) unproven(ctx context.Context, f catalog.Filter, source string) []Unproven {
	if s.o.Unproven == nil || s.o.Proofs == nil {
		return nil
	}
	var out []Unproven
	for _, u := range s.o.Unproven(ctx, source) {
		if f.Allows(u.Source) {
			out = append(out, u)
		}
	}
	return out
}
