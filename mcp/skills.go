package mcp

import (
	"context"
	"encoding/json"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/mcp/fastpath"
)

// Keys skillreg uses in _meta.
const (
	MetaProvenance = "dev.skillreg/provenance"
	MetaUntrusted  = "dev.skillreg/untrusted"
)

// Entry is a Skills extension skill entry.
type Entry struct {
	URI         string          `json:"uri"`
	Frontmatter json.RawMessage `json:"frontmatter"`
	Resources   []ResourceRef   `json:"resources"`
	Meta        EntryMeta       `json:"_meta"`
}

// ResourceRef is one file of an entry's manifest.
type ResourceRef = catalog.ManifestFile

// EntryMeta is the _meta skillreg attaches to skill content.
type EntryMeta struct {
	Provenance catalog.Provenance `json:"dev.skillreg/provenance"`
	Untrusted  bool               `json:"dev.skillreg/untrusted"`
}

// NewEntry renders one skill as its extension entry. Its provenance
// names the skill's proof only when provable: when resources/read serves
// that proof (Proofs.Provable), as resources/list lists it.
func NewEntry(ref catalog.Ref, provable bool) Entry {
	return Entry{
		URI:         ref.URI(),
		Frontmatter: ref.Skill.Frontmatter.JSON,
		Resources:   ref.Manifest(),
		Meta:        EntryMeta{Provenance: ref.Provenance(provable), Untrusted: true},
	}
}

// provenanceOf is one skill's provenance as provenance shows it.
func (s *Server) provenanceOf(ctx context.Context, ref catalog.Ref) catalog.Provenance {
	return ref.Provenance(s.provable(ctx, []catalog.Ref{ref})[0])
}

// wireEntry is what skills/list and skills/get put on the wire for ref:
// with the fast path on, its rendered entry (fastpath.WireEntry: the same
// bytes, written without re-scanning the frontmatter); with it off, the
// Entry the SDK marshals.
func (s *Server) wireEntry(ref catalog.Ref, provable bool) any {
	if s.fast != nil {
		return fastpath.Wire(ref, provable)
	}
	return NewEntry(ref, provable)
}

// Warm renders cat's skills/list pages into the fast path's page cache
// (fastpath.Handler.Warm), so a listing right after a restart does not
// pay for them; a no-op with the fast path off.
func (s *Server) Warm(cat *catalog.Catalog) {
	if s.fast != nil {
		s.fast.Warm(cat)
	}
}

// ListSkillsParams are the params of skills/list.
type ListSkillsParams struct {
	sdk.ParamsBase
	Cursor string `json:"cursor,omitempty"`
}

// ListSkillsResult is the result of skills/list.
type ListSkillsResult struct {
	sdk.ResultBase
	CacheHints
	Skills     []Entry `json:"skills"`
	NextCursor string  `json:"nextCursor,omitempty"`
}

// listSkillsWire is ListSkillsResult as the server writes it: Skills is
// a []fastpath.WireEntry or a []Entry (see wireEntry); a test holds the
// two to the same bytes.
type listSkillsWire struct {
	sdk.ResultBase
	CacheHints
	Skills     any    `json:"skills"`
	NextCursor string `json:"nextCursor,omitempty"`
}

// GetSkillParams are the params of skills/get.
type GetSkillParams struct {
	sdk.ParamsBase
	URI string `json:"uri"`
}

// GetSkillResult is the result of skills/get.
type GetSkillResult struct {
	sdk.ResultBase
	CacheHints
	Skill Entry `json:"skill"`
}

// getSkillWire is GetSkillResult as the server writes it (Skill as
// wireEntry returns it).
type getSkillWire struct {
	sdk.ResultBase
	CacheHints
	Skill any `json:"skill"`
}

