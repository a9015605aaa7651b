package mcp

import (
	"context"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skillreg/skillreg/releases"
)

// Releases answers latest-release lookups without blocking in the steady
// state (the releases package's Client).
type Releases interface {
	Get(ctx context.Context, repo string, maxAge time.Duration) releases.Release
}

// SkillMetaTool is one configured skill-meta tool (the AgentKey Skill-Meta
// Protocol v1, one tool per skill).
type SkillMetaTool struct {
	Meta     releases.SkillMeta
	Releases Releases
}

// emptyInput is a tool input that takes no parameters ({} is valid).
type emptyInput struct{}

// addSkillMeta registers one skill-meta tool: no required parameters,
// read-only and idempotent, answering the protocol's SkillMetaResponse as
// structured content (and as JSON text for older clients). It never fails:
// every failure of the release lookup yields a valid answer with an empty
// skill_version_latest.
func (s *Server) addSkillMeta(t SkillMetaTool) {
	meta := t.Meta.WithDefaults()
	tool := &sdk.Tool{
		Name:        meta.Tool,
		Title:       meta.Skill + " skill metadata",
		Description: releases.Description(meta.Skill),
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)},
	}
	sdk.AddTool(s.sdk, tool, func(ctx context.Context, req *sdk.CallToolRequest, _ emptyInput) (*sdk.CallToolResult, releases.Response, error) {
		rel := t.Releases.Get(ctx, meta.Repo, meta.CacheTTL)
		return nil, releases.BuildResponse(meta, rel, ClientName(req.Session)), nil
	})
}

func ptr[T any](v T) *T { return &v }
