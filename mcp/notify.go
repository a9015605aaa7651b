package mcp

import (
	"context"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// notifier sends list-changed notifications for lists the SDK does not
// hold. The SDK offers no public call to send them; it sends them itself
// (debounced, to 2025-11-25 sessions and to 2026-07-28 subscribers) when
// its own registry of resources or prompts changes. skillreg answers
// resources/list and prompts/list itself (per caller and per generation),
// so it toggles a sentinel entry in the SDK's registry, which no client
// ever sees, to make the SDK announce a change.
type notifier struct {
	srv *sdk.Server

	mu       sync.Mutex
	resOn    bool
	promptOn bool
}

const (
	sentinelURI    = "skillreg://internal/generation"
	sentinelPrompt = "skillreg-internal-generation"
)

func (n *notifier) resourcesChanged() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.resOn {
		n.srv.RemoveResources(sentinelURI)
	} else {
		n.srv.AddResource(&sdk.Resource{URI: sentinelURI, Name: "generation"}, func(context.Context, *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
			return nil, sdk.ResourceNotFoundError(sentinelURI)
		})
	}
	n.resOn = !n.resOn
}

func (n *notifier) promptsChanged() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.promptOn {
		n.srv.RemovePrompts(sentinelPrompt)
	} else {
		n.srv.AddPrompt(&sdk.Prompt{Name: sentinelPrompt}, func(context.Context, *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
			return nil, errNotFoundPrompt
		})
	}
	n.promptOn = !n.promptOn
}
