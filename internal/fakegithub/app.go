package fakegithub

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// DefaultTokenLifetime is how long GitHub's installation access tokens
// live.
const DefaultTokenLifetime = time.Hour

// maxJWTSkew is how far GitHub lets a JWT's exp lie after now.
const maxJWTSkew = 10 * time.Minute

// Account types of an installation's account, as GitHub names them.
const (
	Organization = "Organization"
	User         = "User"
)

// appSide is the GitHub App half of the fake: registered Apps with their
// public keys, installations on accounts, and the installation tokens
// issued. Guarded by Server.mu.
type appSide struct {
	apps     map[int64]*rsa.PublicKey
	installs map[int64]*installation
	tokens   map[string]*issuedToken
	lifetime time.Duration
}

type installation struct {
	id          int64
	appID       int64
	account     string
	accountType string
	accountID   int64
	suspended   bool
}

type issuedToken struct {
	installation int64
	expires      time.Time
}

func (s *Server) appsLocked() *appSide {
	if s.apps == nil {
		s.apps = &appSide{
			apps:     map[int64]*rsa.PublicKey{},
			installs: map[int64]*installation{},
			tokens:   map[string]*issuedToken{},
			lifetime: DefaultTokenLifetime,
		}
	}
	return s.apps
}

// RegisterApp makes a GitHub App known by its id and the public half of its
// private key: JWTs the key signs with iss = id authenticate as the App.
func (s *Server) RegisterApp(id int64, key *rsa.PublicKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.appsLocked().apps[id] = key
}

// Install installs App appID on account (Organization or User) and returns
// the installation's id.
func (s *Server) Install(appID int64, account, accountType string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.appsLocked()
	s.nextID++
	id := s.nextID
	s.nextID++
	a.installs[id] = &installation{id: id, appID: appID, account: account, accountType: accountType, accountID: s.nextID}
	return id
}

// Uninstall deletes an installation; its tokens stop working at once.
func (s *Server) Uninstall(installationID int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.appsLocked()
	delete(a.installs, installationID)
	a.revokeLocked(installationID)
}

// Suspend suspends (or unsuspends) an installation: GitHub then refuses to
// mint its tokens, and those issued stop working.
func (s *Server) Suspend(installationID int64, suspended bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.appsLocked()
	if in, ok := a.installs[installationID]; ok {
		in.suspended = suspended
		if suspended {
			a.revokeLocked(installationID)
		}
	}
}

// RevokeTokens revokes every token issued for an installation, as
// DELETE /installation/token does for one: GitHub answers 401 to them
// before their expires_at.
func (s *Server) RevokeTokens(installationID int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.appsLocked().revokeLocked(installationID)
}

func (a *appSide) revokeLocked(installationID int64) {
	for tok, it := range a.tokens {
		if it.installation == installationID {
			delete(a.tokens, tok)
		}
	}
}

// SetTokenLifetime sets how long installation tokens minted from now on
// live (DefaultTokenLifetime until set).
func (s *Server) SetTokenLifetime(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.appsLocked().lifetime = d
}

// ValidToken reports whether token is a credential GitHub accepts now: an
// unexpired installation token, or Options.Token. A loopback git server
// asks it (gittest.Server.RequireCredential), as GitHub's git service
// accepts x-access-token:<installation token>.
func (s *Server) ValidToken(token string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return token != "" && (token == s.token || s.installationTokenLocked(token, s.now()))
}

// InstallationAccount returns the account of the installation an
// unexpired installation token was minted for (what GET
// /installation/repositories lists).
func (s *Server) InstallationAccount(token string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.installationAccountLocked(token, s.now())
}

func (s *Server) installationAccountLocked(token string, now time.Time) (string, bool) {
	if !s.installationTokenLocked(token, now) {
		return "", false
	}
	in, ok := s.apps.installs[s.apps.tokens[token].installation]
	if !ok {
		return "", false
	}
	return in.account, true
}

// TokensIssued returns how many installation tokens were minted for an
// installation (revoked and expired ones included).
func (s *Server) TokensIssued(installationID int64) int {
	return s.Stats(fmt.Sprintf("/app/installations/%d/access_tokens", installationID)).Status[http.StatusCreated]
}

func (s *Server) installationTokenLocked(token string, now time.Time) bool {
	if s.apps == nil {
		return false
	}
	it, ok := s.apps.tokens[token]
	return ok && now.Before(it.expires)
}

