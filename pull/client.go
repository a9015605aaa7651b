package pull

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skillreg/skillreg/jsonbound"
	"github.com/skillreg/skillreg/sigverify"
)

// Errors that end a whole run: the server cannot be reached, or does not
// speak the Skills extension.
var (
	// ErrUnreachable: the server could not be reached, refused the
	// session, or the connection failed during the run.
	ErrUnreachable = errors.New("server unreachable")
	// ErrProtocol: the server does not declare what a host needs (the
	// Skills extension and resources) or answered a request malformed.
	ErrProtocol = errors.New("protocol error")
	// ErrNotServed is returned by Get for a URI the server does not serve.
	ErrNotServed = errors.New("not served")
)

// codeInvalidParams is the JSON-RPC code a server answers skills/get with
// for a URI it does not serve.
const codeInvalidParams = -32602

// Bounds on what a server may make the client do.
const (
	maxListPages    = 10000
	maxListEntries  = 100000
	maxDirRequests  = 4 * MaxFiles
	maxDirChildren  = 4 * MaxFiles
	defaultTimeout  = 2 * time.Minute
	defaultMaxBytes = 8 * MaxBytes // one response: a 16 MiB file as JSON-escaped text fits
)

// ClientOptions configures a connection to one server.
type ClientOptions struct {
	// Server is the MCP endpoint URL (Streamable HTTP).
	Server string
	// Token, when set, is sent as "Authorization: Bearer" to Server, and
	// only to it (not to a host a redirect points at). It never appears in
	// an error or a log line.
	Token string
	// ClientName and ClientVersion are the MCP client's implementation
	// info; servers detect the client from the name (the skill-meta tool
	// does). Default "skillreg".
	ClientName, ClientVersion string
	// ProtocolVersion to ask for; empty means the newest the SDK speaks,
	// falling back to the 2025-11-25 handshake with older servers.
	ProtocolVersion string
	// HTTPClient carries the requests; nil means a default one. Its
	// transport is wrapped to add the token and bound response bodies.
	HTTPClient *http.Client
	// Timeout bounds each HTTP request (default 2m).
	Timeout time.Duration
	// MaxResponseBytes bounds each HTTP response body, and each server-sent
	// event in it (default 128 MiB).
	MaxResponseBytes int64
	// Limits bound the JSON of each response (of each event, in a stream):
	// nesting depth and number of values, checked as the bytes arrive,
	// before the SDK or pull decodes them. Zero fields take jsonbound's
	// defaults: 1,000 levels (where the Go SDK refuses a message too) and
	// 1,048,576 values.
	Limits jsonbound.Limits
	// Logger receives debug lines about requests; nil discards them.
	Logger *slog.Logger
	// Keys, when set, make Fetch require a proof for every skill: the
	// resource its provenance names, checked against the verified files
	// and a signature by one of the keys (see proof.Check).
	Keys *sigverify.Keys
}

// Client is a connection to one Skills-extension server, on the host side:
// it lists and gets entries and fetches skills file by file, verifying each
// against its entry. A skill that fails once is latched: no further file of
// it is read on this connection.
type Client struct {
	o             ClientOptions
	log           *slog.Logger
	cs            *sdk.ClientSession
	tr            *transport
	directoryRead bool
	tools         bool
	refused       map[string]error
}

