package oidctest

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

var (
	_ op.Storage                        = (*storage)(nil)
	_ op.ClientCredentialsStorage       = (*storage)(nil)
	_ op.CanGetPrivateClaimsFromRequest = (*storage)(nil)
	_ op.CanSetUserinfoFromRequest      = (*storage)(nil)
)

// storage is the op.Storage of one provider: static users and clients, the
// auth requests and tokens it issued, and its key ring, all in memory.
type storage struct {
	opts    Options
	issuer  string
	keys    *keyRing
	clients map[string]*client
	users   []User

	mu       sync.Mutex
	requests map[string]*authRequest
	codes    map[string]string // code -> auth request id
	tokens   map[string]*token // jti -> token
}

// token is what the provider remembers of an access token it issued.
type token struct {
	id, clientID, subject string
	audience, scopes      []string
	expiry, issued        time.Time
}

func newStorage(o Options, issuer, introID, introSecret string) (*storage, error) {
	keys, err := newKeyRing(o.Algorithm)
	if err != nil {
		return nil, err
	}
	s := &storage{
		opts:     o,
		issuer:   issuer,
		keys:     keys,
		clients:  map[string]*client{},
		users:    slices.Clone(o.Users),
		requests: map[string]*authRequest{},
		codes:    map[string]string{},
		tokens:   map[string]*token{},
	}
	for _, c := range o.Clients {
		if c.ID == "" {
			return nil, errors.New("a client without an ID")
		}
		if _, dup := s.clients[c.ID]; dup || c.ID == introID {
			return nil, fmt.Errorf("client %q twice", c.ID)
		}
		if !c.Public && c.Secret == "" {
			return nil, fmt.Errorf("confidential client %q without a secret", c.ID)
		}
		c.RedirectURIs = slices.Clone(c.RedirectURIs)
		c.PostLogoutRedirectURIs = slices.Clone(c.PostLogoutRedirectURIs)
		c.Groups = slices.Clone(c.Groups)
		s.clients[c.ID] = &client{Client: c, opaque: o.Opaque}
	}
	s.clients[introID] = &client{Client: Client{ID: introID, Secret: introSecret}, opaque: o.Opaque, introspectOnly: true}
	seen := map[string]bool{}
	for _, u := range o.Users {
		if u.Subject == "" || u.Password == "" {
			return nil, errors.New("a user needs a Subject and a Password")
		}
		if seen[u.Subject] {
			return nil, fmt.Errorf("user %q twice", u.Subject)
		}
		seen[u.Subject] = true
	}
	return s, nil
}

// user finds a user by subject or email.
func (s *storage) user(name string) (User, bool) {
	for _, u := range s.users {
		if u.Subject == name || (u.Email != "" && strings.EqualFold(u.Email, name)) {
			return u, true
		}
	}
	return User{}, false
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// checkLogin marks the auth request id as done by the user when the
// password matches.
func (s *storage) checkLogin(id, username, password string) error {
	u, ok := s.user(username)
	if !ok || subtle.ConstantTimeCompare([]byte(u.Password), []byte(password)) != 1 {
		return errors.New("unknown user or wrong password")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	req, ok := s.requests[id]
	if !ok {
		return errors.New("unknown or finished sign-in request")
	}
	req.subject = u.Subject
	req.done = true
	req.authTime = time.Now()
	return nil
}

// validResources checks RFC 8707 resource indicators: absolute URIs
// without a fragment.
func validResources(res []string) error {
	for _, r := range res {
		u, err := url.Parse(r)
		if err != nil || !u.IsAbs() || u.Fragment != "" {
			return &oidc.Error{ErrorType: "invalid_target", Description: "resource must be an absolute URI without a fragment"}
		}
	}
	return nil
}

// audience is the aud of an access token: the resources asked for, else the
// configured default, else nil (the library then uses the client ID).
func (s *storage) audience(res []string) []string {
	if len(res) > 0 {
		return slices.Clone(res)
	}
	if s.opts.Audience != "" {
		return []string{s.opts.Audience}
	}
	return nil
}

// --- op.AuthStorage ---

func (s *storage) CreateAuthRequest(ctx context.Context, req *oidc.AuthRequest, userID string) (op.AuthRequest, error) {
	if slices.Contains(req.Prompt, oidc.PromptNone) {
		return nil, oidc.ErrLoginRequired()
	}
	res := resourcesFrom(ctx)
	if err := validResources(res); err != nil {
		return nil, err
	}
	c, ok := s.clients[req.ClientID]
	if !ok {
		return nil, errors.New("unknown client")
	}
	if c.Public && (req.CodeChallenge == "" || req.CodeChallengeMethod != oidc.CodeChallengeMethodS256) {
		return nil, oidc.ErrInvalidRequest().WithDescription("PKCE with S256 is required for public clients")
	}
	ar := &authRequest{
		id:           newID(),
		clientID:     req.ClientID,
		redirectURI:  req.RedirectURI,
		state:        req.State,
		nonce:        req.Nonce,
		scopes:       slices.Clone(req.Scopes),
		responseType: req.ResponseType,
		responseMode: req.ResponseMode,
		resources:    res,
		created:      time.Now(),
	}
	if req.CodeChallenge != "" {
		ar.challenge = &oidc.CodeChallenge{Challenge: req.CodeChallenge, Method: req.CodeChallengeMethod}
	}
	s.mu.Lock()
	s.requests[ar.id] = ar
	s.mu.Unlock()
	return ar, nil
}

func (s *storage) AuthRequestByID(_ context.Context, id string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ar, ok := s.requests[id]
	if !ok {
		return nil, errors.New("unknown auth request")
	}
	return ar, nil
}

func (s *storage) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	s.mu.Lock()
	id, ok := s.codes[code]
	s.mu.Unlock()
	if !ok {
		return nil, errors.New("unknown or used code")
	}
	return s.AuthRequestByID(ctx, id)
}

func (s *storage) SaveAuthCode(_ context.Context, id, code string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.codes[code] = id
	return nil
}

func (s *storage) DeleteAuthRequest(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.requests, id)
	for code, rid := range s.codes {
		if rid == id {
			delete(s.codes, code)
		}
	}
	return nil
}

