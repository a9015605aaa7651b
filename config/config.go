// Package config reads skillreg's YAML configuration strictly: unknown keys,
// duplicate sources and impossible combinations are errors that name the
// key and its line. It only describes; cmd turns it into running objects.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/skillreg/skillreg/gitref"
)

// Config is the whole configuration file.
type Config struct {
	// Listen is the HTTP address (default 127.0.0.1:8080).
	Listen string `yaml:"listen"`
	// DataDir holds the store and git object stores.
	DataDir string      `yaml:"data_dir"`
	Log     Log         `yaml:"log"`
	MCP     MCP         `yaml:"mcp"`
	GitHub  GitHub      `yaml:"github"`
	Sources []Source    `yaml:"sources"`
	Meta    []SkillMeta `yaml:"skill_meta"`
	Clients []Client    `yaml:"clients"`
	// OIDC and Access: the organisation's provider and who of its
	// identities sees which sources (see oidc.go).
	OIDC   *OIDC        `yaml:"oidc"`
	Access []AccessRule `yaml:"access"`
	HTTP   HTTP         `yaml:"http"`
	// Publishing to installers: see the Publish block at the end.
	PublicURL   string      `yaml:"public_url"`
	Marketplace Marketplace `yaml:"marketplace"`
	Cache       Cache       `yaml:"cache"`
	TLS         TLS         `yaml:"tls"`
	// Peers are the replicas webhook deliveries are relayed to (see
	// peers.go); PeerAddrs is that list as Validate parsed it.
	Peers           []string   `yaml:"peers"`
	PeersSecretEnv  string     `yaml:"peers_secret_env"`
	PeersSecretFile string     `yaml:"peers_secret_file"`
	PeersCAFile     string     `yaml:"peers_ca_file"`
	PeerAddrs       []PeerAddr `yaml:"-"`

	// Path is the file the configuration was read from ("" for the
	// embedded default).
	Path string `yaml:"-"`
}

// Log configures logging.
type Log struct {
	Level  string `yaml:"level"`  // debug, info, warn, error (default info)
	Format string `yaml:"format"` // json, text or auto (default auto: text on a terminal)
}

// MCP configures the MCP endpoint.
type MCP struct {
	// CacheTTL is the ttlMs hint of cacheable results (default 30s).
	CacheTTL Duration `yaml:"cache_ttl"`
	// FastPath turns the MCP fast path (mcp/fastpath: the SDK workarounds
	// that answer skills/list and resources/read of skill files without
	// the SDK's per-request machinery) on or off; the answers are the
	// same either way. Default true; set at load (never nil after it).
	FastPath *bool `yaml:"fast_path"`
}

// HTTP configures the HTTP front door: connection caps, body pacing, which
// Host and Origin headers are accepted, and who may read /metrics.
type HTTP struct {
	// MaxConnections caps open connections (default: the soft
	// RLIMIT_NOFILE minus 256).
	MaxConnections int `yaml:"max_connections"`
	// MaxConnectionsPerIP caps one client address's connections (default
	// 256; 0 turns the cap off).
	MaxConnectionsPerIP *int `yaml:"max_connections_per_ip"`
	// TrustedProxies are the CIDRs of reverse proxies whose
	// X-Forwarded-For is believed.
	TrustedProxies []string `yaml:"trusted_proxies"`
	// AllowedHosts are the Host names accepted on every endpoint (default
	// see DefaultAllowedHosts); IP literals and loopback names always pass.
	AllowedHosts []string `yaml:"allowed_hosts"`
	// AllowedOrigins are the Origins accepted on /mcp (default none; a
	// request without Origin passes).
	AllowedOrigins []string `yaml:"allowed_origins"`
	// MetricsNetworks are the CIDRs that may read /metrics and the full
	// /readyz without a token when clients are configured (default
	// loopback).
	MetricsNetworks []string `yaml:"metrics_networks"`
	// HeaderTimeout bounds the request line and headers (default 10s).
	HeaderTimeout Duration `yaml:"header_timeout"`
	// BodyGrace is how long a body may take before body_min_rate applies
	// (default 10s).
	BodyGrace Duration `yaml:"body_grace"`
	// BodyMinRate is the slowest a body may arrive after body_grace, in
	// bytes per second (default 1024).
	BodyMinRate int64 `yaml:"body_min_rate"`
	// IdleTimeout closes a keep-alive connection with no request for this
	// long (default 2m).
	IdleTimeout Duration `yaml:"idle_timeout"`

	// Parsed at load, from the lists above.
	TrustedProxyNets []netip.Prefix `yaml:"-"`
	MetricsNets      []netip.Prefix `yaml:"-"`
}

