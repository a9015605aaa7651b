package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"strings"

	"github.com/skillreg/skillreg/access"
	"github.com/skillreg/skillreg/config"
	"github.com/skillreg/skillreg/oidc"
)

// oidcRuntime is what the oidc section makes: the verifier of the
// provider's tokens, which the gate and the web sign-in share, and the
// secrets read for it.
type oidcRuntime struct {
	verifier *oidc.Verifier
	// key names the settings the verifier was made of: a reload that
	// changes none of them keeps the verifier (and its cached keys).
	key string
	// stop ends the verifier's background discovery (nil until started).
	stop context.CancelFunc
	// clientSecret is the web catalog's client secret (oidc.client_secret_env;
	// "" for a public client).
	clientSecret string
	// secrets are the values the log scrubber must learn.
	secrets []string
}

// buildOIDC makes the oidc runtime of cfg (nil without oidc), reusing the
// running one's verifier when its settings did not change. It starts
// nothing: startOIDC does, once the runtime is installed.
func (d *Daemon) buildOIDC(cfg *config.Config) (*oidcRuntime, error) {
	o := cfg.OIDC
	if o == nil {
		return nil, nil
	}
	or := &oidcRuntime{}
	vc := oidc.Config{Issuer: o.Issuer, Audience: o.Audience, GroupsClaim: o.GroupsClaim, Logger: d.log}
	if !d.has.http {
		// sync and mcp --stdio read no HTTP setting and ask no provider:
		// a verifier that is never started only makes the gate require a
		// credential (stdio carries none, so it shows nothing).
		v, err := oidc.New(vc)
		if err != nil {
			return nil, fmt.Errorf("oidc: %w", err)
		}
		or.verifier = v
		return or, nil
	}
	if in := o.Introspection; in != nil {
		secret, err := secretFromEnv("oidc.introspection.client_secret_env", in.ClientSecretEnv)
		if err != nil {
			return nil, err
		}
		or.secrets = append(or.secrets, secret)
		vc.Introspection = &oidc.IntrospectionConfig{URL: in.URL, ClientID: in.ClientID, ClientSecret: secret}
	}
	if o.ClientSecretEnv != "" {
		secret, err := secretFromEnv("oidc.client_secret_env", o.ClientSecretEnv)
		if err != nil {
			return nil, err
		}
		or.clientSecret = secret
		or.secrets = append(or.secrets, secret)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%q %q %q", vc.Issuer, vc.Audience, vc.GroupsClaim)
	if in := vc.Introspection; in != nil {
		fmt.Fprintf(h, " %q %q %q", in.URL, in.ClientID, in.ClientSecret)
	}
	or.key = fmt.Sprintf("%x", h.Sum(nil))
	if old := d.running(); old != nil && old.oidc != nil && old.oidc.key == or.key {
		or.verifier, or.stop = old.oidc.verifier, old.oidc.stop
		return or, nil
	}
	v, err := oidc.New(vc)
	if err != nil {
		return nil, fmt.Errorf("oidc: %w", err)
	}
	or.verifier = v
	return or, nil
}

// secretFromEnv reads a secret from the environment variable the key
// names; empty is an error (a typo must not pass as "no secret").
func secretFromEnv(key, env string) (string, error) {
	v := strings.TrimSpace(os.Getenv(env))
	if v == "" {
		return "", fmt.Errorf("%s: the environment variable %s is empty", key, env)
	}
	return v, nil
}

// startOIDC starts the installed runtime's verifier fetching discovery
// and the keys in the background (serving daemons only: stdio and sync
// ask no provider), unless a previous runtime already did.
func (d *Daemon) startOIDC(rt *runtimeConfig) {
	or := rt.oidc
	if or == nil || or.stop != nil || !d.has.http {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	or.stop = cancel
	or.verifier.Start(ctx)
}

// retireOIDC stops a replaced runtime's verifier unless rt kept it.
func retireOIDC(old, rt *runtimeConfig) {
	if old.oidc == nil || old.oidc.stop == nil {
		return
	}
	if rt != nil && rt.oidc != nil && rt.oidc.verifier == old.oidc.verifier {
		return
	}
	old.oidc.stop()
}

// newGate builds the gate of cfg: its clients, its provider's verifier
// and access rules, spending the one failed-attempt budget of every
// surface.
func (d *Daemon) newGate(cfg *config.Config, clients *access.Clients, or *oidcRuntime) *access.Gate {
	o := access.GateOptions{
		Clients:   clients,
		Limiter:   d.authLimiter,
		OnFailure: d.metrics.AuthFailure,
		Logger:    d.log,
		Members:   d.groupMembers,
	}
	if or != nil {
		o.Verifier = or.verifier
		o.Scopes = cfg.OIDC.Scopes
		o.Resource = cfg.MCPResource()
		o.AuthorizationServers = []string{cfg.OIDC.Issuer}
		o.ResourceMetadataURL = cfg.ResourceMetadataURL()
		for _, r := range cfg.Access {
			o.Rules = append(o.Rules, access.Rule{Groups: r.Groups, Subjects: r.Subjects, Emails: r.Emails, Sources: r.Sources})
		}
	}
	return access.NewGate(o)
}

// currentGate is the running configuration's gate: every surface asks it
// who a request's credential belongs to.
func (d *Daemon) currentGate() *access.Gate { return d.running().gate }
