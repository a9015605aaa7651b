package ghapp

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/skillreg/skillreg/jsonbound"
	"github.com/skillreg/skillreg/redact"
)

const (
	// maxBodyBytes bounds an answer to the App's own requests. A token
	// answer lists the installation's repositories when it was granted a
	// selection of them (some hundred bytes of JSON each, a few thousand at
	// most); an installation is a few kilobytes.
	maxBodyBytes = 8 << 20
	// maxBodyDepth and maxBodyValues bound its JSON before the decoder
	// walks it: GitHub's nest five or six levels.
	maxBodyDepth  = 32
	maxBodyValues = 1 << 20
	// maxMessage bounds GitHub's error message as shown in an error.
	maxMessage = 200
)

// installationJSON is the part of GitHub's installation object the App
// reads.
type installationJSON struct {
	ID          int64   `json:"id"`
	SuspendedAt *string `json:"suspended_at"`
}

// tokenJSON is the part of GitHub's installation token answer the App
// reads.
type tokenJSON struct {
	Token     string `json:"token"`
	ExpiresAt string `json:"expires_at"`
}

// errorJSON is GitHub's error answer.
type errorJSON struct {
	Message string `json:"message"`
}

// jwt signs the App's JSON Web Token: RS256, iss the App's id, iat a minute
// ago, exp nine minutes ahead, whole seconds (GitHub refuses fractions).
func (a *App) jwt() (string, error) {
	now := a.now().Truncate(time.Second)
	claims, err := json.Marshal(struct {
		IssuedAt  int64  `json:"iat"`
		ExpiresAt int64  `json:"exp"`
		Issuer    string `json:"iss"`
	}{now.Add(-jwtBackdate).Unix(), now.Add(jwtLifetime).Unix(), strconv.FormatInt(a.id, 10)})
	if err != nil {
		return "", err
	}
	enc := base64.RawURLEncoding
	signing := enc.EncodeToString([]byte(`{"alg":"RS256","typ":"JWT"}`)) + "." + enc.EncodeToString(claims)
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, a.key, crypto.SHA256, sum[:])
	if err != nil {
		return "", fmt.Errorf("sign the App's JWT: %w", err)
	}
	return signing + "." + enc.EncodeToString(sig), nil
}

// appRequest sends one request authenticated as the App (its JWT) and
// decodes a 2xx answer into out. It returns the answer's status (0 when
// there was none) and an error for anything but 2xx, wrapping ErrRefused,
// ErrRateLimited or ErrUnavailable.
func (a *App) appRequest(ctx context.Context, method string, u *url.URL, out any) (int, error) {
	what := method + " " + u.Path
	a.mu.Lock()
	gate := a.gate
	a.mu.Unlock()
	if now := a.now(); now.Before(gate) {
		return 0, fmt.Errorf("%s: GitHub asked to wait until %s: %w", what, gate.UTC().Format(time.RFC3339), ErrRateLimited)
	}
	jwt, err := a.jwt()
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	req.Header.Set("Authorization", "Bearer "+jwt)
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	req.Header.Set("User-Agent", a.userAgent)
	resp, err := a.http.Do(req)
	if err != nil {
		// The URL is ours (no credentials); the error may still quote what
		// a proxy said, so it is scrubbed of the JWT.
		return 0, fmt.Errorf("%s: %s: %w", what, redact.New(jwt).String(errorText(err)), ErrUnavailable)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBodyBytes+1))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("%s: read the answer: %w", what, ErrUnavailable)
	}
	if len(body) > maxBodyBytes {
		return resp.StatusCode, fmt.Errorf("%s: answer over %d bytes: %w", what, maxBodyBytes, ErrUnavailable)
	}
	status := resp.StatusCode
	if status >= 200 && status < 300 {
		if err := decode(body, out); err != nil {
			return status, fmt.Errorf("%s: %w", what, err)
		}
		return status, nil
	}
	said := redact.Status(resp)
	if msg := message(body); msg != "" {
		said += ": " + redact.New(jwt).String(msg)
	}
	switch {
	case status == http.StatusUnauthorized:
		return status, fmt.Errorf("%s: %s: %w", what, said, ErrRefused)
	case status == http.StatusForbidden || status == http.StatusTooManyRequests:
		if until, ok := rateLimited(resp.Header, a.now()); ok {
			a.mu.Lock()
			if until.After(a.gate) {
				a.gate = until
			}
			a.mu.Unlock()
			return status, fmt.Errorf("%s: %s: %w", what, said, ErrRateLimited)
		}
	}
	return status, fmt.Errorf("%s: %s: %w", what, said, ErrUnavailable)
}

// decode reads a 2xx answer's JSON into out, once its bounds are checked.
func decode(body []byte, out any) error {
	if err := jsonbound.Check(body, jsonbound.Limits{MaxDepth: maxBodyDepth, MaxTokens: maxBodyValues}); err != nil {
		return fmt.Errorf("%w: %w", err, ErrUnavailable)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("malformed answer: %w", ErrUnavailable)
	}
	return nil
}

// message is GitHub's error message from an answer's body, sanitised (the
// remote chose it).
func message(body []byte) string {
	if jsonbound.Check(body, jsonbound.Limits{MaxDepth: maxBodyDepth, MaxTokens: 1 << 12}) != nil {
		return ""
	}
	var e errorJSON
	if json.Unmarshal(bytes.TrimSpace(body), &e) != nil {
		return ""
	}
	return redact.Remote(e.Message, maxMessage)
}

// rateLimited reads GitHub's rate-limit signals: Retry-After (secondary
// limits) or X-RateLimit-Remaining 0 with X-RateLimit-Reset (primary). It
// returns until when no request should be sent, capped at maxRateWait.
func rateLimited(h http.Header, now time.Time) (time.Time, bool) {
	var until time.Time
	if s, err := strconv.ParseInt(strings.TrimSpace(h.Get("Retry-After")), 10, 64); err == nil && s >= 0 {
		until = now.Add(time.Duration(min(s, int64(maxRateWait/time.Second))) * time.Second)
	} else if strings.TrimSpace(h.Get("X-RateLimit-Remaining")) == "0" {
		until = now.Add(time.Minute) // GitHub's advice without a reset
		if r, err := strconv.ParseInt(strings.TrimSpace(h.Get("X-RateLimit-Reset")), 10, 64); err == nil {
			until = time.Unix(r, 0)
		}
	} else {
		return time.Time{}, false
	}
	if until.After(now.Add(maxRateWait)) {
		until = now.Add(maxRateWait)
	}
	return until, true
}

// errorText is a transport error's message without the URL that
// url.Error repeats (it is in the message already).
func errorText(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return redact.Remote(err.Error(), 300)
}
