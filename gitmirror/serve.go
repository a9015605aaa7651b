package gitmirror

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/skillreg/skillreg/access"
	"github.com/skillreg/skillreg/catalog"
)

// Defaults of ServeOptions.
const (
	DefaultConcurrent = 16
	DefaultTimeout    = 10 * time.Minute
)

// ServeOptions configure the smart HTTP face.
type ServeOptions struct {
	// Gate says who a request's credential belongs to and counts failed
	// attempts (nil, or one that requires nothing: open); asked at every
	// request.
	Gate   func() *access.Gate
	Public func() map[string]bool
	// RemoteAddr is the address failed attempts are counted against.
	RemoteAddr func(r *http.Request) string
	Concurrent int           // upload-packs at once (default 16)
	Timeout    time.Duration // one upload-pack (default 10 minutes)
}

// Handler serves /git/<source>.git over git's smart HTTP protocol v2.
type Handler struct {
	m   *Mirror
	o   ServeOptions
	sem chan struct{}
}

// Handler returns the smart HTTP face of the mirror.
func (m *Mirror) Handler(o ServeOptions) *Handler {
	if o.Concurrent <= 0 {
		o.Concurrent = DefaultConcurrent
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.RemoteAddr == nil {
		o.RemoteAddr = func(r *http.Request) string { return r.RemoteAddr }
	}
	return &Handler{m: m, o: o, sem: make(chan struct{}, o.Concurrent)}
}

// Prefix is where the repositories live.
const Prefix = "/git/"

// httpError is an answer other than success.
type httpError struct {
	code       int
	msg        string
	retryAfter string // of a 429 or 503 (default 5 seconds)
}

func (e *httpError) Error() string { return e.msg }

var errNotFound = &httpError{code: http.StatusNotFound, msg: "repository not found"}

// ServeHTTP routes /git/<name>.git/{info/refs,git-upload-pack,git-receive-pack}.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	err := h.serve(w, r)
	if err == nil {
		return
	}
	var he *httpError
	if !errors.As(err, &he) {
		he = &httpError{code: http.StatusInternalServerError, msg: "internal error"}
	}
	hd := w.Header()
	hd.Set("Cache-Control", "no-store")
	switch he.code {
	case http.StatusUnauthorized:
		hd.Set("WWW-Authenticate", `Basic realm="skillreg"`)
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		ra := he.retryAfter
		if ra == "" {
			ra = "5"
		}
		hd.Set("Retry-After", ra)
	}
	http.Error(w, he.msg, he.code)
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request) error {
	rest, ok := strings.CutPrefix(r.URL.Path, Prefix)
	if !ok {
		return errNotFound
	}
	name, op, ok := strings.Cut(rest, ".git/")
	if !ok || name == "" || strings.Contains(name, "/") {
		return errNotFound
	}
	if op == "git-receive-pack" || (op == "info/refs" && r.URL.Query().Get("service") == "git-receive-pack") {
		return &httpError{code: http.StatusForbidden, msg: "this repository is a read-only mirror"}
	}
	allow, anonymous, err := h.identify(r)
	if err != nil {
		return err
	}
	g, err := h.generation(r.Context(), name, allow)
	if errors.Is(err, catalog.ErrNotFound) {
		if anonymous {
			return &httpError{code: http.StatusUnauthorized, msg: "authentication required"}
		}
		return errNotFound
	}
	if err != nil {
		return err
	}
	switch {
	case op == "info/refs" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		if r.URL.Query().Get("service") != "git-upload-pack" {
			return &httpError{code: http.StatusForbidden, msg: "only the smart HTTP protocol is served"}
		}
		w.Header().Set("Content-Type", "application/x-git-upload-pack-advertisement")
		w.Header().Set("Cache-Control", "no-cache")
		switch proto := r.Header.Get("Git-Protocol"); {
		case strings.Contains(proto, "version=2"):
		default:
			_, err := w.Write(advertisementV0(g, strings.Contains(proto, "version=1")))
			return err
		}
		_, err := w.Write(advertisement())
		return err
	case op == "git-upload-pack" && r.Method == http.MethodPost:
		return h.uploadPack(w, r, g)
	}
	return errNotFound
}

