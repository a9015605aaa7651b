package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/skillreg/skillreg/config"
	"github.com/skillreg/skillreg/ghapp"
	"github.com/skillreg/skillreg/gitref"
	"github.com/skillreg/skillreg/gitstore"
	"github.com/skillreg/skillreg/redact"
)

const (
	// maxAppKeyBytes bounds the private key file (GitHub's PEM is under
	// 2 KiB).
	maxAppKeyBytes = 64 << 10
	// appTokenTimeout bounds finding an installation and minting its
	// token for a sync (two requests at most, each bounded by
	// ghapp.DefaultTimeout).
	appTokenTimeout = 2*ghapp.DefaultTimeout + 5*time.Second
	// appTokenID prefixes the TokenID of a git source whose credential is
	// the App's: a change of App (or of github.token_env behind it)
	// changes the source.
	appTokenID = "github-app:"
)

// newApp builds the GitHub App of github.app, or nil without one. The key
// file is read here (once: github.app changes need a restart); the key,
// and every token the App mints, are given to the scrubber before anything
// can echo them. now is the App's clock (nil: time.Now).
func newApp(cfg *config.Config, log *slog.Logger, secrets *redact.Set, now func() time.Time) (*ghapp.App, error) {
	ac := cfg.GitHub.App
	if ac == nil {
		return nil, nil
	}
	f, err := os.Open(ac.PrivateKeyFile)
	if err != nil {
		return nil, fmt.Errorf("github.app.private_key_file: %w", err)
	}
	defer f.Close()
	if info, err := f.Stat(); err == nil && info.Mode().Perm()&0o077 != 0 {
		log.Warn("the GitHub App's private key file may be read by others; chmod 600 it",
			"file", ac.PrivateKeyFile, "mode", info.Mode().Perm().String())
	}
	key, err := io.ReadAll(io.LimitReader(f, maxAppKeyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("github.app.private_key_file: %w", err)
	}
	if len(key) > maxAppKeyBytes {
		return nil, fmt.Errorf("github.app.private_key_file: %s is over %d bytes; it is not a GitHub App key", ac.PrivateKeyFile, maxAppKeyBytes)
	}
	secrets.Add(strings.TrimSpace(string(key)))
	if env := cfg.GitHub.TokenEnv; env != "" {
		// The fallback credential behind the App's (see githubToken).
		secrets.AddBasic(gitstore.TokenUser, strings.TrimSpace(os.Getenv(env)))
	}
	app, err := ghapp.New(ghapp.Config{
		APIURL:         cfg.GitHub.APIURL,
		AppID:          ac.AppID,
		PrivateKey:     key,
		InstallationID: ac.InstallationID,
		Logger:         log,
		Now:            now,
		// Each minted token is known to the scrubber before git or the
		// Releases API sends it anywhere.
		OnToken: func(tok string) { secrets.AddBasic(gitstore.TokenUser, tok) },
	})
	if err != nil {
		return nil, fmt.Errorf("github.app: %w", err)
	}
	clear(key)
	log.Info("GitHub App configured", "app_id", ac.AppID, "installation_id", ac.InstallationID)
	return app, nil
}

// githubToken is the git credential of a repository on the GitHub host
// without its own auth: the App's installation token for the repository's
// owner when the App is installed there, else github.token_env's token,
// else none (a public repository).
//
// refused, set only with the App, drops a token git was refused
// (catalog.GitSource.Refused).
func githubToken(app *ghapp.App, repo gitref.Repo, tokenEnv string) (token func() (string, error), id string, refused func(string)) {
	fallback := func() (string, error) {
		if tokenEnv == "" {
			return "", nil
		}
		return strings.TrimSpace(os.Getenv(tokenEnv)), nil
	}
	if u := repo.URL(); !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://") {
		return nil, "", nil // tokens are HTTPS credentials (an SSH remote has its own auth)
	}
	owner, _, ok := repo.OwnerName()
	if app == nil || !ok {
		if tokenEnv == "" {
			return nil, "", nil
		}
		return fallback, "github:" + tokenEnv, nil
	}
	id = appTokenID + strconv.FormatInt(app.ID(), 10)
	if tokenEnv != "" {
		id += ",github:" + tokenEnv
	}
	token = func() (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), appTokenTimeout)
		defer cancel()
		tok, err := app.Token(ctx, owner)
		switch {
		case err == nil:
			return tok, nil
		case errors.Is(err, ghapp.ErrNotInstalled):
			return fallback()
		}
		return "", err // "GitHub App 123: mint a token ...: 502 Bad Gateway ..."
	}
	// A token git was refused (revoked, or this clock behind GitHub's) is
	// dropped if it is still the installation's, so the registry's one
	// retry presents a fresh one. A fallback token is not the App's:
	// Invalidate leaves it, and Token returns it again (no retry).
	refused = func(t string) { app.Invalidate(owner, t) }
	return token, id, refused
}

// isAppToken reports whether a git source's TokenID says its credential is
// the App's: reading it may ask GitHub, so nothing reads it but a sync.
func isAppToken(tokenID string) bool { return strings.HasPrefix(tokenID, appTokenID) }

// ownerClients returns, per owner, the REST client of the credential
// precedence for the GitHub API: the App's installation token where the App
// is installed on owner, else the fallback token (github.token_env's), else
// none. The Releases API asks through it (appReleases), and discovery's
// listings can (discovery.Options.Client has this shape).
func ownerClients(app *ghapp.App, fallback string) func(owner string) *http.Client {
	return func(owner string) *http.Client {
		return &http.Client{Transport: &ownerTransport{app: app, owner: owner, fallback: fallback, base: http.DefaultTransport}}
	}
}

// ownerTransport is ownerClients' RoundTripper for one owner.
type ownerTransport struct {
	app      *ghapp.App
	owner    string
	fallback string
	base     http.RoundTripper
}

func (t *ownerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.app != nil && t.owner != "" {
		resp, err := t.app.Client(t.owner).Transport.RoundTrip(req)
		if !errors.Is(err, ghapp.ErrNotInstalled) {
			return resp, err
		}
	}
	r := req.Clone(req.Context())
	if t.fallback != "" {
		r.Header.Set("Authorization", "Bearer "+t.fallback)
	}
	return t.base.RoundTrip(r)
}

// appReleases is the Releases API's transport with a GitHub App: each
// request goes through the owner's client of ownerClients, the owner read
// from the request's path ("/repos/{owner}/...").
type appReleases struct {
	clients  func(owner string) *http.Client
	basePath string // the API URL's path, "/" or "/api/v3/"
}

func newAppReleases(app *ghapp.App, apiURL, token string) *http.Client {
	basePath := "/"
	if u, err := url.Parse(apiURL); err == nil && u.Path != "" {
		basePath = strings.TrimSuffix(u.Path, "/") + "/"
	}
	return &http.Client{Transport: &appReleases{clients: ownerClients(app, token), basePath: basePath}}
}

func (t *appReleases) RoundTrip(req *http.Request) (*http.Response, error) {
	return t.clients(t.owner(req.URL.Path)).Transport.RoundTrip(req)
}

// owner is the repository owner of an API path ("/repos/{owner}/..."), or
// "".
func (t *appReleases) owner(path string) string {
	rest, ok := strings.CutPrefix(path, t.basePath)
	if !ok {
		return ""
	}
	parts := strings.SplitN(rest, "/", 3)
	if len(parts) < 3 || parts[0] != "repos" {
		return ""
	}
	return parts[1]
}
