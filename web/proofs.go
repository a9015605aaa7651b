package web

import (
	"context"

	"github.com/skillreg/skillreg/catalog"
)

// Proofs says which skills of one git snapshot have a proof that MCP
// serves (the resource skillreg://proof/<source>/<skill-path>, which a
// skill page names); a *registry.Registry is one, as it is MCP's.
type Proofs interface {
	Provable(ctx context.Context, snap *catalog.Snapshot, skillPaths []string) []bool
}

// provenance is ref's provenance as its page shows it: its proof named
// only when Options.Proofs says MCP serves it, as MCP's entries do, so a
// reader who asks for it is never refused (a proof past proof.MaxBytes
// is not served).
func (h *Handler) provenance(ctx context.Context, ref catalog.Ref) catalog.Provenance {
	p := ref.Snap.Provenance(ref.Skill)
	if p.Proof != "" && (h.o.Proofs == nil || !h.o.Proofs.Provable(ctx, ref.Snap, []string{ref.Skill.Path})[0]) {
		p.Proof = ""
	}
	return p
}