// Connect opens a session and checks that the server declared the Skills
// extension and resources, as a host must before using either.
func Connect(ctx context.Context, o ClientOptions) (*Client, error) {
	if err := checkServerURL(o.Server); err != nil {
		return nil, err
	}
	if o.ClientName == "" {
		o.ClientName = "skillreg"
	}
	if o.ClientVersion == "" {
		o.ClientVersion = "dev"
	}
	if o.Timeout <= 0 {
		o.Timeout = defaultTimeout
	}
	if o.MaxResponseBytes <= 0 {
		o.MaxResponseBytes = defaultMaxBytes
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	server, _ := url.Parse(o.Server)
	if o.Token != "" && server.Scheme == "http" && !isLoopbackHost(server.Hostname()) {
		log.Warn("sending a token over plain http", "server", o.Server)
	}
	base := http.DefaultTransport
	if o.HTTPClient != nil && o.HTTPClient.Transport != nil {
		base = o.HTTPClient.Transport
	}
	tr := &transport{base: base, server: server, token: o.Token, max: o.MaxResponseBytes, limits: o.Limits}
	hc := &http.Client{Transport: tr, Timeout: o.Timeout}
	if o.HTTPClient != nil {
		hc.Jar = o.HTTPClient.Jar
		hc.CheckRedirect = o.HTTPClient.CheckRedirect
	}

	caps := &sdk.ClientCapabilities{}
	caps.AddExtension(ExtensionID, nil)
	sc := sdk.NewClient(&sdk.Implementation{Name: o.ClientName, Version: o.ClientVersion}, &sdk.ClientOptions{
		Logger:       log,
		Capabilities: caps,
	})
	for _, err := range []error{
		sdk.AddSendingCustomMethod[*listSkillsParams, *listSkillsResult](sc, "skills/list"),
		sdk.AddSendingCustomMethod[*getSkillParams, *getSkillResult](sc, "skills/get"),
		sdk.AddSendingCustomMethod[*readDirectoryParams, *readDirectoryResult](sc, "resources/directory/read"),
	} {
		if err != nil {
			return nil, fmt.Errorf("register skills methods: %w", err)
		}
	}
	t := &sdk.StreamableClientTransport{
		Endpoint: o.Server, HTTPClient: hc, MaxRetries: -1, DisableStandaloneSSE: true,
		MaxEventSize: int(min(o.MaxResponseBytes, math.MaxInt32)),
	}
	cs, err := sc.Connect(ctx, t, &sdk.ClientSessionOptions{ProtocolVersion: o.ProtocolVersion})
	if err != nil {
		if berr := tr.broken(); berr != nil {
			return nil, fmt.Errorf("connect to %s: %w", o.Server, &boundError{berr})
		}
		return nil, fmt.Errorf("connect to %s: %w: %v", o.Server, ErrUnreachable, err)
	}
	c := &Client{o: o, log: log, cs: cs, tr: tr, refused: map[string]error{}}
	res := cs.InitializeResult()
	var sc2 *sdk.ServerCapabilities
	if res != nil {
		sc2 = res.Capabilities
	}
	if sc2 == nil || sc2.Extensions[ExtensionID] == nil {
		cs.Close()
		return nil, fmt.Errorf("%s: %w: the server does not declare the %s extension", o.Server, ErrProtocol, ExtensionID)
	}
	settings, ok := sc2.Extensions[ExtensionID].(map[string]any)
	if !ok {
		cs.Close()
		return nil, fmt.Errorf("%s: %w: the %s capability is not an object", o.Server, ErrProtocol, ExtensionID)
	}
	if sc2.Resources == nil {
		cs.Close()
		return nil, fmt.Errorf("%s: %w: the server declares the Skills extension but not resources", o.Server, ErrProtocol)
	}
	c.directoryRead, _ = settings["directoryRead"].(bool)
	c.tools = sc2.Tools != nil
	log.Debug("connected", "server", o.Server, "protocol", res.ProtocolVersion, "directoryRead", c.directoryRead)
	return c, nil
}

// Close ends the session.
func (c *Client) Close() error { return c.cs.Close() }

// List returns every entry of skills/list, following cursors (bounded, and
// refusing a cursor that repeats).
func (c *Client) List(ctx context.Context) ([]Entry, error) {
	var all []Entry
	seen := map[string]bool{}
	cursor := ""
	for page := 0; ; page++ {
		if page >= maxListPages || len(all) > maxListEntries {
			return nil, fmt.Errorf("skills/list: %w: more than %d pages or %d entries", ErrProtocol, maxListPages, maxListEntries)
		}
		res, err := sdk.CallCustomMethod[*listSkillsParams, *listSkillsResult](ctx, c.cs, "skills/list", &listSkillsParams{Cursor: cursor})
		if err != nil {
			return nil, c.callError("skills/list", err)
		}
		all = append(all, res.Skills...)
		if res.NextCursor == "" {
			return all, nil
		}
		if seen[res.NextCursor] {
			return nil, fmt.Errorf("skills/list: %w: a cursor repeated", ErrProtocol)
		}
		seen[res.NextCursor] = true
		cursor = res.NextCursor
	}
}

// Get returns the entry skills/get answers for a SKILL.md URI; ErrNotServed
// when the server answers that it does not serve it.
func (c *Client) Get(ctx context.Context, uri string) (*Entry, error) {
	res, err := sdk.CallCustomMethod[*getSkillParams, *getSkillResult](ctx, c.cs, "skills/get", &getSkillParams{URI: uri})
	if err != nil {
		var we *jsonrpc.Error
		if errors.As(err, &we) && we.Code == codeInvalidParams {
			return nil, fmt.Errorf("%s: %w", clip(uri), ErrNotServed)
		}
		return nil, c.callError("skills/get", err)
	}
	if res.Skill == nil {
		return nil, fmt.Errorf("skills/get %s: %w: no skill in the result", clip(uri), ErrProtocol)
	}
	return res.Skill, nil
}

// callError classifies a failed request that ends the run: the
// connection failed, or the server answered with something other than the
// result the method defines.
func (c *Client) callError(method string, err error) error {
	if berr := c.tr.broken(); berr != nil {
		return fmt.Errorf("%s: %w", method, &boundError{berr})
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", method, err)
	}
	if connectionFailed(err) {
		return fmt.Errorf("%s: %w: %v", method, ErrUnreachable, err)
	}
	return fmt.Errorf("%s: %w: %v", method, ErrProtocol, err)
}

func connectionFailed(err error) bool {
	var ue *url.Error
	var ne net.Error
	return errors.As(err, &ue) || errors.As(err, &ne) || errors.Is(err, sdk.ErrConnectionClosed) || errors.Is(err, io.ErrUnexpectedEOF)
}

// Skill is a skill that verified completely: everything install writes and
// skills.lock records.
type Skill struct {
	Name       string
	URI        string
	Server     string
	Resources  []Resource // sorted by URI
	Provenance *Provenance
	Files      []File
	// Verified is what the skill's proof proved, when the client has keys.
	Verified *Verified
}

// File is one verified file of a skill.
type File struct {
	Path string // slash-separated, inside the skill
	Data []byte
}

// Fetch reads every file of an entry through resources/read and verifies
// it (see checkEntry and checkFile); when the server declares
// directoryRead it first walks the skill's directory and refuses any file
// the entry does not list. With ClientOptions.Keys it then reads the
// skill's proof and refuses the skill unless the proof ties the files to a
// commit signed by one of the keys. At the end it gets the entry again and refuses
// the skill if the manifest changed while its files were read. The first
// failed check ends the fetch with a *VerifyError, and the skill stays
// refused on this connection: no further file of it is read. Other errors
// (the connection failed) end the run.
func (c *Client) Fetch(ctx context.Context, e Entry) (*Skill, error) {
	if err, ok := c.refused[e.URI]; ok {
		return nil, err
	}
	s, err := c.fetch(ctx, e)
	if errors.Is(err, ErrVerify) {
		c.refused[e.URI] = err
	}
	return s, err
}

func (c *Client) fetch(ctx context.Context, e Entry) (*Skill, error) {
	m, err := checkEntry(e)
	if err != nil {
		return nil, err
	}
	if c.directoryRead {
		if err := c.walk(ctx, m); err != nil {
			return nil, err
		}
	}
	s := &Skill{Name: m.loc.name, URI: e.URI, Server: c.o.Server, Resources: m.resources(), Provenance: provenance(e)}
	for _, f := range m.files {
		data, err := c.read(ctx, m, f)
		if err != nil {
			return nil, err
		}
		s.Files = append(s.Files, File{Path: f.rel, Data: data})
	}
	if c.o.Keys != nil {
		if s.Verified, err = c.prove(ctx, m, s); err != nil {
			return nil, err
		}
	}
	fresh, err := c.Get(ctx, e.URI)
	if errors.Is(err, ErrNotServed) {
		return nil, refuse(e.URI, "", CheckManifestChange, "the server stopped serving the skill while its files were read")
	}
	if err != nil {
		return nil, err
	}
	if why := m.sameEntry(*fresh); why != "" {
		return nil, refuse(e.URI, "", CheckManifestChange, "the entry changed while its files were read: %s", why)
	}
	return s, nil
}

// read fetches one file and verifies it.
func (c *Client) read(ctx context.Context, m *manifest, f fileRef) ([]byte, error) {
	res, err := c.cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: f.URI})
	if err != nil {
		var we *jsonrpc.Error
		switch {
		case c.tr.broken() != nil:
			return nil, c.callError("resources/read", err)
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			return nil, fmt.Errorf("resources/read: %w", err)
		case errors.As(err, &we):
			return nil, refuse(m.entry.URI, f.URI, CheckMissing, "the server did not serve it: %s (%d)", clip(we.Message), we.Code)
		case connectionFailed(err):
			return nil, fmt.Errorf("resources/read: %w: %v", ErrUnreachable, err)
		}
		return nil, refuse(m.entry.URI, f.URI, CheckContent, "unreadable result: %s", clip(err.Error()))
	}
	var data []byte
	found := 0
	for _, ct := range res.Contents {
		if ct == nil {
			return nil, refuse(m.entry.URI, f.URI, CheckContent, "a null content item")
		}
		if ct.URI != f.URI {
			if _, listed := m.byURI[ct.URI]; !listed {
				return nil, refuse(m.entry.URI, ct.URI, CheckNotInEntry, "served with %s, but the entry does not list it", f.URI)
			}
			return nil, refuse(m.entry.URI, f.URI, CheckContent, "the read also returned %s", ct.URI)
		}
		found++
		if ct.Text != "" && ct.Blob != nil {
			return nil, refuse(m.entry.URI, f.URI, CheckContent, "content has both text and blob")
		}
		data = ct.Blob
		if data == nil {
			data = []byte(ct.Text)
		}
	}
	switch {
	case found == 0:
		return nil, refuse(m.entry.URI, f.URI, CheckMissing, "the read returned no content for it")
	case found > 1:
		return nil, refuse(m.entry.URI, f.URI, CheckDuplicate, "the read returned it %d times", found)
	}
	if err := m.checkFile(f, data); err != nil {
		return nil, err
	}
	return data, nil
}