// identify returns what the caller may see and whether it came without a
// credential, asking the gate. Git sends the token as HTTP Basic (any user
// name, the token as password) or, with http.extraHeader, as a bearer
// token.
func (h *Handler) identify(r *http.Request) (catalog.Filter, bool, error) {
	var g *access.Gate
	if h.o.Gate != nil {
		g = h.o.Gate()
	}
	if !g.Required() {
		return catalog.Filter{}, false, nil
	}
	id, err := g.Check(r.Context(), h.o.RemoteAddr(r), token(r.Header.Get("Authorization")))
	switch {
	case errors.Is(err, access.ErrNoCredential):
		only := map[string]bool{}
		if h.o.Public != nil {
			for s, ok := range h.o.Public() {
				if ok {
					only[s] = true
				}
			}
		}
		return catalog.Filter{Only: only}, true, nil
	case err != nil:
		return catalog.Filter{}, false, &httpError{code: access.HTTPStatus(err), msg: access.ErrorMessage(err), retryAfter: g.RetryAfter(err)}
	}
	return id.Filter, false, nil
}

// token extracts the token from a Basic (the password, or the user name
// when the password is empty) or Bearer Authorization header.
func token(auth string) string {
	if t := access.Bearer(auth); t != "" {
		return t
	}
	scheme, val, ok := strings.Cut(strings.TrimSpace(auth), " ")
	if !ok || !strings.EqualFold(scheme, "basic") {
		return ""
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(val))
	if err != nil {
		return ""
	}
	user, pass, _ := strings.Cut(string(raw), ":")
	if pass == "" {
		return user
	}
	return pass
}

// generation returns the newest mirror generation of a repository the
// caller may see; catalog.ErrNotFound for one it may not or that does
// not exist, alike.
func (h *Handler) generation(ctx context.Context, name string, allow catalog.Filter) (*served, error) {
	cat := h.m.o.Catalog.Current()
	if cat == nil {
		return nil, catalog.ErrNotFound
	}
	if name == AllRepository {
		return h.m.all(ctx, cat, allow)
	}
	snap, ok := cat.Snapshot(name)
	if !ok || !allow.Allows(name) {
		return nil, catalog.ErrNotFound
	}
	g, err := h.m.head(ctx, snap)
	if err != nil {
		return nil, err
	}
	return h.m.chain(name, g), nil
}

// served is what one request can be answered from: the newest generation
// first, then the older ones still held.
type served struct {
	gens  []*generation
	known map[string]bool // every commit of the recorded history
}

func (s *served) find(commit string) (*generation, bool) {
	for _, g := range s.gens {
		if g.commit == commit {
			return g, true
		}
	}
	return nil, false
}

// chain returns the held generations of a source, newest (g) first.
func (m *Mirror) chain(source string, g *generation) *served {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.sources[source]
	out := &served{gens: []*generation{g}, known: map[string]bool{g.commit: true}}
	for _, h := range st.history {
		out.known[h.Commit] = true
	}
	for _, o := range st.held {
		if o != g {
			out.gens = append(out.gens, o)
		}
	}
	return out
}

// all builds the repository of every visible source: one folder per
// source, one marketplace over them all, a single commit (no history).
func (m *Mirror) all(ctx context.Context, cat *catalog.Catalog, allow catalog.Filter) (*served, error) {
	all := &generation{parts: []*generation{}}
	var entries []treeEntry
	var plugins []plugin
	var when time.Time
	for _, snap := range cat.Sources(allow) {
		g, err := m.head(ctx, snap)
		if err != nil {
			return nil, err
		}
		all.parts = append(all.parts, g)
		var id oid
		hex.Decode(id[:], []byte(g.tree))
		entries = append(entries, treeEntry{name: snap.Source, mode: modeDir, id: id})
		for _, sk := range snap.Skills {
			plugins = append(plugins, pluginFor(sk, path.Join(snap.Source, sk.Path)))
		}
		t := snap.Committed
		if t.IsZero() {
			t = snap.IndexedAt
		}
		if t.After(when) {
			when = t
		}
	}
	mp, err := marketplaceJSON(AllRepository, m.o.Owner, plugins)
	if err != nil {
		return nil, err
	}
	mpID := objectSum(typeBlob, mp)
	own := &objSet{objs: []packObject{{id: hex.EncodeToString(mpID[:]), typ: typeBlob, data: mp}}}
	claude := []treeEntry{{name: "marketplace.json", mode: modeFile, id: mpID}}
	cid := writeTree(claude, own)
	entries = append(entries, treeEntry{name: ".claude-plugin", mode: modeDir, id: cid})
	tree := writeTree(entries, own)
	all.own = own.objs
	all.tree = hex.EncodeToString(tree[:])
	all.raw = commitBody(all.tree, "", when.UTC().Truncate(time.Second), "skillreg mirror of every source you may see\n")
	all.commit = objectID(typeCommit, all.raw)
	return &served{gens: []*generation{all}}, nil
}

