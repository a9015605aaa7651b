package mcp

import (
	"context"
	"encoding/json"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skillreg/skillreg/registry"
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
type ResourceRef struct {
	URI    string `json:"uri"`
	Digest string `json:"digest"`
	Size   int64  `json:"size"`
}

// EntryMeta is the _meta skillreg attaches to skill content.
type EntryMeta struct {
	Provenance registry.Provenance `json:"dev.skillreg/provenance"`
	Untrusted  bool                `json:"dev.skillreg/untrusted"`
}

// NewEntry renders one skill as its extension entry.
func NewEntry(ref registry.Ref) Entry {
	sk := ref.Skill
	e := Entry{
		URI:         ref.URI(),
		Frontmatter: sk.Frontmatter.JSON,
		Resources:   make([]ResourceRef, len(sk.Files)),
		Meta:        EntryMeta{Provenance: ref.Snap.Provenance(sk), Untrusted: true},
	}
	for i := range sk.Files {
		f := &sk.Files[i]
		e.Resources[i] = ResourceRef{URI: ref.Snap.FileURI(sk, f), Digest: f.Digest, Size: f.Size}
	}
	return e
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

// page resolves a cursor to the generation it belongs to and an offset in
// it; no cursor means the current generation from the start.
func (s *Server) page(cursor string) (*registry.Catalog, int, error) {
	if cursor == "" {
		return s.o.Catalogs.Current(), 0, nil
	}
	c, err := registry.DecodeCursor(cursor)
	if err != nil {
		return nil, 0, err
	}
	cat, ok := s.o.Catalogs.Resume(c)
	if !ok {
		return nil, 0, registry.ErrCatalogMoved
	}
	return cat, c.Offset, nil
}

func (s *Server) listSkills(ctx context.Context, ss *sdk.ServerSession, p *ListSkillsParams) (*ListSkillsResult, error) {
	var cursor string
	if p != nil {
		cursor = p.Cursor
	}
	cat, off, err := s.page(cursor)
	if err != nil {
		return nil, rpcError(err, "")
	}
	refs, next := cat.Page(callerFrom(ctx).Filter, off, s.o.PageSize)
	res := &ListSkillsResult{CacheHints: s.hintsFor(ctx, ss), Skills: make([]Entry, len(refs))}
	for i, r := range refs {
		res.Skills[i] = NewEntry(r)
	}
	if next >= 0 {
		res.NextCursor = cat.Cursor(next).Encode()
	}
	return res, nil
}

func (s *Server) getSkill(ctx context.Context, ss *sdk.ServerSession, p *GetSkillParams) (*GetSkillResult, error) {
	if p == nil || p.URI == "" {
		return nil, invalidParams("skills/get needs a uri")
	}
	ref, err := s.o.Catalogs.Current().Skill(callerFrom(ctx).Filter, p.URI)
	if err != nil {
		return nil, rpcError(err, p.URI)
	}
	return &GetSkillResult{CacheHints: s.hintsFor(ctx, ss), Skill: NewEntry(ref)}, nil
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
		return nil, rpcError(registry.ErrBadCursor, "")
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
