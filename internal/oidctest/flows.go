package oidctest

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// Tokens is what a code exchange returns.
type Tokens struct {
	AccessToken string
	IDToken     string
	// Nonce is the nonce the authorization request sent (the ID token
	// carries it).
	Nonce string
}

func randomString(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("oidctest: random: %v", err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// clientContext makes x/oauth2 send through the provider's transport.
func (p *Provider) clientContext(ctx context.Context) context.Context {
	return context.WithValue(ctx, oauth2.HTTPClient, &http.Client{Transport: p.transport})
}

func (p *Provider) endpoint(secret string) oauth2.Endpoint {
	style := oauth2.AuthStyleInHeader
	if secret == "" {
		style = oauth2.AuthStyleInParams
	}
	return oauth2.Endpoint{AuthURL: p.AuthURL(), TokenURL: p.TokenURL(), AuthStyle: style}
}

// ClientCredentials gets an access token through the token endpoint with
// the client-credentials grant; resource ("" for none) is the RFC 8707
// resource, so the token's aud.
func (p *Provider) ClientCredentials(t testing.TB, clientID, secret, resource string, scopes ...string) string {
	t.Helper()
	tok, err := p.TryClientCredentials(context.Background(), clientID, secret, resource, scopes...)
	if err != nil {
		t.Fatalf("oidctest: client credentials for %s: %v", clientID, err)
	}
	return tok
}

// TryClientCredentials is ClientCredentials returning the token endpoint's
// refusal as an error.
func (p *Provider) TryClientCredentials(ctx context.Context, clientID, secret, resource string, scopes ...string) (string, error) {
	cfg := clientcredentials.Config{
		ClientID:     clientID,
		ClientSecret: secret,
		TokenURL:     p.TokenURL(),
		Scopes:       scopes,
		AuthStyle:    oauth2.AuthStyleInHeader,
	}
	if resource != "" {
		cfg.EndpointParams = url.Values{"resource": {resource}}
	}
	tok, err := cfg.Token(p.clientContext(ctx))
	if err != nil {
		return "", err
	}
	return tok.AccessToken, nil
}

// AuthCode signs user in through the authorization code flow with PKCE
// (S256), state and nonce, driving the login form with a plain HTTP client,
// and returns the access token. user is a Subject or Email of Options.Users;
// secret is "" for a public client; resource ("" for none) is sent in both
// the authorization and the token request.
func (p *Provider) AuthCode(t testing.TB, clientID, secret, redirectURI, resource, user string, scopes ...string) string {
	t.Helper()
	return p.AuthCodeTokens(t, clientID, secret, redirectURI, resource, user, scopes...).AccessToken
}

// AuthCodeTokens is AuthCode returning the ID token and nonce too.
func (p *Provider) AuthCodeTokens(t testing.TB, clientID, secret, redirectURI, resource, user string, scopes ...string) Tokens {
	t.Helper()
	u, ok := p.storage.user(user)
	if !ok {
		t.Fatalf("oidctest: no user %q", user)
	}
	tok, err := p.TryAuthCode(context.Background(), clientID, secret, redirectURI, resource, user, u.Password, randomString(t, 16), scopes...)
	if err != nil {
		t.Fatalf("oidctest: authorization code for %s as %s: %v", clientID, user, err)
	}
	return tok
}

// TryAuthCode is AuthCodeTokens with the password and nonce given, the
// refusal returned as an error.
func (p *Provider) TryAuthCode(ctx context.Context, clientID, secret, redirectURI, resource, user, password, nonce string, scopes ...string) (Tokens, error) {
	cfg := oauth2.Config{
		ClientID:     clientID,
		ClientSecret: secret,
		Endpoint:     p.endpoint(secret),
		RedirectURL:  redirectURI,
		Scopes:       scopes,
	}
	verifier := oauth2.GenerateVerifier()
	var sb [16]byte
	if _, err := rand.Read(sb[:]); err != nil {
		return Tokens{}, err
	}
	state := base64.RawURLEncoding.EncodeToString(sb[:])
	authOpts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("nonce", nonce)}
	var tokenOpts []oauth2.AuthCodeOption
	if resource != "" {
		authOpts = append(authOpts, oauth2.SetAuthURLParam("resource", resource))
		tokenOpts = append(tokenOpts, oauth2.SetAuthURLParam("resource", resource))
	}
	redirect, err := p.Login(ctx, cfg.AuthCodeURL(state, authOpts...), user, password)
	if err != nil {
		return Tokens{}, err
	}
	if redirect == nil {
		return Tokens{}, errors.New("oidctest: no redirect to the client")
	}
	q := redirect.Query()
	if q.Get("state") != state {
		return Tokens{}, fmt.Errorf("oidctest: state %q came back as %q", state, q.Get("state"))
	}
	code := q.Get("code")
	if code == "" {
		return Tokens{}, fmt.Errorf("oidctest: redirect without a code: %s", redirect.Redacted())
	}
	tok, err := cfg.Exchange(p.clientContext(ctx), code, append(tokenOpts, oauth2.VerifierOption(verifier))...)
	if err != nil {
		return Tokens{}, err
	}
	idToken, _ := tok.Extra("id_token").(string)
	return Tokens{AccessToken: tok.AccessToken, IDToken: idToken, Nonce: nonce}, nil
}