// credentialToken is the token of an Authorization header ("Bearer X" or
// "token X"), "" for any other scheme.
func credentialToken(auth string) string {
	for _, p := range []string{"Bearer ", "bearer ", "token "} {
		if t, ok := strings.CutPrefix(auth, p); ok {
			return strings.TrimSpace(t)
		}
	}
	return ""
}

// isJWT tells a JSON Web Token (three base64url parts, the first a JSON
// header) from an opaque token, as GitHub's authentication does.
func isJWT(tok string) bool {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return false
	}
	h, err := base64.RawURLEncoding.DecodeString(parts[0])
	return err == nil && json.Valid(h)
}

// appPath reports whether path is one only an App's JWT opens.
func appPath(path string) bool {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case parts[0] == "app":
		return true
	case len(parts) == 3 && (parts[0] == "orgs" || parts[0] == "users") && parts[2] == "installation":
		return true
	case len(parts) == 4 && parts[0] == "repos" && parts[3] == "installation":
		return true
	}
	return false
}

// appAuthLocked is the auth check's App part. A request carrying a JWT has
// it checked as GitHub checks it (RS256 by a registered App's key, iss, exp
// in the future and at most ten minutes ahead, iat not in the future): it
// returns the App's id, or the 401 to answer. An App endpoint asked
// without a JWT gets a 401 too. Anything else (0, nil) is left to the
// token check.
func (s *Server) appAuthLocked(r *http.Request, path string, h http.Header, now time.Time) (int64, *answer) {
	tok := credentialToken(r.Header.Get("Authorization"))
	jwt := isJWT(tok)
	if !jwt && !appPath(path) {
		return 0, nil
	}
	msg := "A JSON web token could not be decoded"
	var appID int64
	if jwt {
		appID, msg = s.checkJWTLocked(tok, now)
	}
	if msg != "" {
		a := errorAnswer(h, http.StatusUnauthorized, msg, "https://docs.github.com/rest")
		return 0, &a
	}
	return appID, nil
}

// appRouteLocked answers a request authenticated as App appID: the App's
// endpoints and the installation lookups.
func (s *Server) appRouteLocked(r *http.Request, path string, appID int64, h http.Header, now time.Time) answer {
	const doc = "https://docs.github.com/rest"
	a := s.appsLocked()
	parts := strings.Split(strings.Trim(path, "/"), "/")
	get := r.Method == http.MethodGet || r.Method == http.MethodHead
	apiBase := "http://" + r.Host
	switch {
	case get && len(parts) == 1 && parts[0] == "app":
		return jsonAnswer(h, map[string]any{"id": appID, "slug": fmt.Sprintf("app-%d", appID), "name": fmt.Sprintf("App %d", appID)})
	case get && len(parts) == 2 && parts[0] == "app" && parts[1] == "installations":
		list := []any{}
		for _, in := range a.installs {
			if in.appID == appID {
				list = append(list, s.installationJSON(in, apiBase))
			}
		}
		return jsonAnswer(h, list)
	case get && len(parts) == 3 && parts[0] == "app" && parts[1] == "installations":
		if in := a.installationLocked(appID, parts[2]); in != nil {
			return jsonAnswer(h, s.installationJSON(in, apiBase))
		}
	case r.Method == http.MethodPost && len(parts) == 4 && parts[0] == "app" && parts[1] == "installations" && parts[3] == "access_tokens":
		in := a.installationLocked(appID, parts[2])
		if in == nil {
			break
		}
		if in.suspended {
			return errorAnswer(h, http.StatusForbidden, "This installation has been suspended", doc+"/apps/apps#create-an-installation-access-token-for-an-app")
		}
		tok := "ghs_" + randomToken(36)
		expires := now.Add(a.lifetime).UTC().Truncate(time.Second)
		a.tokens[tok] = &issuedToken{installation: in.id, expires: expires}
		ans := jsonAnswer(h, map[string]any{
			"token":                tok,
			"expires_at":           expires.Format(time.RFC3339),
			"permissions":          map[string]string{"contents": "read", "metadata": "read"},
			"repository_selection": "all",
		})
		ans.status = http.StatusCreated
		return ans
	case get && len(parts) == 3 && (parts[0] == "orgs" || parts[0] == "users") && parts[2] == "installation":
		want := Organization
		if parts[0] == "users" {
			want = User
		}
		for _, in := range a.installs {
			if in.appID == appID && in.accountType == want && strings.EqualFold(in.account, parts[1]) {
				return jsonAnswer(h, s.installationJSON(in, apiBase))
			}
		}
	case get && len(parts) == 4 && parts[0] == "repos" && parts[3] == "installation":
		for _, in := range a.installs {
			if in.appID == appID && strings.EqualFold(in.account, parts[1]) {
				if _, ok := s.repos[strings.ToLower(parts[1]+"/"+parts[2])]; ok {
					return jsonAnswer(h, s.installationJSON(in, apiBase))
				}
			}
		}
	case !appPath(path):
		// A JWT opens only the App's own endpoints.
		return errorAnswer(h, http.StatusForbidden, "Resource not accessible by integration", doc)
	}
	return errorAnswer(h, http.StatusNotFound, "Not Found", doc)
}

