package mcp

import (
	"context"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skillreg/skillreg/catalog"
)

// promptNames names each skill the caller sees as a prompt: its name, or
// <source>-<name> when two visible skills share a name, or
// <source>-<path> when even that clashes (nested skills of one source).
func promptNames(refs []catalog.Ref) []string {
	count := map[string]int{}
	for _, r := range refs {
		count[r.Skill.Name()]++
	}
	names := make([]string, len(refs))
	second := map[string]int{}
	for i, r := range refs {
		n := r.Skill.Name()
		if count[n] > 1 {
			n = r.Snap.Source + "-" + n
		}
		names[i] = n
		second[n]++
	}
	for i, r := range refs {
		if second[names[i]] > 1 {
			names[i] = r.Snap.Source + "-" + strings.ReplaceAll(r.Skill.Path, "/", "-")
		}
	}
	return names
}

func (s *Server) listPrompts(ctx context.Context, p *sdk.ListPromptsParams) (*sdk.ListPromptsResult, error) {
	var cursor string
	if p != nil {
		cursor = p.Cursor
	}
	cat, off, err := s.page(cursor)
	if err != nil {
		return nil, rpcError(err, "")
	}
	refs := cat.All(callerFrom(ctx).Filter)
	names := promptNames(refs)
	if off > len(refs) {
		return nil, rpcError(catalog.ErrBadCursor, "")
	}
	end := min(off+s.o.PageSize, len(refs))
	res := &sdk.ListPromptsResult{Prompts: make([]*sdk.Prompt, 0, end-off), Cacheable: s.cacheable(ctx)}
	provable := s.provable(ctx, refs[off:end])
	for i := off; i < end; i++ {
		fm := refs[i].Skill.Frontmatter
		res.Prompts = append(res.Prompts, &sdk.Prompt{
			Name:        names[i],
			Title:       fm.Name,
			Description: fm.Description,
			Arguments:   []*sdk.PromptArgument{{Name: "task", Description: "what you want done with this skill (optional)"}},
			Meta:        sdk.Meta{MetaProvenance: refs[i].Provenance(provable[i-off]), MetaUntrusted: true},
		})
	}
	if end < len(refs) {
		res.NextCursor = cat.Cursor(end).Encode()
	}
	return res, nil
}

// getPrompt answers a skill's prompt: a user message carrying the SKILL.md
// as an embedded resource (with its URI, so a host can check it against
// the manifest), then the task when one is given. The result is our
// promptResult, not sdk.GetPromptResult: go-sdk v1.8.0's embedded
// resource drops an empty text (`text,omitempty`; contents.go).
func (s *Server) getPrompt(ctx context.Context, ss sdk.Session, p *sdk.GetPromptParams) (*promptResult, error) {
	if p == nil || p.Name == "" || len(p.Name) > MaxPathBytes {
		return nil, invalidParams("prompts/get needs the name of a listed prompt")
	}
	refs := s.o.Catalogs.Current().All(callerFrom(ctx).Filter)
	names := promptNames(refs)
	for i, n := range names {
		if n != p.Name {
			continue
		}
		r := refs[i]
		md, _ := r.Skill.File("SKILL.md")
		fr := catalog.FileRef{Ref: r, File: md, URI: r.URI()}
		data, err := s.o.Catalogs.ReadFile(ctx, fr)
		if err != nil {
			return nil, rpcError(err, fr.URI)
		}
		msgs := []promptMessage{{
			Role: "user",
			Content: &embeddedResource{Type: "resource", Resource: &resourceContents{
				URI: fr.URI, MIMEType: "text/markdown", Text: string(data),
				Meta: sdk.Meta{MetaUntrusted: true},
			}},
		}}
		if task := strings.TrimSpace(p.Arguments["task"]); task != "" {
			msgs = append(msgs, promptMessage{Role: "user", Content: &sdk.TextContent{Text: task}})
		}
		res := &promptResult{
			ResultBase:  sdk.ResultBase{Meta: sdk.Meta{MetaProvenance: s.provenanceOf(ctx, r), MetaUntrusted: true}},
			Description: r.Skill.Frontmatter.Description,
			Messages:    msgs,
		}
		if ss, _ := ss.(*sdk.ServerSession); modern(ss) {
			res.ResultType = "complete" // as the SDK sets it on its own type
		}
		return res, nil
	}
	return nil, errNotFoundPrompt
}

// promptsDiffer reports whether two generations show different prompts
// (names or descriptions), so a swap that changed only file contents does
// not announce a prompt change.
func promptsDiffer(old, new *catalog.Catalog) bool {
	a, b := old.All(catalog.Filter{}), new.All(catalog.Filter{})
	if len(a) != len(b) {
		return true
	}
	for i := range a {
		if a[i].URI() != b[i].URI() || a[i].Skill.Frontmatter.Description != b[i].Skill.Frontmatter.Description {
			return true
		}
	}
	return false
}