// walk lists the skill's directory tree through resources/directory/read
// and refuses any file in it that the entry does not list: a file the
// entry leaves out counts as a change of the skill.
func (c *Client) walk(ctx context.Context, m *manifest) error {
	queue := []string{m.loc.dirURI}
	seenDirs := map[string]bool{m.loc.dirURI: true}
	requests, children := 0, 0
	for len(queue) > 0 {
		dir := queue[0]
		queue = queue[1:]
		cursor := ""
		for {
			if requests++; requests > maxDirRequests {
				return refuse(m.entry.URI, "", CheckLimits, "the directory tree takes more than %d requests to list", maxDirRequests)
			}
			res, err := sdk.CallCustomMethod[*readDirectoryParams, *readDirectoryResult](ctx, c.cs, "resources/directory/read", &readDirectoryParams{URI: dir, Cursor: cursor})
			if err != nil {
				var we *jsonrpc.Error
				if errors.As(err, &we) && c.tr.broken() == nil {
					return refuse(m.entry.URI, dir, CheckMissing, "the server declares directoryRead but did not list the directory: %s (%d)", clip(we.Message), we.Code)
				}
				return c.callError("resources/directory/read", err)
			}
			for _, ch := range res.Resources {
				if children++; children > maxDirChildren {
					return refuse(m.entry.URI, "", CheckLimits, "the directory tree holds more than %d entries", maxDirChildren)
				}
				if _, err := m.loc.relPath(ch.URI); err != nil {
					return refuse(m.entry.URI, ch.URI, CheckURI, "listed in %s: %v", dir, err)
				}
				if ch.MIMEType == directoryMIME {
					if !seenDirs[ch.URI] {
						seenDirs[ch.URI] = true
						queue = append(queue, ch.URI)
					}
					continue
				}
				if _, listed := m.byURI[ch.URI]; !listed {
					return refuse(m.entry.URI, ch.URI, CheckNotInEntry, "the server has this file in the skill, the entry does not list it")
				}
			}
			if res.NextCursor == "" || res.NextCursor == cursor {
				break
			}
			cursor = res.NextCursor
		}
	}
	return nil
}