func (a *appSide) installationLocked(appID int64, rawID string) *installation {
	id, err := strconv.ParseInt(rawID, 10, 64)
	if err != nil {
		return nil
	}
	if in, ok := a.installs[id]; ok && in.appID == appID {
		return in
	}
	return nil
}

// checkJWTLocked checks a JWT as GitHub does and returns the App's id, or
// GitHub's message for the first thing wrong with it.
func (s *Server) checkJWTLocked(tok string, now time.Time) (int64, string) {
	const undecodable = "A JSON web token could not be decoded"
	parts := strings.Split(tok, ".")
	rawHeader, err1 := base64.RawURLEncoding.DecodeString(parts[0])
	rawClaims, err2 := base64.RawURLEncoding.DecodeString(parts[1])
	sig, err3 := base64.RawURLEncoding.DecodeString(parts[2])
	if err1 != nil || err2 != nil || err3 != nil {
		return 0, undecodable
	}
	var header struct {
		Alg string `json:"alg"`
	}
	var claims struct {
		Iat *json.Number `json:"iat"`
		Exp *json.Number `json:"exp"`
		Iss any          `json:"iss"`
	}
	dec := json.NewDecoder(strings.NewReader(string(rawClaims)))
	dec.UseNumber()
	if json.Unmarshal(rawHeader, &header) != nil || dec.Decode(&claims) != nil || header.Alg != "RS256" {
		return 0, undecodable
	}
	var appID int64
	switch iss := claims.Iss.(type) {
	case json.Number:
		appID, _ = iss.Int64()
	case string:
		appID, _ = strconv.ParseInt(iss, 10, 64)
	}
	key, ok := s.appsLocked().apps[appID]
	if !ok {
		return 0, "Integration not found"
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if rsa.VerifyPKCS1v15(key, crypto.SHA256, sum[:], sig) != nil {
		return 0, undecodable
	}
	iat, errIat := numericDate(claims.Iat)
	if errIat != nil || iat.After(now) {
		return 0, "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued"
	}
	exp, errExp := numericDate(claims.Exp)
	if errExp != nil || !exp.After(now) {
		return 0, "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires"
	}
	if exp.After(now.Add(maxJWTSkew)) {
		return 0, "'Expiration time' claim ('exp') is too far in the future"
	}
	return appID, ""
}

// numericDate reads a JWT NumericDate; GitHub refuses fractions.
func numericDate(n *json.Number) (time.Time, error) {
	if n == nil {
		return time.Time{}, fmt.Errorf("missing")
	}
	v, err := n.Int64()
	if err != nil {
		return time.Time{}, err
	}
	return time.Unix(v, 0), nil
}

func (s *Server) installationJSON(in *installation, apiBase string) map[string]any {
	out := map[string]any{
		"id": in.id,
		"account": map[string]any{
			"login": in.account, "id": in.accountID, "type": in.accountType,
			"url": apiBase + "/users/" + in.account,
		},
		"app_id":               in.appID,
		"target_type":          in.accountType,
		"target_id":            in.accountID,
		"repository_selection": "all",
		"access_tokens_url":    fmt.Sprintf("%s/app/installations/%d/access_tokens", apiBase, in.id),
		"repositories_url":     apiBase + "/installation/repositories",
		"html_url":             fmt.Sprintf("%s/organizations/%s/settings/installations/%d", s.htmlURL, in.account, in.id),
		"permissions":          map[string]string{"contents": "read", "metadata": "read"},
		"events":               []string{"push", "release", "create", "delete", "repository"},
		"suspended_at":         nil,
	}
	if in.suspended {
		out["suspended_at"] = s.now().UTC().Truncate(time.Second).Format(time.RFC3339)
	}
	return out
}

func randomToken(n int) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}
