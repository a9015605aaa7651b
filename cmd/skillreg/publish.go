package main

import (
	"context"
	"net/http"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/config"
	"github.com/skillreg/skillreg/gitmirror"
	"github.com/skillreg/skillreg/mcp"
	"github.com/skillreg/skillreg/publish"
	"github.com/skillreg/skillreg/web"
)

// setupPublish builds the installers' endpoints (discovery index,
// marketplace, archives) over the registry, with the access rules of /mcp.
func (d *Daemon) setupPublish(cfg *config.Config) error {
	publicURL := cfg.PublicURL
	var digests publish.ArchiveDigests
	if d.store != nil {
		digests = d.store // the first view after a restart takes the archives' digests from it
	}
	p, err := publish.New(publish.Options{
		Catalog:    d.Registry.Live(), // its ReadFileCold keeps digests out of the content cache
		Gate:       d.currentGate,
		Public:     d.currentPublic,
		RemoteAddr: remoteHost,
		BaseURL: func(r *http.Request) string {
			return publish.RequestBaseURL(r, publicURL, d.hostAllowed)
		},
		MarketplaceName:  cfg.Marketplace.Name,
		MarketplaceOwner: cfg.Marketplace.Owner,
		CacheBytes:       cfg.Cache.ArtifactBytes,
		Digests:          digests,
		Proofs:           d.Registry, // the entries name the proofs MCP serves
		Logger:           d.core.log,
	})
	if err != nil {
		return err
	}
	d.publish = p
	return nil
}

// setupMirror builds the read-only git mirror of every source, its
// history kept in the store when there is one.
func (d *Daemon) setupMirror() error {
	o := gitmirror.Options{Catalog: d.Registry, Logger: d.core.log}
	if d.store != nil {
		o.History = d.store
	}
	m, err := gitmirror.New(o)
	if err != nil {
		return err
	}
	d.mirror = m
	return nil
}

// unpublishedMCP is what the installers' indexes leave out, for diagnose.
func (d *Daemon) unpublishedMCP(ctx context.Context, f catalog.Filter, source string) []mcp.Unpublished {
	if d.publish == nil {
		return nil
	}
	var out []mcp.Unpublished
	for _, n := range d.publish.Notes(ctx, f, source) {
		out = append(out, mcp.Unpublished(n))
	}
	return out
}

// unpublishedWeb is the same for the sources page.
func (d *Daemon) unpublishedWeb(ctx context.Context, f catalog.Filter, source string) []web.Unpublished {
	if d.publish == nil {
		return nil
	}
	var out []web.Unpublished
	for _, n := range d.publish.Notes(ctx, f, source) {
		out = append(out, web.Unpublished(n))
	}
	return out
}