// page resolves a cursor to the generation it belongs to and an offset in
// it; no cursor means the current generation from the start.
func (s *Server) page(cursor string) (*catalog.Catalog, int, error) {
	if cursor == "" {
		return s.o.Catalogs.Current(), 0, nil
	}
	c, err := catalog.DecodeCursor(cursor)
	if err != nil {
		return nil, 0, err
	}
	cat, ok := s.o.Catalogs.Resume(c)
	if !ok {
		return nil, 0, catalog.ErrCatalogMoved
	}
	return cat, c.Offset, nil
}

func (s *Server) listSkills(ctx context.Context, ss *sdk.ServerSession, p *ListSkillsParams) (*listSkillsWire, error) {
	var cursor string
	if p != nil {
		cursor = p.Cursor
	}
	cat, off, err := s.page(cursor)
	if err != nil {
		return nil, rpcError(err, "")
	}
	refs, next := cat.Page(callerFrom(ctx).Filter, off, s.o.PageSize)
	res := &listSkillsWire{CacheHints: s.hintsFor(ctx, ss)}
	provable := s.provable(ctx, refs)
	if s.fast != nil {
		skills := make([]fastpath.WireEntry, len(refs))
		for i, r := range refs {
			skills[i] = fastpath.Wire(r, provable[i])
		}
		res.Skills = skills
	} else {
		skills := make([]Entry, len(refs))
		for i, r := range refs {
			skills[i] = NewEntry(r, provable[i])
		}
		res.Skills = skills
	}
	if next >= 0 {
		res.NextCursor = cat.Cursor(next).Encode()
	}
	return res, nil
}

func (s *Server) getSkill(ctx context.Context, ss *sdk.ServerSession, p *GetSkillParams) (*getSkillWire, error) {
	if p == nil || p.URI == "" {
		return nil, invalidParams("skills/get needs a uri")
	}
	ref, err := s.o.Catalogs.Current().Skill(callerFrom(ctx).Filter, p.URI)
	if err != nil {
		return nil, rpcError(err, p.URI)
	}
	return &getSkillWire{CacheHints: s.hintsFor(ctx, ss), Skill: s.wireEntry(ref, s.provable(ctx, []catalog.Ref{ref})[0])}, nil
}

// ReadDirectoryParams are the params of resources/directory/read.
type ReadDirectoryParams struct {
	sdk.ParamsBase
	URI    string `json:"uri"`
	Cursor string `json:"cursor,omitempty"`
}

// DirResource is one child in a directory listing.
type DirResource struct {
	URI      string `json:"uri"`
	Name     string `json:"name"`
	MIMEType string `json:"mimeType"`
	Size     *int64 `json:"size,omitempty"`
}

// ReadDirectoryResult is the result of resources/directory/read.
type ReadDirectoryResult struct {
	sdk.ResultBase
	CacheHints
	Resources  []DirResource `json:"resources"`
	NextCursor string        `json:"nextCursor,omitempty"`
}

func (s *Server) readDirectory(ctx context.Context, ss *sdk.ServerSession, p *ReadDirectoryParams) (*ReadDirectoryResult, error) {
	if p == nil || p.URI == "" {
		return nil, invalidParams("resources/directory/read needs a uri")
	}
	cat, off, err := s.page(p.Cursor)
	if err != nil {
		return nil, rpcError(err, p.URI)
	}
	children, err := cat.Dir(callerFrom(ctx).Filter, p.URI)
	if err != nil {
		return nil, rpcError(err, p.URI)
	}
	res := &ReadDirectoryResult{CacheHints: s.hintsFor(ctx, ss), Resources: []DirResource{}}
	if off > len(children) {
		return nil, rpcError(catalog.ErrBadCursor, "")
	}
	end := min(off+s.o.PageSize, len(children))
	for _, c := range children[off:end] {
		d := DirResource{URI: c.URI, Name: c.Name, MIMEType: "inode/directory"}
		if c.File != nil {
			d.MIMEType = mimeType(c.Name, nil)
			size := c.File.Size
			d.Size = &size
		}
		res.Resources = append(res.Resources, d)
	}
	if end < len(children) {
		res.NextCursor = cat.Cursor(end).Encode()
	}
	return res, nil
}
