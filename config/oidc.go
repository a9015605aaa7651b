package config

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
)

// OIDC configures the organisation's OpenID Connect provider: skillreg
// accepts its access tokens on every surface (as an OAuth 2.1 resource
// server) and signs people in to the web catalog with it. Not to be
// confused with a source's git auth.
type OIDC struct {
	// Issuer is the provider's issuer URL; discovery reads Issuer +
	// "/.well-known/openid-configuration".
	Issuer string `yaml:"issuer"`
	// Audience is the "aud" access tokens must carry (RFC 8707); default
	// the MCP resource, public_url + "/mcp".
	Audience string `yaml:"audience"`
	// Scopes must all be in an access token; the 401 challenge and the
	// protected resource metadata advertise them.
	Scopes []string `yaml:"scopes"`
	// GroupsClaim names the claim with the caller's groups (default
	// "groups").
	GroupsClaim string `yaml:"groups_claim"`
	// ClientID and ClientSecretEnv are the web catalog's client at the
	// provider (the secret read from that environment variable; none for
	// a public client with PKCE).
	ClientID        string `yaml:"client_id"`
	ClientSecretEnv string `yaml:"client_secret_env"`
	// Introspection validates opaque access tokens (RFC 7662).
	Introspection *Introspection `yaml:"introspection"`

	// AudienceDefaulted says Audience was not set, so it follows
	// public_url (a reload that keeps the running public_url keeps its
	// audience too).
	AudienceDefaulted bool `yaml:"-"`
}

// Introspection is the provider's token introspection endpoint and the
// client skillreg authenticates to it as.
type Introspection struct {
	// URL of the endpoint; default: the discovery document's.
	URL             string `yaml:"url"`
	ClientID        string `yaml:"client_id"`
	ClientSecretEnv string `yaml:"client_secret_env"`
}

// AccessRule maps provider identities to sources: an identity matches
// when one of its groups, its subject or its email is listed. A caller
// sees the union of the rules it matches.
type AccessRule struct {
	Groups   []string `yaml:"groups"`
	Subjects []string `yaml:"subjects"`
	// Emails are exact addresses or "@domain"; only a verified email
	// matches.
	Emails []string `yaml:"emails"`
	// Sources are source names, or ["*"].
	Sources []string `yaml:"sources"`
}

// DefaultGroupsClaim is oidc.groups_claim's default.
const DefaultGroupsClaim = "groups"

// AccessControl reports whether callers need a credential: clients or
// oidc are configured.
func (c *Config) AccessControl() bool { return len(c.Clients) > 0 || c.OIDC != nil }

// MCPResource is the URL of the MCP endpoint as clients reach it, the
// protected resource of RFC 9728: public_url + "/mcp" ("" without
// public_url).
func (c *Config) MCPResource() string {
	if c.PublicURL == "" {
		return ""
	}
	return strings.TrimRight(c.PublicURL, "/") + "/mcp"
}

// ResourceMetadataURL is where the protected resource metadata is served
// ("" without public_url).
func (c *Config) ResourceMetadataURL() string {
	if c.PublicURL == "" {
		return ""
	}
	return strings.TrimRight(c.PublicURL, "/") + "/.well-known/oauth-protected-resource"
}

func (c *Config) oidcDefaults() {
	o := c.OIDC
	if o == nil {
		return
	}
	if o.Audience == "" {
		o.Audience, o.AudienceDefaulted = c.MCPResource(), true
	}
	if o.GroupsClaim == "" {
		o.GroupsClaim = DefaultGroupsClaim
	}
}

var (
	// scopeRE is RFC 6749's scope-token: no space, quote or backslash (it
	// is written into the WWW-Authenticate challenge).
	scopeRE   = regexp.MustCompile(`^[\x21\x23-\x5B\x5D-\x7E]+$`)
	envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	claimRE   = regexp.MustCompile(`^[\x21-\x7E]{1,200}$`)
)