// provenance reads dev.skillreg/provenance from an entry's _meta, keeping
// only well-formed strings; a server that sends none (or another shape)
// gives nil.
func provenance(e Entry) *Provenance {
	raw, ok := e.Meta[MetaProvenance]
	if !ok {
		return nil
	}
	var p Provenance
	if json.Unmarshal(raw, &p) != nil {
		return nil
	}
	for _, s := range []*string{&p.Repository, &p.Ref, &p.Commit, &p.Path} {
		if len(*s) > 1024 || strings.ContainsFunc(*s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			*s = ""
		}
	}
	if p == (Provenance{}) {
		return nil
	}
	return &p
}

// SkillMeta is the answer of a skill-meta tool (AgentKey Skill-Meta
// Protocol v1): the latest version and how to upgrade on this client.
type SkillMeta struct {
	Tool              string `json:"-"`
	ProtocolVersion   int    `json:"protocol_version"`
	VersionLatest     string `json:"skill_version_latest"`
	ClientDetected    string `json:"client_detected"`
	UpdateDocURL      string `json:"update_doc_url"`
	UpdateCommand     string `json:"update_command,omitempty"`
	UpdateCommandKind string `json:"update_command_kind,omitempty"`
	ReleaseNotesURL   string `json:"release_notes_url,omitempty"`
}

