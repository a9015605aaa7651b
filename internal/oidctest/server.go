package oidctest

import (
	"context"
	"slices"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// server is the library's LegacyServer with the three exchanges that carry
// RFC 8707 resource indicators taken over: the library parses no
// `resource` parameter and gives the ID token and the access token one
// audience, so the resource goes to the storage in the context and the
// code exchange asks for the access token with its own audience.
type server struct {
	*op.LegacyServer
	provider *op.Provider
	storage  *storage
}

func (s *server) Authorize(ctx context.Context, r *op.ClientRequest[oidc.AuthRequest]) (*op.Redirect, error) {
	return s.LegacyServer.Authorize(context.WithValue(ctx, resourceKey, r.Form["resource"]), r)
}

func (s *server) ClientCredentialsExchange(ctx context.Context, r *op.ClientRequest[oidc.ClientCredentialsRequest]) (*op.Response, error) {
	return s.LegacyServer.ClientCredentialsExchange(context.WithValue(ctx, resourceKey, r.Form["resource"]), r)
}

// CodeExchange makes the checks of LegacyServer.CodeExchange (code, PKCE,
// client, redirect URI), then issues the access token for the resource and
// the ID token for the client.
func (s *server) CodeExchange(ctx context.Context, r *op.ClientRequest[oidc.AccessTokenRequest]) (*op.Response, error) {
	got, err := op.AuthRequestByCode(ctx, s.storage, r.Data.Code)
	if err != nil {
		return nil, err
	}
	ar, ok := got.(*authRequest)
	if !ok {
		return nil, oidc.ErrServerError()
	}
	if r.Client.GetID() != ar.clientID {
		return nil, oidc.ErrInvalidGrant()
	}
	if !op.ValidateGrantType(r.Client, oidc.GrantTypeCode) {
		return nil, oidc.ErrUnauthorizedClient().WithDescription("client may not use the authorization code grant")
	}
	if r.Client.AuthMethod() == oidc.AuthMethodNone && ar.challenge == nil {
		return nil, oidc.ErrInvalidRequest().WithDescription("PKCE required")
	}
	if r.Client.AuthMethod() == oidc.AuthMethodNone || r.Data.CodeVerifier != "" || ar.challenge != nil {
		if err := op.AuthorizeCodeChallenge(r.Data.CodeVerifier, ar.challenge); err != nil {
			return nil, err
		}
	}
	if r.Data.RedirectURI != ar.redirectURI {
		return nil, oidc.ErrInvalidGrant().WithDescription("redirect_uri does not correspond")
	}
	res := r.Form["resource"]
	if err := validResources(res); err != nil {
		return nil, err
	}
	if len(ar.resources) > 0 {
		for _, x := range res {
			if !slices.Contains(ar.resources, x) {
				return nil, &oidc.Error{ErrorType: "invalid_target", Description: "resource was not asked for in the authorization request"}
			}
		}
		if len(res) == 0 {
			res = ar.resources
		}
	}
	access, _, validity, err := op.CreateAccessToken(ctx, &accessRequest{authRequest: ar, audience: s.storage.audience(res)},
		r.Client.AccessTokenType(), s.provider, r.Client, "")
	if err != nil {
		return nil, err
	}
	idToken, err := op.CreateIDToken(ctx, op.IssuerFromContext(ctx), ar, r.Client.IDTokenLifetime(), access, r.Data.Code, s.storage, r.Client)
	if err != nil {
		return nil, err
	}
	if err := s.storage.DeleteAuthRequest(ctx, ar.id); err != nil {
		return nil, err
	}
	return op.NewResponse(&oidc.AccessTokenResponse{
		AccessToken: access,
		IDToken:     idToken,
		TokenType:   oidc.BearerToken,
		ExpiresIn:   uint64(validity.Seconds()),
		Scope:       ar.scopes,
	}), nil
}
