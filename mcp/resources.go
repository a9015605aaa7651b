package mcp

import (
	"context"
	"strings"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/proof"
)

// resourcesMiddleware answers the resource and prompt lists and resource
// reads from the catalog generation, per caller, instead of the SDK's own
// registry (which holds only the notifier's sentinel).
func (s *Server) resourcesMiddleware(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		switch method {
		case "resources/list":
			p, _ := req.GetParams().(*sdk.ListResourcesParams)
			return s.listResources(ctx, p)
		case "resources/read":
			p, _ := req.GetParams().(*sdk.ReadResourceParams)
			return s.readResource(ctx, req.GetSession(), p)
		case "prompts/list":
			p, _ := req.GetParams().(*sdk.ListPromptsParams)
			return s.listPrompts(ctx, p)
		case "prompts/get":
			p, _ := req.GetParams().(*sdk.GetPromptParams)
			return s.getPrompt(ctx, req.GetSession(), p)
		}
		return next(ctx, method, req)
	}
}

func (s *Server) cacheable(ctx context.Context) sdk.Cacheable {
	return sdk.Cacheable{TTLMs: int(s.cacheTTL().Milliseconds()), CacheScope: s.scope(ctx)}
}

// listResources lists each skill's SKILL.md, named and described from its
// frontmatter, and its proof (git sources), paginated on one generation.
func (s *Server) listResources(ctx context.Context, p *sdk.ListResourcesParams) (*sdk.ListResourcesResult, error) {
	var cursor string
	if p != nil {
		cursor = p.Cursor
	}
	cat, off, err := s.page(cursor)
	if err != nil {
		return nil, rpcError(err, "")
	}
	refs, next := cat.Page(callerFrom(ctx).Filter, off, s.o.PageSize)
	res := &sdk.ListResourcesResult{Resources: make([]*sdk.Resource, 0, len(refs)+len(catalogResources)), Cacheable: s.cacheable(ctx)}
	if off == 0 {
		res.Resources = append(res.Resources, catalogResources...)
	}
	provable := s.provable(ctx, refs)
	for i, r := range refs {
		fm := r.Skill.Frontmatter
		md, _ := r.Skill.File("SKILL.md")
		res.Resources = append(res.Resources, &sdk.Resource{
			URI:         r.URI(),
			Name:        fm.Name,
			Description: fm.Description,
			MIMEType:    "text/markdown",
			Size:        md.Size,
			Meta:        sdk.Meta{MetaProvenance: r.Provenance(provable[i]), MetaUntrusted: true},
		})
		if provable[i] {
			res.Resources = append(res.Resources, proofResource(r))
		}
	}
	if next >= 0 {
		res.NextCursor = cat.Cursor(next).Encode()
	}
	return res, nil
}

// provable says which of a page's skills have a proof resources/read
// serves: a proof over proof.MaxBytes, or one the object store cannot
// build, is not listed (diagnose names those skills, and why). Each
// snapshot's skills of the page are asked about at once.
func (s *Server) provable(ctx context.Context, refs []catalog.Ref) []bool {
	out := make([]bool, len(refs))
	for i := 0; i < len(refs); {
		j := i
		var paths []string
		for ; j < len(refs) && refs[j].Snap == refs[i].Snap; j++ {
			paths = append(paths, refs[j].Skill.Path)
		}
		if s.hasProof(refs[i]) {
			copy(out[i:j], s.o.Proofs.Provable(ctx, refs[i].Snap, paths))
		}
		i = j
	}
	return out
}

// readResource serves one file of a served skill: the bytes whose digest
// the current generation's manifest states, as text when they are UTF-8.
func (s *Server) readResource(ctx context.Context, session sdk.Session, p *sdk.ReadResourceParams) (*readResourceResult, error) {
	if p == nil || p.URI == "" {
		return nil, invalidParams("resources/read needs a uri")
	}
	ss, _ := session.(*sdk.ServerSession)
	var (
		c   *resourceContents
		err error
	)
	if strings.HasPrefix(p.URI, proof.URIPrefix) {
		c, err = s.readProof(ctx, p.URI)
	} else if strings.HasPrefix(p.URI, "skillreg://") {
		var cc *sdk.ResourceContents
		if cc, err = s.readCatalogResource(ctx, p.URI); cc != nil {
			c = (*resourceContents)(cc)
		}
	} else {
		c, err = s.readSkillFile(ctx, p.URI, false)
	}
	if err != nil {
		return nil, rpcError(err, p.URI)
	}
	return &readResourceResult{CacheHints: s.hintsFor(ctx, ss), Contents: []*resourceContents{c}}, nil
}

// readSkillFile reads one file of a skill the caller is served. Errors
// other than the client's are logged unless quiet (the fast path, which
// leaves errors to the SDK's path, which logs them).
func (s *Server) readSkillFile(ctx context.Context, uri string, quiet bool) (*resourceContents, error) {
	f, err := s.o.Catalogs.Current().File(callerFrom(ctx).Filter, uri)
	if err != nil {
		return nil, err
	}
	data, err := s.o.Catalogs.ReadFile(ctx, f)
	if err != nil {
		if !quiet && !isClientError(err) {
			s.log.Error("read skill file", "source", f.Snap.Source, "skill", f.Skill.Path, "file", f.File.Path, "err", err)
		}
		return nil, err
	}
	c := &resourceContents{
		URI:      f.URI,
		MIMEType: mimeType(f.File.Path, data),
		Meta:     sdk.Meta{MetaUntrusted: true},
	}
	if utf8.Valid(data) {
		c.Text = string(data)
	} else {
		c.Blob = data
	}
	return c, nil
}

// readResourceResult is resources/read's result. The SDK's own type keeps
// its resultType unexported and sets it only on results its handler builds,
// so skillreg renders the same shape itself: contents, plus resultType and
// cache CacheHints on 2026-07-28.
type readResourceResult struct {
	sdk.ResultBase
	CacheHints
	// resourceContents, not sdk.ResourceContents: go-sdk v1.8.0 drops an
	// empty text (`text,omitempty`), leaving an empty file's contents
	// without text or blob (contents.go).
	Contents []*resourceContents `json:"contents"`
}

func isClientError(err error) bool {
	return errorsIsAny(err, catalog.ErrNotFound, catalog.ErrBadURI, catalog.ErrChanged)
}