func (s *storage) CreateAccessToken(_ context.Context, req op.TokenRequest) (string, time.Time, error) {
	var clientID string
	switch r := req.(type) {
	case *accessRequest:
		clientID = r.clientID
	case *ccRequest:
		clientID = r.clientID
	default:
		return "", time.Time{}, oidc.ErrUnsupportedGrantType()
	}
	now := time.Now()
	aud := req.GetAudience()
	if len(aud) == 0 {
		aud = []string{clientID}
	}
	t := &token{
		id:       newID(),
		clientID: clientID,
		subject:  req.GetSubject(),
		audience: aud,
		scopes:   slices.Clone(req.GetScopes()),
		issued:   now,
		expiry:   now.Add(s.opts.AccessTokenTTL),
	}
	s.mu.Lock()
	s.tokens[t.id] = t
	s.mu.Unlock()
	return t.id, t.expiry, nil
}

func (s *storage) CreateAccessAndRefreshTokens(context.Context, op.TokenRequest, string) (string, string, time.Time, error) {
	return "", "", time.Time{}, oidc.ErrUnsupportedGrantType().WithDescription("refresh tokens are not issued")
}

func (s *storage) TokenRequestByRefreshToken(context.Context, string) (op.RefreshTokenRequest, error) {
	return nil, oidc.ErrInvalidGrant().WithDescription("refresh tokens are not issued")
}

func (s *storage) TerminateSession(context.Context, string, string) error { return nil }

func (s *storage) RevokeToken(_ context.Context, id, _, clientID string) *oidc.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.tokens[id]; ok {
		if t.clientID != clientID {
			return oidc.ErrInvalidClient().WithDescription("token was not issued to this client")
		}
		delete(s.tokens, id)
	}
	return nil
}

func (s *storage) GetRefreshTokenInfo(context.Context, string, string) (string, string, error) {
	return "", "", op.ErrInvalidRefreshToken
}

func (s *storage) SigningKey(context.Context) (op.SigningKey, error) { return s.keys.current(), nil }

func (s *storage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{s.keys.alg}, nil
}

func (s *storage) KeySet(context.Context) ([]op.Key, error) { return s.keys.published(), nil }

// --- op.OPStorage ---

func (s *storage) GetClientByClientID(_ context.Context, id string) (op.Client, error) {
	c, ok := s.clients[id]
	if !ok {
		return nil, errors.New("unknown client")
	}
	return c, nil
}

func (s *storage) AuthorizeClientIDSecret(_ context.Context, id, secret string) error {
	c, ok := s.clients[id]
	if !ok || c.Public || subtle.ConstantTimeCompare([]byte(c.Secret), []byte(secret)) != 1 {
		return errors.New("unknown client or wrong secret")
	}
	return nil
}

// SetUserinfoFromScopes is deprecated in the library; SetUserinfoFromRequest
// does the work.
func (s *storage) SetUserinfoFromScopes(context.Context, *oidc.UserInfo, string, string, []string) error {
	return nil
}

func (s *storage) SetUserinfoFromRequest(_ context.Context, info *oidc.UserInfo, req op.IDTokenRequest, _ []string) error {
	return s.userinfo(info, req.GetSubject())
}

