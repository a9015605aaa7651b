package main

import (
	"context"
	"strings"

	"github.com/skillreg/skillreg/oidc"
	"github.com/skillreg/skillreg/web"
)

// webSignIn is the web catalog's sign-in with the provider in the running
// configuration, or nil: without oidc, or without oidc.client_id (the
// catalog then asks for a client token, as without oidc). Made per
// request from the running runtime, so a reload takes effect at once.
func (d *Daemon) webSignIn() *web.SignIn {
	rt := d.running()
	o := rt.cfg.OIDC
	if o == nil || o.ClientID == "" || rt.oidc == nil {
		return nil
	}
	base := strings.TrimRight(rt.cfg.PublicURL, "/")
	gate := rt.gate
	return &web.SignIn{
		Provider:              rt.oidc.verifier,
		ClientID:              o.ClientID,
		ClientSecret:          rt.oidc.clientSecret,
		RedirectURL:           base + "/login/callback",
		PostLogoutRedirectURL: base + "/logout",
		Resolve: func(c oidc.Claims) (web.Viewer, bool) {
			id := gate.FromClaims(c)
			// Someone no rule lets see anything, on a catalog with no
			// public source, would get an empty catalog: say so instead.
			none := id.Filter.Only != nil && len(id.Filter.Only) == 0
			return web.Viewer{Name: id.Name, Filter: id.Filter}, !none || len(rt.public) > 0
		},
	}
}

// webAuthenticate checks a token pasted on the sign-in page: the gate's
// clients (and, were the page shown with oidc, a provider token).
func (d *Daemon) webAuthenticate(ctx context.Context, tok string) (web.Viewer, bool) {
	id, err := d.currentGate().Authenticate(ctx, tok)
	return web.Viewer{Name: id.Name, Filter: id.Filter}, err == nil
}

// loggedURI is a request URI as the request log shows it: the web
// sign-in's callback without its query, which carries the provider's
// authorization code (a credential, if a short-lived one).
func loggedURI(uri string) string {
	if path, _, ok := strings.Cut(uri, "?"); ok && path == "/login/callback" {
		return path + "?…"
	}
	return uri
}
