package oidc

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/skillreg/skillreg/jsonbound"
)

const (
	defaultIntrospectionTTL = 30 * time.Second
	// maxIntrospectionCache bounds the cached introspection answers.
	maxIntrospectionCache = 4096
)

// claimsOf picks the Claims out of a validated token's (or an introspection
// answer's) members.
func (v *Verifier) claimsOf(m map[string]any) (Claims, error) {
	c := Claims{
		Issuer:  str(m["iss"]),
		Subject: str(m["sub"]),
		Email:   str(m["email"]),
	}
	if c.Subject == "" {
		return Claims{}, refuse("no subject (sub)")
	}
	switch ev := m["email_verified"].(type) {
	case bool:
		c.EmailVerified = ev
	case string: // some providers send "true"
		c.EmailVerified = ev == "true"
	}
	var ok bool
	if c.Groups, ok = strs(lookup(m, v.groupsClaim), false); !ok {
		return Claims{}, refuse("the groups claim is not a list of strings, or too long")
	}
	scope, has := m["scope"]
	if !has {
		scope = m["scp"]
	}
	if c.Scopes, ok = strs(scope, true); !ok {
		return Claims{}, refuse("scope is not a string or a list of strings, or too long")
	}
	c.ClientID = str(m["client_id"])
	if c.ClientID == "" {
		c.ClientID = str(m["azp"])
	}
	if exp, ok := number(m["exp"]); ok {
		sec, frac := math.Modf(exp)
		c.Expiry = time.Unix(int64(sec), int64(frac*1e9)).UTC()
	}
	return c, nil
}

// lookup finds a claim by its name, or, when no member has that name and it
// holds dots, by walking nested objects ("realm_access.roles"): names with
// dots such as "https://example.com/groups" are looked up whole first.
func lookup(m map[string]any, name string) any {
	if v, ok := m[name]; ok {
		return v
	}
	parts := strings.Split(name, ".")
	if len(parts) < 2 {
		return nil
	}
	var cur any = m
	for _, p := range parts {
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = obj[p]
	}
	return cur
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// strs reads a list of strings, or one string (split on spaces when split
// is set, as "scope" is). Absent is an empty list; another type, or more
// than maxGroups values, is not ok.
func strs(v any, split bool) ([]string, bool) {
	switch x := v.(type) {
	case nil:
		return nil, true
	case string:
		if !split {
			if x == "" {
				return nil, true
			}
			return []string{x}, true
		}
		f := strings.Fields(x)
		return f, len(f) <= maxGroups
	case []any:
		if len(x) > maxGroups {
			return nil, false
		}
		out := make([]string, 0, len(x))
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				return nil, false
			}
			out = append(out, s)
		}
		return out, true
	}
	return nil, false
}

func number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, !math.IsNaN(x) && !math.IsInf(x, 0)
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}

// introspect asks the provider whether an opaque token is active (RFC
// 7662), and checks the answer as a JWT's claims would be: issuer (when
// given), audience (required: RFC 8707 tokens for another resource are
// refused), exp and nbf with the skew.
func (v *Verifier) introspect(ctx context.Context, raw string) (Claims, error) {
	sum := sha256.Sum256([]byte(raw))
	now := v.now()
	if c, ok := v.introC.get(sum, now); ok {
		return c, nil
	}
	endpoint := v.intro.URL
	if endpoint == "" {
		m, err := v.metadata(ctx, false)
		if err != nil {
			return Claims{}, err
		}
		if endpoint = m.IntrospectionEndpoint; endpoint == "" {
			return Claims{}, unavailableErr("introspection", fmt.Errorf("the provider publishes no introspection_endpoint and none is configured"))
		}
	}
	ctx, cancel := context.WithTimeout(ctx, v.fetchTimeout)
	defer cancel()
	form := url.Values{"token": {raw}, "token_type_hint": {"access_token"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return Claims{}, unavailableErr("introspection", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	// RFC 6749 section 2.3.1: both are form-encoded before basic auth.
	req.SetBasicAuth(url.QueryEscape(v.intro.ClientID), url.QueryEscape(v.intro.ClientSecret))
	body, err := v.do(req, maxIntrospectionBytes)
	if err != nil {
		return Claims{}, unavailableErr("introspection", err)
	}
	m, err := decodeIntrospection(body)
	if err != nil {
		return Claims{}, unavailableErr("introspection", err)
	}
	c, err := v.checkIntrospection(m, now)
	if err != nil {
		return Claims{}, err
	}
	if ttl := v.intro.CacheTTL; ttl > 0 {
		until := now.Add(ttl)
		if !c.Expiry.IsZero() && c.Expiry.Before(until) {
			until = c.Expiry
		}
		v.introC.put(sum, c, until, now)
	}
	return c, nil
}

// decodeIntrospection decodes an introspection answer: a JSON object.
func decodeIntrospection(body []byte) (map[string]any, error) {
	if err := jsonbound.Check(body, jsonLimits); err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if m == nil {
		return nil, fmt.Errorf("decode: not an object")
	}
	return m, nil
}

func (v *Verifier) checkIntrospection(m map[string]any, now time.Time) (Claims, error) {
	if active, _ := m["active"].(bool); !active {
		return Claims{}, refuse("inactive at introspection")
	}
	if iss, ok := m["iss"]; ok && iss != v.issuer {
		return Claims{}, refuse("wrong issuer")
	}
	aud, ok := strs(m["aud"], false)
	if !ok || !slices.Contains(aud, v.audience) {
		return Claims{}, refuse("wrong audience")
	}
	if exp, ok := number(m["exp"]); ok && now.After(unix(exp).Add(Skew)) {
		return Claims{}, refuse("expired")
	}
	if nbf, ok := number(m["nbf"]); ok && now.Add(Skew).Before(unix(nbf)) {
		return Claims{}, refuse("not valid yet (nbf)")
	}
	c, err := v.claimsOf(m)
	if err != nil {
		return Claims{}, err
	}
	if c.Issuer == "" {
		c.Issuer = v.issuer
	}
	return c, nil
}

func unix(f float64) time.Time {
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9))
}

// introCache holds active introspection answers by the token's SHA-256
// (never the token), each until its deadline.
type introCache struct {
	mu sync.Mutex
	m  map[[32]byte]introEntry
}

type introEntry struct {
	c     Claims
	until time.Time
}

func (ic *introCache) get(k [32]byte, now time.Time) (Claims, bool) {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	e, ok := ic.m[k]
	if !ok || !now.Before(e.until) {
		return Claims{}, false
	}
	return e.c, true
}

func (ic *introCache) put(k [32]byte, c Claims, until, now time.Time) {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	if ic.m == nil {
		ic.m = map[[32]byte]introEntry{}
	}
	if len(ic.m) >= maxIntrospectionCache {
		for k, e := range ic.m {
			if !now.Before(e.until) {
				delete(ic.m, k)
			}
		}
		if len(ic.m) >= maxIntrospectionCache {
			clear(ic.m)
		}
	}
	ic.m[k] = introEntry{c: c, until: until}
}
