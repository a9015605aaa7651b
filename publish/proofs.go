package publish

import (
	"context"

	"github.com/skillreg/skillreg/catalog"
)

// Proofs says which skills of one git snapshot have a proof that MCP
// serves (the resource skillreg://proof/<source>/<skill-path>, whose URI
// an entry's provenance names); a *registry.Registry is one, as it is
// MCP's.
type Proofs interface {
	Provable(ctx context.Context, snap *catalog.Snapshot, skillPaths []string) []bool
}

// provenances are the provenances of es (entry.provenance), each naming
// its skill's proof only when Options.Proofs says MCP serves it, as MCP's
// own entries do: a client that follows the member is never refused (a
// proof past proof.MaxBytes is not served). Asked apart from the request
// (which may go away), since the documents are kept for the view.
func (h *Handler) provenances(ctx context.Context, es []*entry) []*catalog.Provenance {
	ctx = context.WithoutCancel(ctx)
	out := make([]*catalog.Provenance, len(es))
	for i := 0; i < len(es); {
		snap := es[i].ref.Snap
		j := i
		var paths []string
		for ; j < len(es) && es[j].ref.Snap == snap; j++ {
			paths = append(paths, es[j].ref.Skill.Path)
		}
		var provable []bool
		if h.o.Proofs != nil && snap.Kind == catalog.KindGit && snap.Commit != "" {
			provable = h.o.Proofs.Provable(ctx, snap, paths)
		}
		for k := i; k < j; k++ {
			p := es[k].provenance()
			if k-i >= len(provable) || !provable[k-i] {
				p.Proof = ""
			}
			out[k] = p
		}
		i = j
	}
	return out
}
