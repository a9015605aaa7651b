package main

import (
	"context"

	"github.com/skillreg/skillreg/mcp"
)

// unprovenMCP is diagnose's list of served skills without a proof
// (registry.Unproven in the MCP surface's shape).
func (d *Daemon) unprovenMCP(ctx context.Context, source string) []mcp.Unproven {
	us := d.Registry.Unproven(ctx, source)
	out := make([]mcp.Unproven, len(us))
	for i, u := range us {
		out[i] = mcp.Unproven(u)
	}
	return out
}