// validateAccess checks the oidc and access sections; sources are the
// configured source names.
func (c *Config) validateAccess(sources map[string]int, bad func(format string, args ...any)) {
	if o := c.OIDC; o != nil {
		if c.PublicURL == "" {
			bad("oidc: requires public_url: tokens are issued for the MCP resource, public_url + \"/mcp\", and the 401 challenge points clients to public_url + \"/.well-known/oauth-protected-resource\"")
		}
		if o.Issuer == "" {
			bad("oidc.issuer: required (the provider's issuer URL, as in its tokens' \"iss\")")
		} else if err := checkProviderURL(o.Issuer); err != nil {
			bad("oidc.issuer: %v", err)
		}
		if o.Audience == "" && c.PublicURL != "" {
			bad("oidc.audience: required")
		}
		seen := map[string]bool{}
		for i, s := range o.Scopes {
			switch {
			case !scopeRE.MatchString(s):
				bad("oidc.scopes[%d]: %q is not a scope (printable, no spaces, quotes or backslashes)", i, s)
			case seen[s]:
				bad("oidc.scopes[%d]: %q is listed twice", i, s)
			}
			seen[s] = true
		}
		if !claimRE.MatchString(o.GroupsClaim) {
			bad("oidc.groups_claim: %q is not a claim name", o.GroupsClaim)
		}
		if o.ClientSecretEnv != "" {
			if !envNameRE.MatchString(o.ClientSecretEnv) {
				bad("oidc.client_secret_env: %q is not an environment variable name", o.ClientSecretEnv)
			}
			if o.ClientID == "" {
				bad("oidc.client_id: required with client_secret_env")
			}
		}
		if in := o.Introspection; in != nil {
			if in.URL != "" {
				if err := checkProviderURL(in.URL); err != nil {
					bad("oidc.introspection.url: %v", err)
				}
			}
			if in.ClientID == "" {
				bad("oidc.introspection.client_id: required (the client skillreg authenticates to the endpoint as)")
			}
			switch {
			case in.ClientSecretEnv == "":
				bad("oidc.introspection.client_secret_env: required (the environment variable with that client's secret)")
			case !envNameRE.MatchString(in.ClientSecretEnv):
				bad("oidc.introspection.client_secret_env: %q is not an environment variable name", in.ClientSecretEnv)
			}
		}
	}
	if len(c.Access) > 0 && c.OIDC == nil {
		bad("access: the rules map the provider's identities to sources; set oidc (clients list their own sources)")
	}
	for i, r := range c.Access {
		at := fmt.Sprintf("access[%d]", i)
		if len(r.Groups)+len(r.Subjects)+len(r.Emails) == 0 {
			bad("%s: name who it is for: groups, subjects or emails", at)
		}
		for j, g := range r.Groups {
			if g == "" {
				bad("%s.groups[%d]: empty", at, j)
			}
		}
		for j, s := range r.Subjects {
			if s == "" {
				bad("%s.subjects[%d]: empty", at, j)
			}
		}
		for j, e := range r.Emails {
			if err := checkEmailPattern(e); err != nil {
				bad("%s.emails[%d]: %v", at, j, err)
			}
		}
		if len(r.Sources) == 0 {
			bad("%s.sources: list the sources these identities may see, or [\"*\"]", at)
		}
		for _, s := range r.Sources {
			if _, ok := sources[s]; !ok && s != "*" {
				bad("%s.sources: %q is not a configured source", at, s)
			}
		}
	}
}

// checkProviderURL accepts https URLs, and http ones on loopback only
// (a provider's tokens and keys must not travel in the clear).
func checkProviderURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q is not a URL such as https://idp.example.com/realms/org (no credentials, query or fragment)", s)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		host := u.Hostname()
		if ip := net.ParseIP(host); (ip != nil && ip.IsLoopback()) || host == "localhost" {
			return nil
		}
	}
	return fmt.Errorf("%q must be https (http only on loopback, for tests)", s)
}

// checkEmailPattern accepts "user@domain" and "@domain".
func checkEmailPattern(e string) error {
	local, domain, ok := strings.Cut(e, "@")
	if !ok || domain == "" || strings.ContainsAny(domain, "@ \t") || strings.ContainsAny(local, " \t") {
		return fmt.Errorf("%q is not an address (alice@example.com) or a domain (@example.com)", e)
	}
	return nil
}