// Tools returns the names of the server's tools (all pages), or none when
// the server does not declare tools.
func (c *Client) Tools(ctx context.Context) (map[string]bool, error) {
	names := map[string]bool{}
	if !c.tools {
		return names, nil
	}
	cursor := ""
	for page := 0; page < maxListPages; page++ {
		res, err := c.cs.ListTools(ctx, &sdk.ListToolsParams{Cursor: cursor})
		if err != nil {
			return nil, c.callError("tools/list", err)
		}
		for _, t := range res.Tools {
			if t != nil {
				names[t.Name] = true
			}
		}
		if res.NextCursor == "" || res.NextCursor == cursor {
			return names, nil
		}
		cursor = res.NextCursor
	}
	return names, nil
}

// SkillMetaTool is the conventional name of a skill's skill-meta tool.
func SkillMetaTool(skillName string) string { return skillName + "_skill_meta" }

// SkillMeta calls a skill-meta tool with no arguments and decodes its
// answer, from the structured content or else the first text content.
func (c *Client) SkillMeta(ctx context.Context, tool string) (*SkillMeta, error) {
	res, err := c.cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: map[string]any{}})
	if err != nil {
		return nil, c.callError("tools/call "+tool, err)
	}
	if res.IsError {
		return nil, fmt.Errorf("tools/call %s: %w: the tool reported an error", tool, ErrProtocol)
	}
	var raw []byte
	if res.StructuredContent != nil {
		raw, err = json.Marshal(res.StructuredContent)
		if err != nil {
			return nil, fmt.Errorf("tools/call %s: %w: %v", tool, ErrProtocol, err)
		}
	} else {
		for _, ct := range res.Content {
			if tc, ok := ct.(*sdk.TextContent); ok {
				raw = []byte(tc.Text)
				break
			}
		}
	}
	// A text answer is JSON inside a JSON string: the transport's scan saw
	// only the string, so the bounds apply again here.
	if err := jsonbound.Check(raw, c.o.Limits); err != nil {
		return nil, fmt.Errorf("tools/call %s: %w", tool, &boundError{fmt.Errorf("the answer: %w", err)})
	}
	var m SkillMeta
	if raw == nil || json.Unmarshal(raw, &m) != nil {
		return nil, fmt.Errorf("tools/call %s: %w: the answer is not a skill-meta object", tool, ErrProtocol)
	}
	m.Tool = tool
	for _, f := range []*string{&m.VersionLatest, &m.ClientDetected, &m.UpdateDocURL, &m.UpdateCommand, &m.UpdateCommandKind, &m.ReleaseNotesURL} {
		*f = clip(*f)
	}
	return &m, nil
}

// transport adds the bearer token to requests for the configured server
// (same scheme and host only, so a redirect elsewhere never carries it)
// and bounds every response body: its size, and the depth and number of
// values of the JSON in it, as the SDK reads it. The SDK reports a body
// that fails to read only as a failed connection, so the first bound
// broken is kept for the Client to name.
type transport struct {
	base   http.RoundTripper
	server *url.URL
	token  string
	max    int64
	limits jsonbound.Limits

	mu  sync.Mutex
	err error
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.token != "" && req.URL.Scheme == t.server.Scheme && req.URL.Host == t.server.Host {
		req = req.Clone(req.Context())
		req.Header.Set("Authorization", "Bearer "+t.token)
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	limit := t.max
	if n, ok := req.Context().Value(responseLimitKey{}).(int64); ok && n < limit {
		limit = n
	}
	var shape io.Writer
	if media, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); media == "text/event-stream" {
		shape = &eventScanner{limits: t.limits, s: jsonbound.Scanner{Limits: t.limits}, lineStart: true}
	} else {
		shape = &jsonbound.Scanner{Limits: t.limits}
	}
	resp.Body = &boundedBody{rc: resp.Body, left: limit, max: limit, shape: shape, broke: t.broke}
	return resp, nil
}