// GitHub configures GitHub access: releases lookups, tokens for sources on
// the GitHub host, and webhook secrets.
type GitHub struct {
	APIURL            string `yaml:"api_url"`
	TokenEnv          string `yaml:"token_env"`
	WebhookSecretEnv  string `yaml:"webhook_secret_env"`
	WebhookSecretFile string `yaml:"webhook_secret_file"`
	App               *App   `yaml:"app"` // a GitHub App (app.go)
	// DiscoveryPoll is how often each github: template's owner is listed
	// again (default DefaultDiscoveryPoll; see discovery.go).
	DiscoveryPoll Duration `yaml:"discovery_poll"`
}

// WebHost is the lower-case web host of the GitHub API URL: github.com for
// the public API (api.github.com), the Enterprise host otherwise. Sources on
// it get github.token_env, and webhooks read repository.full_name on it.
func (g GitHub) WebHost() string {
	h := gitref.HostOf(g.APIURL)
	if h == "api.github.com" {
		return "github.com"
	}
	return h
}

// Source is one place skills come from: a local directory or a git
// repository.
type Source struct {
	Name string `yaml:"name"`
	Dir  string `yaml:"dir"`
	URL  string `yaml:"url"`
	// GitHub makes the source a template of discovered sources (see
	// discovery.go).
	GitHub *GitHubSource `yaml:"github"`
	Ref    *Ref          `yaml:"ref"`
	Path   string        `yaml:"path"`
	// Poll is how often to look for changes (default 2s for dir, 5m for
	// git; 0 disables).
	Poll    *Duration `yaml:"poll"`
	Timeout Duration  `yaml:"timeout"`
	Auth    *Auth     `yaml:"auth"`
	// Public makes the source's skills visible without a token when
	// access control is on (for installers that cannot send one).
	Public bool `yaml:"public"`
	// Verify requires signed commits or tags (git sources; config/verify.go).
	Verify *Verify `yaml:"verify"`

	// Repo and Pin are URL and Ref of a git source as Validate parsed
	// them: the one place they are checked, so a bad pin fails at load
	// and at reload, never first at a sync.
	Repo gitref.Repo `yaml:"-"`
	Pin  gitref.Pin  `yaml:"-"`

	Line int `yaml:"-"`
}

// Ref pins a git source; exactly one field is set.
type Ref struct {
	Branch  string `yaml:"branch"`
	Tag     string `yaml:"tag"`
	Commit  string `yaml:"commit"`
	Semver  string `yaml:"semver"`
	Release string `yaml:"release"`
}

// Auth says where a git source's credentials come from: for https, a
// token (exactly one of TokenEnv and TokenFile); for ssh, the rest (see
// ssh.go).
type Auth struct {
	TokenEnv              string `yaml:"token_env"`
	TokenFile             string `yaml:"token_file"`
	SSHKeyFile            string `yaml:"ssh_key_file"`
	SSHPassphraseEnv      string `yaml:"ssh_passphrase_env"`
	KnownHostsFile        string `yaml:"known_hosts_file"`
	InsecureIgnoreHostKey bool   `yaml:"insecure_ignore_host_key"`
}

// SkillMeta configures one skill-meta tool.
type SkillMeta struct {
	Skill        string            `yaml:"skill"`
	Tool         string            `yaml:"tool"`
	Repo         string            `yaml:"repo"`
	UpdateDocURL string            `yaml:"update_doc_url"`
	Recipes      map[string]Recipe `yaml:"recipes"`
	CacheTTL     Duration          `yaml:"cache_ttl"`
}

