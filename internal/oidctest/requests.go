package oidctest

import (
	"net/url"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// client implements op.Client for a configured Client.
type client struct {
	Client
	opaque         bool
	introspectOnly bool
}

var _ op.Client = (*client)(nil)

func (c *client) GetID() string                    { return c.ID }
func (c *client) RedirectURIs() []string           { return c.Client.RedirectURIs }
func (c *client) PostLogoutRedirectURIs() []string { return c.Client.PostLogoutRedirectURIs }

func (c *client) ApplicationType() op.ApplicationType {
	if c.Public {
		return op.ApplicationTypeNative
	}
	return op.ApplicationTypeWeb
}

func (c *client) AuthMethod() oidc.AuthMethod {
	if c.Public {
		return oidc.AuthMethodNone
	}
	return oidc.AuthMethodBasic
}

func (c *client) ResponseTypes() []oidc.ResponseType {
	if c.introspectOnly {
		return nil
	}
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}

func (c *client) GrantTypes() []oidc.GrantType {
	switch {
	case c.introspectOnly:
		return nil
	case c.Public:
		return []oidc.GrantType{oidc.GrantTypeCode, oidc.GrantTypeDeviceCode}
	default:
		return []oidc.GrantType{oidc.GrantTypeCode, oidc.GrantTypeClientCredentials, oidc.GrantTypeDeviceCode}
	}
}

func (c *client) LoginURL(id string) string { return "/login?authRequestID=" + url.QueryEscape(id) }

func (c *client) AccessTokenType() op.AccessTokenType {
	if c.opaque {
		return op.AccessTokenTypeBearer
	}
	return op.AccessTokenTypeJWT
}

func (c *client) IDTokenLifetime() time.Duration { return time.Hour }

// DevMode lets confidential clients use http loopback redirect URIs.
func (c *client) DevMode() bool { return true }

func (c *client) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}

func (c *client) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}

// IsScopeAllowed grants every scope asked for (skills:read, ...).
func (c *client) IsScopeAllowed(string) bool { return true }

// IDTokenUserinfoClaimsAssertion puts email in the ID token even though an
// access token is issued with it.
func (c *client) IDTokenUserinfoClaimsAssertion() bool { return true }

func (c *client) ClockSkew() time.Duration { return 0 }

// authRequest implements op.AuthRequest.
type authRequest struct {
	id, clientID, redirectURI, state, nonce string
	scopes                                  []string
	responseType                            oidc.ResponseType
	responseMode                            oidc.ResponseMode
	challenge                               *oidc.CodeChallenge
	resources                               []string // RFC 8707, from the authorization request
	created                                 time.Time

	subject  string
	done     bool
	authTime time.Time
}

var _ op.AuthRequest = (*authRequest)(nil)

func (a *authRequest) GetID() string       { return a.id }
func (a *authRequest) GetACR() string      { return "" }
func (a *authRequest) GetAMR() []string    { return []string{"pwd"} }
func (a *authRequest) GetClientID() string { return a.clientID }

// GetAudience is the ID token's audience: the client.
func (a *authRequest) GetAudience() []string                 { return []string{a.clientID} }
func (a *authRequest) GetAuthTime() time.Time                { return a.authTime }
func (a *authRequest) GetCodeChallenge() *oidc.CodeChallenge { return a.challenge }
func (a *authRequest) GetNonce() string                      { return a.nonce }
func (a *authRequest) GetRedirectURI() string                { return a.redirectURI }
func (a *authRequest) GetResponseType() oidc.ResponseType    { return a.responseType }
func (a *authRequest) GetResponseMode() oidc.ResponseMode    { return a.responseMode }
func (a *authRequest) GetScopes() []string                   { return a.scopes }
func (a *authRequest) GetState() string                      { return a.state }
func (a *authRequest) GetSubject() string                    { return a.subject }
func (a *authRequest) Done() bool                            { return a.done }

// accessRequest is an auth request seen by the access token: its audience
// is the resource (RFC 8707), not the client.
type accessRequest struct {
	*authRequest
	audience []string
}

func (a *accessRequest) GetAudience() []string { return a.audience }

// ccRequest is a client-credentials token request.
type ccRequest struct {
	clientID string
	scopes   []string
	audience []string
}

func (r *ccRequest) GetSubject() string    { return r.clientID }
func (r *ccRequest) GetAudience() []string { return r.audience }
func (r *ccRequest) GetScopes() []string   { return r.scopes }