// responseLimitKey is the context key of a request's own bound on its
// response body, below ClientOptions.MaxResponseBytes (withResponseLimit).
type responseLimitKey struct{}

// withResponseLimit bounds the response bodies of the requests made with
// ctx at n bytes (or MaxResponseBytes, if lower). The SDK makes a call's
// HTTP request with the call's context, so the bound holds for that call.
func withResponseLimit(ctx context.Context, n int64) context.Context {
	return context.WithValue(ctx, responseLimitKey{}, n)
}

// broke records the first bound a response broke.
func (t *transport) broke(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err == nil {
		t.err = err
	}
}

// broken is the first bound a response broke, or nil.
func (t *transport) broken() error {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// boundError is a response that broke a bound: an ErrProtocol that says
// which bound (one chain, so that it prints as one line).
type boundError struct{ err error }

func (e *boundError) Error() string        { return ErrProtocol.Error() + ": " + e.err.Error() }
func (e *boundError) Unwrap() error        { return e.err }
func (e *boundError) Is(target error) bool { return target == ErrProtocol }

// ErrResponseTooLarge is matched by the error of a run that a response body
// over ClientOptions.MaxResponseBytes ended.
var ErrResponseTooLarge = errors.New("response body larger than allowed")

// boundedBody reads a response body at most max bytes long, and hands what
// it reads to shape, which fails once the JSON breaks a bound.
type boundedBody struct {
	rc        io.ReadCloser
	left, max int64
	shape     io.Writer   // nil: size only
	broke     func(error) // told of the bound broken; may be nil
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a body of exactly the bound from a longer one.
		var one [1]byte
		n, err := b.rc.Read(one[:])
		if n > 0 {
			return 0, b.fail(fmt.Errorf("%w: more than %d bytes", ErrResponseTooLarge, b.max))
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if n > 0 && b.shape != nil {
		if k, serr := b.shape.Write(p[:n]); serr != nil {
			return k, b.fail(fmt.Errorf("response JSON: %w", serr))
		}
	}
	return n, err
}

func (b *boundedBody) fail(err error) error {
	if b.broke != nil {
		b.broke(err)
	}
	return err
}

func (b *boundedBody) Close() error { return b.rc.Close() }

// eventScanner checks the JSON of a server-sent event stream: the value of
// every data line goes to a jsonbound.Scanner, which starts afresh with
// each event (a blank line), so each message is held to the bounds and
// nothing in the other fields (an id with a quote in it, say) can hide a
// message's brackets from the scan.
type eventScanner struct {
	limits jsonbound.Limits
	s      jsonbound.Scanner

	lineStart bool    // at the start of a line
	name      [5]byte // the line's field name so far, up to "data:"
	nameLen   int
	inName    bool // reading the field name
	inData    bool // in the value of a data line
	skipSpace bool // just after "data:": one space is not part of the value
	afterCR   bool // the previous byte was a CR (a CRLF ends one line)
}

func (e *eventScanner) Write(p []byte) (int, error) {
	for i := 0; i < len(p); i++ {
		c := p[i]
		if e.afterCR {
			e.afterCR = false
			if c == '\n' {
				continue
			}
		}
		if c == '\r' || c == '\n' {
			e.afterCR = c == '\r'
			if e.lineStart {
				e.s = jsonbound.Scanner{Limits: e.limits} // a blank line ends the event
			} else if e.inData {
				// Data lines of one event are joined by a newline.
				if _, err := e.s.Write([]byte{'\n'}); err != nil {
					return i, err
				}
			}
			e.lineStart, e.inName, e.inData, e.skipSpace, e.nameLen = true, false, false, false, 0
			continue
		}
		if e.lineStart {
			e.lineStart, e.inName = false, true
		}
		switch {
		case e.inName:
			if c == ':' {
				e.inName = false
				e.inData = e.nameLen == 4 && string(e.name[:4]) == "data"
				e.skipSpace = e.inData
				continue
			}
			if e.nameLen < len(e.name) {
				e.name[e.nameLen] = c
			}
			e.nameLen++
		case e.inData:
			if e.skipSpace {
				e.skipSpace = false
				if c == ' ' {
					continue
				}
			}
			// The rest of the line, in one write.
			j := i
			for j < len(p) && p[j] != '\r' && p[j] != '\n' {
				j++
			}
			if k, err := e.s.Write(p[i:j]); err != nil {
				return i + k, err
			}
			i = j - 1
		}
	}
	return len(p), nil
}

func isLoopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