func (s *storage) userinfo(info *oidc.UserInfo, subject string) error {
	u, ok := s.user(subject)
	if !ok {
		return errors.New("unknown user")
	}
	info.Subject = u.Subject
	if u.Email != "" {
		info.Email = u.Email
		info.EmailVerified = true
	}
	info.AppendClaims("groups", groupsClaim(u.Groups))
	return nil
}

func groupsClaim(g []string) []string {
	if g == nil {
		return []string{}
	}
	return slices.Clone(g)
}

func (s *storage) SetUserinfoFromToken(_ context.Context, info *oidc.UserInfo, tokenID, _, _ string) error {
	t, ok := s.liveToken(tokenID)
	if !ok {
		return errors.New("unknown or expired token")
	}
	return s.userinfo(info, t.subject)
}

// expireAll ends every access token issued so far.
func (s *storage) expireAll() {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.tokens {
		t.expiry = now
	}
}

func (s *storage) liveToken(id string) (*token, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tokens[id]
	if !ok || !time.Now().Before(t.expiry) {
		return nil, false
	}
	return t, true
}

func (s *storage) SetIntrospectionFromToken(_ context.Context, resp *oidc.IntrospectionResponse, tokenID, _, clientID string) error {
	if c, ok := s.clients[clientID]; !ok || c.Public {
		return errors.New("introspection needs a confidential client")
	}
	t, ok := s.liveToken(tokenID)
	if !ok {
		return errors.New("unknown or expired token")
	}
	resp.Scope = t.scopes
	resp.ClientID = t.clientID
	resp.TokenType = oidc.BearerToken
	resp.Expiration = oidc.FromTime(t.expiry)
	resp.IssuedAt = oidc.FromTime(t.issued)
	resp.NotBefore = oidc.FromTime(t.issued)
	resp.Subject = t.subject
	resp.Audience = t.audience
	resp.Issuer = s.issuer
	resp.JWTID = t.id
	claims, err := s.privateClaims(t.clientID, t.subject, t.scopes)
	if err != nil {
		return err
	}
	resp.Claims = claims
	return nil
}

func (s *storage) GetPrivateClaimsFromScopes(_ context.Context, userID, clientID string, scopes []string) (map[string]any, error) {
	return s.privateClaims(clientID, userID, scopes)
}

func (s *storage) GetPrivateClaimsFromRequest(_ context.Context, req op.TokenRequest, _ []string) (map[string]any, error) {
	var clientID string
	switch r := req.(type) {
	case *accessRequest:
		clientID = r.clientID
	case *ccRequest:
		clientID = r.clientID
	}
	return s.privateClaims(clientID, req.GetSubject(), req.GetScopes())
}

// privateClaims are the claims an access token (or its introspection)
// carries beyond the registered ones: scope, and groups and email of the
// user, or the client's groups for a client-credentials token.
func (s *storage) privateClaims(clientID, subject string, scopes []string) (map[string]any, error) {
	claims := map[string]any{"scope": strings.Join(scopes, " ")}
	if c, ok := s.clients[clientID]; ok && subject == clientID {
		claims["groups"] = groupsClaim(c.Groups)
		return claims, nil
	}
	u, ok := s.user(subject)
	if !ok {
		return nil, errors.New("unknown user")
	}
	claims["groups"] = groupsClaim(u.Groups)
	if u.Email != "" {
		claims["email"] = u.Email
		claims["email_verified"] = true
	}
	return claims, nil
}

func (s *storage) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errors.New("JWT profile grants are not supported")
}

func (s *storage) ValidateJWTProfileScopes(context.Context, string, []string) ([]string, error) {
	return nil, errors.New("JWT profile grants are not supported")
}

func (s *storage) Health(context.Context) error { return nil }

// --- op.ClientCredentialsStorage ---

func (s *storage) ClientCredentials(_ context.Context, id, secret string) (op.Client, error) {
	c, ok := s.clients[id]
	if !ok || c.Public || c.introspectOnly || subtle.ConstantTimeCompare([]byte(c.Secret), []byte(secret)) != 1 {
		// The library's server path answers a plain error as a 500.
		return nil, oidc.ErrInvalidClient().WithDescription("unknown client or wrong secret")
	}
	return c, nil
}

func (s *storage) ClientCredentialsTokenRequest(ctx context.Context, id string, scopes []string) (op.TokenRequest, error) {
	res := resourcesFrom(ctx)
	if err := validResources(res); err != nil {
		return nil, err
	}
	return &ccRequest{clientID: id, scopes: slices.Clone(scopes), audience: s.audience(res)}, nil
}