// readBody reads a request body within the bounds, gunzipping it when git
// compressed it.
func readBody(r *http.Request) ([]byte, error) {
	var rd io.Reader = http.MaxBytesReader(nil, r.Body, MaxRequestBytes)
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(rd)
		if err != nil {
			return nil, &httpError{code: http.StatusBadRequest, msg: "bad gzip body"}
		}
		rd = zr
	}
	b, err := io.ReadAll(io.LimitReader(rd, MaxRequestBytes+1))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return nil, &httpError{code: http.StatusRequestEntityTooLarge, msg: "request too large"}
		}
		return nil, &httpError{code: http.StatusBadRequest, msg: "unreadable body"}
	}
	if len(b) > MaxRequestBytes {
		return nil, &httpError{code: http.StatusRequestEntityTooLarge, msg: "request too large"}
	}
	return b, nil
}

// uploadPack answers one protocol v2 command.
func (h *Handler) uploadPack(w http.ResponseWriter, r *http.Request, s *served) error {
	select {
	case h.sem <- struct{}{}:
		defer func() { <-h.sem }()
	default:
		return &httpError{code: http.StatusServiceUnavailable, msg: "too many clones at once; try again"}
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.o.Timeout)
	defer cancel()
	body, err := readBody(r)
	if err != nil {
		return err
	}
	if !strings.Contains(r.Header.Get("Git-Protocol"), "version=2") {
		return h.uploadPackV0(ctx, w, s, body)
	}
	cmd, err := ParseCommand(body)
	if err != nil {
		return &httpError{code: http.StatusBadRequest, msg: err.Error()}
	}
	if err := checkCaps(cmd.Caps); err != nil {
		return &httpError{code: http.StatusBadRequest, msg: err.Error()}
	}
	w.Header().Set("Content-Type", "application/x-git-upload-pack-result")
	w.Header().Set("Cache-Control", "no-cache")
	switch cmd.Name {
	case "ls-refs":
		return lsRefs(w, cmd, s.gens[0].commit)
	case "fetch":
		req, err := ParseFetch(cmd)
		if err != nil {
			return &httpError{code: http.StatusBadRequest, msg: err.Error()}
		}
		return h.fetch(ctx, w, s, req)
	}
	return &httpError{code: http.StatusBadRequest, msg: fmt.Sprintf("unsupported command %q", cmd.Name)}
}

func lsRefs(w io.Writer, cmd *Command, head string) error {
	symrefs := false
	var prefixes []string
	for _, a := range cmd.Args {
		switch {
		case a == "symrefs":
			symrefs = true
		case strings.HasPrefix(a, "ref-prefix "):
			prefixes = append(prefixes, strings.TrimPrefix(a, "ref-prefix "))
		}
	}
	match := func(ref string) bool {
		if len(prefixes) == 0 {
			return true
		}
		for _, p := range prefixes {
			if strings.HasPrefix(ref, p) {
				return true
			}
		}
		return false
	}
	var b bytes.Buffer
	if match("HEAD") {
		line := head + " HEAD"
		if symrefs {
			line += " symref-target:refs/heads/main"
		}
		b.Write(pkt(line + "\n"))
	}
	if match("refs/heads/main") {
		b.Write(pkt(head + " refs/heads/main\n"))
	}
	b.WriteString("0000")
	_, err := w.Write(b.Bytes())
	return err
}

// fetchPlan is what a fetch sends: the objects, the shallow-info lines,
// and the client's haves found in the history, in its order.
type fetchPlan struct {
	objs    []packObject
	shallow []string
	common  []string
}

