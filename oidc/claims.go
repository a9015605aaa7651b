// Package oidc validates the tokens of the organisation's OpenID Connect
// provider: access tokens presented to skillreg as a resource server (MCP,
// the web catalog, the discovery indexes, the marketplace, artifacts, the
// git mirror) and ID tokens returned to the web sign-in.
//
// A Verifier finds the provider through discovery (Issuer +
// "/.well-known/openid-configuration") and keeps its JWKS cached. A token
// whose key id the cache does not know triggers a refresh, at most once a
// minute and with one fetch in flight; cached keys are kept through a
// provider outage, so a token signed by a cached key validates until its
// "exp" while the provider is down. Signatures are checked against an
// allow-list of asymmetric algorithms (RS*, PS*, ES*, EdDSA): never "none",
// never HMAC. "iss", "aud", "exp" and "nbf" are checked with 60 s of clock
// skew. Opaque (non-JWT) access tokens go to the provider's introspection
// endpoint when Config.Introspection is set.
//
// Every fetch is bounded in size and time. A token is never logged, stored,
// or put in an error: errors say which check refused a token, not the token.
//
// Errors wrap one of two sentinels: ErrInvalidToken (the token is refused:
// the caller should get 401) and ErrUnavailable (the verifier cannot decide,
// because the provider is unreachable and the key or metadata needed is not
// cached: the caller should get 503).
package oidc

import (
	"errors"
	"log/slog"
	"net/http"
	"time"
)

// Config configures a Verifier. Issuer and Audience are required.
type Config struct {
	// Issuer is the provider's issuer URL, exactly as it appears in the
	// tokens' "iss" claim. Discovery reads Issuer +
	// "/.well-known/openid-configuration" (a trailing slash on Issuer is
	// not doubled).
	Issuer string
	// Audience is the "aud" every access token must carry: skillreg's
	// resource URL (RFC 8707), by default public_url + "/mcp".
	Audience string
	// GroupsClaim names the claim holding the caller's groups; default
	// "groups". A dotted name ("realm_access.roles") walks nested objects.
	GroupsClaim string
	// Introspection, when set, validates opaque (non-JWT) access tokens at
	// the provider's introspection endpoint (RFC 7662). Without it an
	// opaque token is invalid.
	Introspection *IntrospectionConfig
	// HTTPClient fetches discovery, the JWKS and introspection. Nil: a
	// client with FetchTimeout. Its own Timeout, if any, also applies.
	HTTPClient *http.Client
	// Logger receives the provider's state changes (discovery, key
	// fetches, outages). Refusals are not logged here: they are returned,
	// for the caller to log once. Nil: discarded.
	Logger *slog.Logger
	// Now is the clock; nil: time.Now. Tests set it.
	Now func() time.Time

	// Algorithms restricts the accepted signature algorithms further; empty
	// means every allowed one (RS256/384/512, PS256/384/512,
	// ES256/384/512, EdDSA). A name outside that list is a config error.
	Algorithms []string
	// FetchTimeout bounds each discovery, JWKS or introspection request;
	// default 10 s.
	FetchTimeout time.Duration
	// RefreshInterval is the shortest time between two JWKS fetches caused
	// by an unknown key id; default one minute.
	RefreshInterval time.Duration
	// KeysMaxAge is how often Start refetches the JWKS, so that a key the
	// provider withdrew stops validating within it; default one hour.
	KeysMaxAge time.Duration
}

// IntrospectionConfig is the provider's token introspection endpoint
// (RFC 7662) and the client skillreg authenticates to it as.
type IntrospectionConfig struct {
	// URL is the endpoint; empty: the discovery document's
	// "introspection_endpoint".
	URL string
	// ClientID and ClientSecret authenticate the request (HTTP basic, as
	// client_secret_basic).
	ClientID     string
	ClientSecret string
	// CacheTTL bounds how long an active introspection result is reused
	// (never past the token's "exp"); default 30 s, negative: no cache.
	// The cache is keyed by a hash of the token, never the token.
	CacheTTL time.Duration
}

// Claims is what skillreg uses of a validated token.
type Claims struct {
	Issuer        string
	Subject       string
	Email         string
	EmailVerified bool
	// Groups is the GroupsClaim's value (a list of strings, or one string).
	Groups []string
	// Scopes from "scope" (space separated) or "scp" (a list, or a space
	// separated string).
	Scopes []string
	// ClientID from "client_id", else "azp".
	ClientID string
	Expiry   time.Time
}

// ProviderMetadata is the part of the provider's discovery document
// skillreg uses (OpenID Connect Discovery 1.0, RFC 8414).
type ProviderMetadata struct {
	Issuer                string   `json:"issuer"`
	AuthorizationEndpoint string   `json:"authorization_endpoint"`
	TokenEndpoint         string   `json:"token_endpoint"`
	UserinfoEndpoint      string   `json:"userinfo_endpoint,omitempty"`
	JWKSURI               string   `json:"jwks_uri"`
	EndSessionEndpoint    string   `json:"end_session_endpoint,omitempty"`
	IntrospectionEndpoint string   `json:"introspection_endpoint,omitempty"`
	RevocationEndpoint    string   `json:"revocation_endpoint,omitempty"`
	ScopesSupported       []string `json:"scopes_supported,omitempty"`
	// CodeChallengeMethodsSupported lists the PKCE methods ("S256").
	CodeChallengeMethodsSupported    []string `json:"code_challenge_methods_supported,omitempty"`
	IDTokenSigningAlgValuesSupported []string `json:"id_token_signing_alg_values_supported,omitempty"`
}

// The two outcomes of a failed verification. Errors returned by the
// Verifier wrap exactly one of them (errors.Is).
var (
	// ErrInvalidToken: the token is refused (malformed, bad signature,
	// unknown key after a refresh, disallowed algorithm, wrong iss or aud,
	// expired or not yet valid beyond the skew, inactive at introspection).
	ErrInvalidToken = errors.New("oidc: invalid token")
	// ErrUnavailable: no decision can be made yet: the provider cannot be
	// reached and the metadata or key needed is not cached, or the token
	// names an unknown key while the key set was refreshed less than a
	// minute ago (it may be a key the provider has just rotated in).
	ErrUnavailable = errors.New("oidc: provider unavailable")
)
