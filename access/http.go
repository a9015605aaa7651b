package access

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// Where the protected resource metadata (RFC 9728) is served: at the root,
// and suffixed with the path of the MCP endpoint, as MCP clients look for
// it.
const (
	ResourceMetadataPath    = "/.well-known/oauth-protected-resource"
	ResourceMetadataPathMCP = ResourceMetadataPath + "/mcp"
)

// HTTPStatus maps an error of Authenticate or Check to its HTTP status:
// the one mapping every surface uses.
func HTTPStatus(err error) int {
	switch {
	case err == nil:
		return http.StatusOK
	case errors.Is(err, ErrNoCredential), errors.Is(err, ErrInvalidCredential):
		return http.StatusUnauthorized
	case errors.Is(err, ErrInsufficientScope):
		return http.StatusForbidden
	case errors.Is(err, ErrTooManyAttempts):
		return http.StatusTooManyRequests
	}
	return http.StatusServiceUnavailable // the provider cannot be asked
}

// ErrorCode is the standard error code (RFC 6750) of a refusal, the only
// reason a caller is told: "invalid_token", "insufficient_scope", or ""
// (no credential, or not the token's fault).
func ErrorCode(err error) string {
	switch {
	case errors.Is(err, ErrInvalidCredential):
		return "invalid_token"
	case errors.Is(err, ErrInsufficientScope):
		return "insufficient_scope"
	}
	return ""
}

// Challenge is the WWW-Authenticate value answering err (401 or 403).
// With OIDC it points to the protected resource metadata and names the
// required scopes, so that an MCP client can find the provider and sign
// in (RFC 9728); with clients alone it is a plain Bearer realm.
func (g *Gate) Challenge(err error) string {
	var params []string
	if g.OIDC() && g.o.ResourceMetadataURL != "" {
		params = append(params, fmt.Sprintf("resource_metadata=%q", g.o.ResourceMetadataURL))
		if len(g.o.Scopes) > 0 {
			params = append(params, fmt.Sprintf("scope=%q", strings.Join(g.o.Scopes, " ")))
		}
	} else {
		params = append(params, `realm="skillreg"`)
	}
	if code := ErrorCode(err); code != "" {
		params = append(params, fmt.Sprintf("error=%q", code))
	}
	return "Bearer " + strings.Join(params, ", ")
}

// RetryAfter is the Retry-After of a 429 or 503, in seconds.
func (g *Gate) RetryAfter(err error) string {
	if errors.Is(err, ErrTooManyAttempts) && g != nil && g.o.Limiter != nil {
		return fmt.Sprint(max(1, int(g.o.Limiter.RetryAfter().Seconds())))
	}
	return "5"
}

// ErrorHeaders sets the headers answering a request the gate refused
// with err (the challenge, or Retry-After; never cached) and returns the
// status.
func (g *Gate) ErrorHeaders(h http.Header, err error) int {
	code := HTTPStatus(err)
	h.Set("Cache-Control", "no-store")
	switch code {
	case http.StatusUnauthorized, http.StatusForbidden:
		h.Set("WWW-Authenticate", g.Challenge(err))
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		h.Set("Retry-After", g.RetryAfter(err))
	}
	return code
}

// ErrorMessage is the body of a refusal: the standard code, or a phrase
// that says no more than the status.
func ErrorMessage(err error) string {
	if code := ErrorCode(err); code != "" {
		return code
	}
	switch HTTPStatus(err) {
	case http.StatusUnauthorized:
		return "a bearer token is required"
	case http.StatusTooManyRequests:
		return "too many failed authentication attempts"
	}
	return "temporarily unavailable"
}

// WriteError answers a request the gate refused with err, in plain text.
func (g *Gate) WriteError(w http.ResponseWriter, err error) {
	code := g.ErrorHeaders(w.Header(), err)
	http.Error(w, ErrorMessage(err), code)
}

type identityKey struct{}

// WithIdentity returns ctx carrying id.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityFrom returns the identity Middleware put in ctx.
func IdentityFrom(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}

// Middleware lets a request through only with a credential the gate
// accepts (when it requires one), carrying its Identity in the context.
// Otherwise: 401 with the challenge (no credential, which is not a failed
// attempt, or an invalid one, which is), 403 insufficient_scope, 429 once
// the address has failed too often, 503 when the provider cannot be
// asked. gate is read at every request, so a reload takes effect at once.
func Middleware(gate func() *Gate, remote func(*http.Request) string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			g := gate()
			if !g.Required() {
				next.ServeHTTP(w, r)
				return
			}
			id, err := g.Check(r.Context(), remote(r), Bearer(r.Header.Get("Authorization")))
			if err != nil {
				g.WriteError(w, err)
				return
			}
			next.ServeHTTP(w, r.WithContext(WithIdentity(r.Context(), id)))
		})
	}
}

// ResourceMetadata is the protected resource metadata document (RFC
// 9728): the resource, the provider as its authorization server, the
// scopes, bearer tokens in the header only. Nil without OIDC.
func (g *Gate) ResourceMetadata() *oauthex.ProtectedResourceMetadata {
	if !g.OIDC() {
		return nil
	}
	return &oauthex.ProtectedResourceMetadata{
		Resource:               g.o.Resource,
		AuthorizationServers:   append([]string(nil), g.o.AuthorizationServers...),
		ScopesSupported:        g.Scopes(),
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "skillreg",
	}
}

// ResourceMetadataHandler serves the current gate's protected resource
// metadata (at ResourceMetadataPath and ResourceMetadataPathMCP); 404
// without OIDC.
func ResourceMetadataHandler(gate func() *Gate) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		md := gate().ResourceMetadata()
		if md == nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "public, max-age=300")
		auth.ProtectedResourceMetadataHandler(md).ServeHTTP(w, r)
	})
}