// Recipe is how a client updates a skill.
type Recipe struct {
	Command string `yaml:"command"`
	Kind    string `yaml:"kind"` // shell or manual_ui
}

// Client is one caller allowed on /mcp.
type Client struct {
	Name        string   `yaml:"name"`
	TokenSHA256 string   `yaml:"token_sha256"`
	Sources     []string `yaml:"sources"` // source names, or ["*"]
}

// Duration is a time.Duration written as "30s", "5m" or 0.
type Duration time.Duration

// UnmarshalYAML reads a Go duration string, or the number 0.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: a duration such as 30s or 5m", n.Line)
	}
	if n.Value == "0" {
		*d = 0
		return nil
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil || v < 0 {
		return fmt.Errorf("line %d: %q is not a duration such as 30s or 5m", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// D returns the duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// DefaultFastPath is mcp.fast_path's default: the fast path on (mcp's
// DefaultFastPath).
const DefaultFastPath = true

// Defaults.
const (
	DefaultListen    = "127.0.0.1:8080"
	DefaultCacheTTL  = 30 * time.Second
	DefaultDirPoll   = 2 * time.Second
	DefaultGitPoll   = 5 * time.Minute
	DefaultTimeout   = 60 * time.Second
	DefaultAPIURL    = "https://api.github.com/"
	DefaultSecretEnv = "SKILLREG_WEBHOOK_SECRET"

	DefaultMaxConnectionsPerIP = 256
	DefaultHeaderTimeout       = 10 * time.Second
	DefaultBodyGrace           = 10 * time.Second
	DefaultBodyMinRate         = 1024
	DefaultIdleTimeout         = 2 * time.Minute
)

// DefaultMetricsNetworks may read /metrics without a token: loopback.
var DefaultMetricsNetworks = []string{"127.0.0.0/8", "::1/128"}

// LoopbackHosts are the names that always pass the Host check: a page can
// only be served under them from the machine itself.
var LoopbackHosts = []string{"localhost", "*.localhost"}

// DefaultAllowedHosts is the one place the default of http.allowed_hosts
// is computed: the loopback names, the listen address's host when it is
// a name, and public_url's host. IP literals pass the check whatever the
// list says, so they are not listed.
func (c *Config) DefaultAllowedHosts() []string {
	out := append([]string(nil), LoopbackHosts...)
	if host, _, err := net.SplitHostPort(c.Listen); err == nil && host != "" {
		if _, err := netip.ParseAddr(host); err != nil {
			out = append(out, strings.ToLower(host))
		}
	}
	return append(out, c.publicHost()...)
}

// AllowedHosts is http.allowed_hosts, or its default when not set;
// public_url's host is always allowed.
func (c *Config) AllowedHosts() []string {
	if len(c.HTTP.AllowedHosts) > 0 {
		return append(slices.Clip(c.HTTP.AllowedHosts), c.publicHost()...)
	}
	return c.DefaultAllowedHosts()
}

// publicHost is public_url's host name, if any.
func (c *Config) publicHost() []string {
	if u, err := url.Parse(c.PublicURL); err == nil && u.Hostname() != "" {
		return []string{strings.ToLower(u.Hostname())}
	}
	return nil
}

// MaxFileBytes bounds a configuration file.
const MaxFileBytes = 1 << 20

// Load reads and validates a configuration file. Relative directories are
// resolved against the file's directory.
func Load(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("config %s: larger than %d bytes", path, MaxFileBytes)
	}
	c, err := Parse(data, filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	c.Path = path
	return c, nil
}

var fieldNotFound = regexp.MustCompile(`line (\d+): field (\S+) not found in type \S+`)

// Parse reads a configuration from YAML; base resolves relative
// directories.
func Parse(data []byte, base string) (*Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		msg = fieldNotFound.ReplaceAllString(msg, `line $1: unknown key "$2"`)
		return nil, errors.New(msg)
	}
	// Line numbers of the sources, for messages.
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err == nil && len(doc.Content) == 1 {
		// "oidc:" with nothing under it (every key commented out, say)
		// must not turn access control off without a word.
		if n := mapValue(doc.Content[0], "oidc"); n != nil && c.OIDC == nil {
			return nil, fmt.Errorf("line %d: oidc: empty; set oidc.issuer, or remove the key", n.Line)
		}
		if srcs := mapValue(doc.Content[0], "sources"); srcs != nil && srcs.Kind == yaml.SequenceNode {
			for i, n := range srcs.Content {
				if i < len(c.Sources) {
					c.Sources[i].Line = n.Line
				}
			}
		}
	}
	for i := range c.Sources {
		if s := &c.Sources[i]; s.Dir != "" && !filepath.IsAbs(s.Dir) && base != "" {
			s.Dir = filepath.Join(base, s.Dir)
		}
	}
	c.applyDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

func mapValue(n *yaml.Node, key string) *yaml.Node {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

func (c *Config) applyDefaults() {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.MCP.CacheTTL == 0 {
		c.MCP.CacheTTL = Duration(DefaultCacheTTL)
	}
	if c.MCP.FastPath == nil {
		on := DefaultFastPath
		c.MCP.FastPath = &on
	}
	if c.GitHub.APIURL == "" {
		c.GitHub.APIURL = DefaultAPIURL
	}
	if c.GitHub.WebhookSecretEnv == "" {
		c.GitHub.WebhookSecretEnv = DefaultSecretEnv
	}
	if c.Log.Level == "" {
		c.Log.Level = "info"
	}
	if c.Log.Format == "" {
		c.Log.Format = "auto"
	}
	h := &c.HTTP
	if h.MaxConnectionsPerIP == nil {
		n := DefaultMaxConnectionsPerIP
		h.MaxConnectionsPerIP = &n
	}
	if h.MetricsNetworks == nil {
		h.MetricsNetworks = DefaultMetricsNetworks
	}
	if h.HeaderTimeout == 0 {
		h.HeaderTimeout = Duration(DefaultHeaderTimeout)
	}
	if h.BodyGrace == 0 {
		h.BodyGrace = Duration(DefaultBodyGrace)
	}
	if h.BodyMinRate == 0 {
		h.BodyMinRate = DefaultBodyMinRate
	}
	if h.IdleTimeout == 0 {
		h.IdleTimeout = Duration(DefaultIdleTimeout)
	}
	c.publishDefaults()
	c.oidcDefaults()
	for i := range c.Sources {
		s := &c.Sources[i]
		if s.Poll == nil {
			d := Duration(DefaultGitPoll)
			if s.Dir != "" {
				d = Duration(DefaultDirPoll)
			}
			s.Poll = &d
		}
		if s.Timeout == 0 {
			s.Timeout = Duration(DefaultTimeout)
		}
	}
}

var (
	sourceNameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]{0,62}[a-z0-9])?$`)
	repoRE       = regexp.MustCompile(`^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$`)
	sha256RE     = regexp.MustCompile(`^[0-9a-f]{64}$`)
	toolNameRE   = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
)

// Validate checks the configuration and names the offending key.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level: %q is not one of debug, info, warn, error", c.Log.Level)
	}
	switch c.Log.Format {
	case "auto", "json", "text":
	default:
		bad("log.format: %q is not one of auto, json, text", c.Log.Format)
	}
	if !strings.HasPrefix(c.GitHub.APIURL, "https://") && !strings.HasPrefix(c.GitHub.APIURL, "http://") {
		bad("github.api_url: %q is not an http(s) URL", c.GitHub.APIURL)
	}

	c.GitHub.App.validate(bad)
	errs = append(errs, c.HTTP.validate()...)

	seen := map[string]int{}
	for i := range c.Sources {
		s := &c.Sources[i]
		at := fmt.Sprintf("sources[%d]", i)
		if s.Line > 0 {
			at = fmt.Sprintf("line %d: sources[%d]", s.Line, i)
		}
		switch {
		case s.Name == "":
			bad("%s.name: required", at)
		case !sourceNameRE.MatchString(s.Name) || strings.Contains(s.Name, ".."):
			bad("%s.name: %q must be lowercase letters, digits, '-' and '.' (it becomes the URI authority)", at, s.Name)
		}
		if first, dup := seen[s.Name]; dup && s.Name != "" {
			bad("%s.name: %q is already the name of the source on line %d", at, s.Name, first)
		}
		seen[s.Name] = s.Line
		if s.GitHub != nil {
			c.validateDiscovery(at, s, bad)
			continue
		}
		switch {
		case s.Dir == "" && s.URL == "":
			bad("%s: set one of dir (a local directory), url (a git repository) and github (discovered repositories)", at)
		case s.Dir != "" && s.URL != "":
			bad("%s: set dir or url, not both", at)
		case s.Dir != "":
			if info, err := os.Stat(s.Dir); err != nil {
				bad("%s.dir: %v", at, err)
			} else if !info.IsDir() {
				bad("%s.dir: %s is not a directory", at, s.Dir)
			}
			if s.Ref != nil || s.Path != "" || s.Auth != nil {
				bad("%s: ref, path and auth apply to git sources (url) only", at)
			}
		default:
			var err error
			if s.Repo, err = parseGitURL(s.URL); err != nil {
				bad("%s.url: %v", at, err)
			}
			if s.Pin, err = s.Ref.pin(); err != nil {
				bad("%s.ref: %v", at, err)
			}
			if s.Path != "" {
				p := filepath.ToSlash(filepath.Clean(s.Path))
				if filepath.IsAbs(s.Path) || p == ".." || strings.HasPrefix(p, "../") {
					bad("%s.path: %q must be a directory inside the repository", at, s.Path)
				}
			}
			errs = append(errs, validateAuth(at, s)...)
		}
	}

	tools := map[string]bool{}
	for i, m := range c.Meta {
		at := fmt.Sprintf("skill_meta[%d]", i)
		if m.Skill == "" {
			bad("%s.skill: required", at)
		}
		if !repoRE.MatchString(m.Repo) {
			bad("%s.repo: %q must be owner/name", at, m.Repo)
		}
		tool := m.Tool
		if tool == "" {
			tool = m.Skill + "_skill_meta"
		}
		if !toolNameRE.MatchString(tool) {
			bad("%s.tool: %q is not a valid tool name", at, tool)
		}
		if tools[tool] {
			bad("%s.tool: %q is configured twice", at, tool)
		}
		tools[tool] = true
		if m.UpdateDocURL != "" && !strings.HasPrefix(m.UpdateDocURL, "https://") && !strings.HasPrefix(m.UpdateDocURL, "http://") {
			bad("%s.update_doc_url: %q is not an http(s) URL", at, m.UpdateDocURL)
		}
		for client, r := range m.Recipes {
			if r.Kind != "shell" && r.Kind != "manual_ui" {
				bad("%s.recipes.%s.kind: %q is not shell or manual_ui", at, client, r.Kind)
			}
			if r.Command == "" {
				bad("%s.recipes.%s.command: required", at, client)
			}
		}
	}

	c.validatePublish(bad)
	c.validateAccess(seen, bad)
	c.validateVerify(bad)
	c.validatePeers(bad)

	names := map[string]bool{}
	for i, cl := range c.Clients {
		at := fmt.Sprintf("clients[%d]", i)
		if cl.Name == "" {
			bad("%s.name: required", at)
		}
		if names[cl.Name] {
			bad("%s.name: %q is configured twice", at, cl.Name)
		}
		names[cl.Name] = true
		if !sha256RE.MatchString(cl.TokenSHA256) {
			bad("%s.token_sha256: must be 64 lowercase hex digits (skillreg token new %s prints one)", at, cl.Name)
		}
		if len(cl.Sources) == 0 {
			bad("%s.sources: list the sources this client may see, or [\"*\"]", at)
		}
		for _, s := range cl.Sources {
			if _, ok := seen[s]; !ok && s != "*" {
				bad("%s.sources: %q is not a configured source", at, s)
			}
		}
	}
	return errors.Join(errs...)
}

// validate checks the http section and parses its CIDRs.
func (h *HTTP) validate() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if h.MaxConnections < 0 {
		bad("http.max_connections: %d must be positive (or unset for the default)", h.MaxConnections)
	}
	if h.MaxConnectionsPerIP != nil && *h.MaxConnectionsPerIP < 0 {
		bad("http.max_connections_per_ip: %d must be 0 (off) or more", *h.MaxConnectionsPerIP)
	}
	if h.BodyMinRate < 0 {
		bad("http.body_min_rate: %d must be positive bytes per second", h.BodyMinRate)
	}
	var err error
	if h.TrustedProxyNets, err = parseCIDRs(h.TrustedProxies); err != nil {
		bad("http.trusted_proxies: %v", err)
	}
	if h.MetricsNets, err = parseCIDRs(h.MetricsNetworks); err != nil {
		bad("http.metrics_networks: %v", err)
	}
	for i, host := range h.AllowedHosts {
		if err := checkHostPattern(host); err != nil {
			bad("http.allowed_hosts[%d]: %v", i, err)
		}
	}
	for i, o := range h.AllowedOrigins {
		if err := checkOrigin(o); err != nil {
			bad("http.allowed_origins[%d]: %v", i, err)
		}
	}
	return errs
}

// parseCIDRs reads CIDRs; a bare address means just that address.
func parseCIDRs(list []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(list))
	for _, s := range list {
		if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR such as 10.0.0.0/8 or an IP address", s)
		}
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

var hostNameRE = regexp.MustCompile(`^(\*\.)?[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*\.?$`)

func checkHostPattern(h string) error {
	switch {
	case h == "*":
		return nil
	case strings.Contains(h, ":"):
		return fmt.Errorf("%q: a host name without port or scheme (\"skills.example.com\", \"*.example.com\", or \"*\" for any)", h)
	case h != strings.ToLower(h) || !hostNameRE.MatchString(h):
		return fmt.Errorf("%q is not a lowercase host name (\"skills.example.com\", \"*.example.com\", or \"*\" for any)", h)
	}
	return nil
}

func checkOrigin(o string) error {
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return fmt.Errorf("%q is not an origin such as https://app.example.com (scheme, host and optional port)", o)
	}
	return nil
}

// parseGitURL parses a git source's url into its canonical form. A URL
// with credentials gets a message naming the keys a token belongs in (an
// ssh URL's user is no credential: it is refused for its scheme).
func parseGitURL(u string) (gitref.Repo, error) {
	if p, err := url.Parse(u); err == nil && p.User != nil && (p.Scheme == "https" || p.Scheme == "http" || p.Scheme == "file") {
		return gitref.Repo{}, errors.New("credentials do not belong in the URL; use auth.token_env or auth.token_file")
	}
	return gitref.ParseRepo(u)
}

// pin parses the ref into a gitref.Pin; no ref is the default branch.
func (r *Ref) pin() (gitref.Pin, error) {
	if r == nil {
		return gitref.Pin{}, nil
	}
	var kind, value string
	n := 0
	for _, kv := range [...][2]string{{"branch", r.Branch}, {"tag", r.Tag}, {"commit", r.Commit}, {"semver", r.Semver}, {"release", r.Release}} {
		if kv[1] != "" {
			kind, value = kv[0], kv[1]
			n++
		}
	}
	if n != 1 {
		return gitref.Pin{}, errors.New("set exactly one of branch, tag, commit, semver, release")
	}
	return gitref.ParsePin(kind, value)
}

// DefaultDataDir is where state goes when data_dir is not set:
// $XDG_STATE_HOME/skillreg, or ~/.local/state/skillreg.
func DefaultDataDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "skillreg")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "state", "skillreg")
	}
	return "skillreg-data"
}

// Publish: the installers' endpoints (discovery index, marketplace,
// archives) and HTTPS.

// Marketplace names the Claude Code plugin marketplace.
type Marketplace struct {
	// Name is the marketplace's name (default "skillreg"); a source's own
	// marketplace is named Name-<source>.
	Name string `yaml:"name"`
	// Owner is shown as the marketplace's owner (default public_url's host).
	Owner string `yaml:"owner"`
}

// Cache bounds in-memory caches.
type Cache struct {
	// ArtifactBytes bounds the built archives kept in memory (default
	// 256 MiB; 0 means the default).
	ArtifactBytes int64 `yaml:"artifact_bytes"`
	// ContentBytes bounds the verified file bytes (skill files and
	// bodies) kept in memory, each entry counted with its bookkeeping
	// (default 64 MiB; 0 means the default, -1 keeps none: every read
	// goes to the tree and is checked again). A reload applies it.
	ContentBytes int64 `yaml:"content_bytes"`
}

// TLS serves HTTPS on the listen address when both files are set.
type TLS struct {
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}

// Enabled reports whether HTTPS is configured.
func (t TLS) Enabled() bool { return t.CertFile != "" }

// Publish defaults.
const (
	DefaultMarketplaceName = "skillreg"
	DefaultArtifactBytes   = 256 << 20
	DefaultContentBytes    = 64 << 20
)

func (c *Config) publishDefaults() {
	if c.Marketplace.Name == "" {
		c.Marketplace.Name = DefaultMarketplaceName
	}
	if c.Cache.ArtifactBytes == 0 {
		c.Cache.ArtifactBytes = DefaultArtifactBytes
	}
	if c.Cache.ContentBytes == 0 {
		c.Cache.ContentBytes = DefaultContentBytes
	}
}

var marketplaceNameRE = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// CheckMarketplaceName says why Claude Code would refuse a marketplace
// name, or returns nil: kebab-case, at most 64 characters, nothing that
// looks official (Claude Code refuses names that mention Anthropic or
// Claude, or say official).
func CheckMarketplaceName(name string) error {
	lower := strings.ToLower(name)
	switch {
	case len(name) == 0 || len(name) > 64 || !marketplaceNameRE.MatchString(name):
		return fmt.Errorf("%q must be kebab-case (a-z, 0-9, single hyphens), at most 64 characters", name)
	case strings.Contains(lower, "anthropic"), strings.Contains(lower, "claude"), strings.Contains(lower, "official"):
		return fmt.Errorf("%q looks like an official marketplace name, which Claude Code refuses", name)
	}
	return nil
}

func (c *Config) validatePublish(bad func(format string, args ...any)) {
	if c.PublicURL != "" {
		u, err := url.Parse(c.PublicURL)
		switch {
		case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "":
			bad("public_url: %q must be an http(s) URL such as https://skills.example.com", gitref.Redact(c.PublicURL))
		case u.User != nil || u.RawQuery != "" || u.Fragment != "" || strings.Trim(u.Path, "/") != "":
			bad("public_url: %q must be an origin only: no credentials, path, query or fragment", gitref.Redact(c.PublicURL))
		}
	}
	if err := CheckMarketplaceName(c.Marketplace.Name); err != nil {
		bad("marketplace.name: %v", err)
	}
	if len(c.Marketplace.Owner) > 200 {
		bad("marketplace.owner: longer than 200 characters")
	}
	if c.Cache.ArtifactBytes < 0 {
		bad("cache.artifact_bytes: %d must be a positive number of bytes", c.Cache.ArtifactBytes)
	}
	if c.Cache.ContentBytes < -1 {
		bad("cache.content_bytes: %d must be a positive number of bytes, or -1 to keep none", c.Cache.ContentBytes)
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		bad("tls: set both cert_file and key_file, or neither")
	}
	for key, p := range map[string]string{"tls.cert_file": c.TLS.CertFile, "tls.key_file": c.TLS.KeyFile} {
		if p != "" {
			if _, err := os.Stat(p); err != nil {
				bad("%s: %v", key, err)
			}
		}
	}
}