// plan walks from each want along the held parents, down to the client's
// common commits, the depth asked for, or the oldest held generation (a
// shallow boundary), and lists the objects the client lacks.
//
// avail reports whether an older generation can still be sent (its blobs
// that the newer one lacks are still in the object store: a prune may
// have removed them); one that cannot becomes the boundary's far side.
//
// list returns what a generation reaches (Mirror.objects); plan asks once
// per generation.
func plan(s *served, req *FetchRequest, list func(*generation) (*objSet, error), avail func(older, newer *objSet) bool) (*fetchPlan, error) {
	listed := map[*generation]*objSet{}
	objects := func(g *generation) (*objSet, error) {
		if o, ok := listed[g]; ok {
			return o, nil
		}
		o, err := list(g)
		if err != nil {
			return nil, err
		}
		listed[g] = o
		return o, nil
	}
	haves := map[string]bool{}
	for _, c := range req.Haves {
		// A commit of the history the client has is common even when its
		// trees are no longer held: the client has all it reaches.
		if _, ok := s.find(c); ok || s.known[c] {
			haves[c] = true
		}
	}
	clientShallow := map[string]bool{}
	for _, c := range req.Shallows {
		clientShallow[c] = true
	}
	// Walk from each want along held parents.
	var send []*generation
	var boundary []string
	seen := map[string]bool{}
	for _, want := range req.Wants {
		g, ok := s.find(want)
		if !ok {
			return nil, &httpError{code: http.StatusBadRequest, msg: fmt.Sprintf("want %s is not a commit this repository offers", want)}
		}
		for depth := 1; ; depth++ {
			if haves[g.commit] || seen[g.commit] {
				break
			}
			seen[g.commit] = true
			send = append(send, g)
			if g.parent == "" || haves[g.parent] {
				break
			}
			p, held := s.find(g.parent)
			ok := held && (req.Depth <= 0 || depth < req.Depth)
			if ok && avail != nil {
				po, err := objects(p)
				if err != nil {
					return nil, err
				}
				newer, err := objects(g)
				if err != nil {
					return nil, err
				}
				ok = avail(po, newer)
			}
			if !ok {
				boundary = append(boundary, g.commit)
				break
			}
			g = p
		}
	}
	// Objects the client has: those of its common commits we hold.
	has := map[string]bool{}
	for c := range haves {
		if g, ok := s.find(c); ok {
			o, err := objects(g)
			if err != nil {
				return nil, err
			}
			has[g.commit] = true
			for _, x := range o.objs {
				has[x.id] = true
			}
			for _, x := range o.blobs {
				has[x.id] = true
			}
		}
	}
	var objs []packObject
	add := func(o packObject) {
		if !has[o.id] {
			has[o.id] = true
			objs = append(objs, o)
		}
	}
	for _, g := range send {
		add(packObject{id: g.commit, typ: typeCommit, data: g.raw})
	}
	for _, g := range send {
		o, err := objects(g)
		if err != nil {
			return nil, err
		}
		for _, x := range o.objs {
			add(x)
		}
		for _, x := range o.blobs {
			add(x)
		}
	}

	p := &fetchPlan{objs: objs}
	for _, c := range req.Haves {
		if haves[c] && !slices.Contains(p.common, c) {
			p.common = append(p.common, c)
		}
	}
	for _, c := range boundary {
		p.shallow = append(p.shallow, "shallow "+c)
	}
	for c := range clientShallow {
		if seen[c] && !slices.Contains(boundary, c) {
			if g, ok := s.find(c); ok && g.parent != "" {
				p.shallow = append(p.shallow, "unshallow "+c)
			}
		}
	}
	return p, nil
}

// fetch answers a protocol v2 fetch: acknowledgments when the client is
// still negotiating (always ready: the history is short), shallow-info,
// and the pack streamed in side-band-64k.
func (h *Handler) fetch(ctx context.Context, w http.ResponseWriter, s *served, req *FetchRequest) error {
	p, err := plan(s, req, h.list(ctx), h.available(ctx))
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	if !req.Done {
		bw.Write(pkt("acknowledgments\n"))
		if len(p.common) == 0 {
			bw.Write(pkt("NAK\n"))
		}
		for _, c := range p.common {
			bw.Write(pkt("ACK " + c + "\n"))
		}
		bw.Write(pkt("ready\n"))
		bw.WriteString("0001")
	}
	if len(p.shallow) > 0 {
		bw.Write(pkt("shallow-info\n"))
		for _, l := range p.shallow {
			bw.Write(pkt(l + "\n"))
		}
		bw.WriteString("0001")
	}
	bw.Write(pkt("packfile\n"))
	return h.sendPack(ctx, bw, p.objs, true)
}

// sendPack streams the pack, in side-band-64k when asked for, and ends
// the response.
func (h *Handler) sendPack(ctx context.Context, bw *bufio.Writer, objs []packObject, band bool) error {
	var out io.Writer = bw
	if band {
		out = sideband{bw}
	}
	if err := writePack(ctx, out, h.m.o.Catalog, objs); err != nil {
		if band {
			// The status line is gone: tell git on the error band.
			fmt.Fprintf(bw, "%04x\x03%s\n", len(err.Error())+6, err.Error())
		}
		bw.Flush()
		return nil
	}
	if band {
		bw.WriteString("0000")
	}
	return bw.Flush()
}

// list returns plan's listing of a generation's objects.
func (h *Handler) list(ctx context.Context) func(*generation) (*objSet, error) {
	return func(g *generation) (*objSet, error) { return h.m.objects(ctx, g) }
}

// available returns plan's check: the blobs an older generation adds are
// read (verified, and cached by the registry) before any byte is sent.
func (h *Handler) available(ctx context.Context) func(older, newer *objSet) bool {
	return func(older, newer *objSet) bool {
		for _, b := range older.blobs {
			if _, ok := slices.BinarySearchFunc(newer.blobs, b.id, func(x packObject, id string) int { return strings.Compare(x.id, id) }); ok {
				continue
			}
			if _, err := h.m.o.Catalog.ReadFile(ctx, *b.file); err != nil {
				return false
			}
		}
		return true
	}
}
