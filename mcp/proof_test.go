package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path"
	"slices"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/gitref"
	"github.com/skillreg/skillreg/gitstore"
	"github.com/skillreg/skillreg/internal/gittest"
	"github.com/skillreg/skillreg/internal/testkit"
	"github.com/skillreg/skillreg/proof"
	"github.com/skillreg/skillreg/registry"
)

// headerTransport names the caller, as the daemon's gate would.
type headerTransport struct{ only string }

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Test-Only", h.only)
	return http.DefaultTransport.RoundTrip(r)
}

// proofServer serves a git source pinned to an annotated tag ("team",
// through a real loopback git server and object store) and a directory
// source ("local") over MCP, with proofs on.
func proofServer(t *testing.T) (*httptest.Server, *gittest.Repo) {
	t.Helper()
	srv := gittest.NewServer(t)
	remote := srv.CreateRepo("skills")
	remote.WriteFiles(map[string]string{
		"skills/review/pr/SKILL.md":        testkit.SkillMD("pr"),
		"skills/review/pr/scripts/run.sh":  "#!/bin/sh\necho pr\n",
		"skills/review/pr/refs/a/guide.md": "guide\n",
		"skills/review/pr/refs/b/guide.md": "guide\n",
		"skills/review/pr/empty.txt":       "",
		"skills/lint/SKILL.md":             testkit.SkillMD("lint"),
		"README.md":                        "not a skill\n",
	})
	remote.Chmod("skills/review/pr/scripts/run.sh", 0o755)
	remote.Commit("skills")
	remote.Tag("v1.0.0", true)
	remote.Push("main")
	return serveWithProofs(t, remote, "team", gitref.Pin{Kind: gitref.Tag, Value: "v1.0.0"}, "skills"), remote
}

// serveWithProofs serves remote as the git source name (pinned to pin,
// skills under path, through a real object store) beside a directory
// source ("local") over MCP, with proofs and diagnose's unproven list on;
// a request's X-Test-Only header narrows its caller to one source.
func serveWithProofs(t *testing.T, remote *gittest.Repo, name string, pin gitref.Pin, path string, opts ...func(*Options)) *httptest.Server {
	t.Helper()
	pool, err := gitstore.NewPool(t.TempDir(), gitstore.PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	repo, err := gitref.ParseRepo(remote.URL())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	testkit.WriteFiles(t, dir, map[string]string{"local/SKILL.md": testkit.SkillMD("local")})
	reg := registry.New(registry.Options{Git: pool})
	reg.SetSources([]catalog.Source{
		{Name: name, Kind: catalog.KindGit, Git: &catalog.GitSource{Repo: repo, Pin: pin, Path: path}},
		{Name: "local", Kind: catalog.KindDir, Dir: dir},
	})
	for _, n := range []string{name, "local"} {
		if err := reg.SyncNow(context.Background(), n); err != nil {
			t.Fatal(err)
		}
	}
	o := Options{
		Catalogs: reg, Proofs: reg,
		Unproven: func(ctx context.Context, source string) []Unproven {
			var out []Unproven
			for _, u := range reg.Unproven(ctx, source) {
				out = append(out, Unproven(u))
			}
			return out
		},
		CallerOf: func(h http.Header) Caller {
			if only := h.Get("X-Test-Only"); only != "" {
				return Caller{Name: only, Filter: catalog.Filter{Only: map[string]bool{only: true}}}
			}
			return Caller{}
		},
	}
	for _, f := range opts {
		f(&o)
	}
	s := New(o)
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	return hs
}

func connect(t *testing.T, url, only string) *sdk.ClientSession {
	t.Helper()
	tr := &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: headerTransport{only}}}
	c := sdk.NewClient(&sdk.Implementation{Name: "proof-test", Version: "1"}, nil)
	for _, err := range []error{
		sdk.AddSendingCustomMethod[*ListSkillsParams, *ListSkillsResult](c, "skills/list"),
		sdk.AddSendingCustomMethod[*GetSkillParams, *GetSkillResult](c, "skills/get"),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	cs, err := c.Connect(context.Background(), tr, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// entryProofs is the proof each skill's entry names (by skill URI), as
// skills/list and skills/get answer it.
func entryProofs(t *testing.T, cs *sdk.ClientSession) (list, get map[string]string) {
	t.Helper()
	ctx := context.Background()
	list, get = map[string]string{}, map[string]string{}
	for cursor := ""; ; {
		res, err := sdk.CallCustomMethod[*ListSkillsParams, *ListSkillsResult](ctx, cs, "skills/list", &ListSkillsParams{Cursor: cursor})
		if err != nil {
			t.Fatalf("skills/list: %v", err)
		}
		for _, e := range res.Skills {
			list[e.URI] = e.Meta.Provenance.Proof
			one, err := sdk.CallCustomMethod[*GetSkillParams, *GetSkillResult](ctx, cs, "skills/get", &GetSkillParams{URI: e.URI})
			if err != nil {
				t.Fatalf("skills/get %s: %v", e.URI, err)
			}
			get[e.URI] = one.Skill.Meta.Provenance.Proof
		}
		if cursor = res.NextCursor; cursor == "" {
			return list, get
		}
	}
}

// otherProvenances are the answers, besides entries and resources/list,
// that carry a skill's provenance (the skill at uri, named name), as
// JSON by what answered: the tools, the prompts, the catalog resource.
func otherProvenances(t *testing.T, cs *sdk.ClientSession, uri, name string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	add := func(what string, v any, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		b, _ := json.Marshal(v)
		out[what] = string(b)
	}
	for tool, args := range map[string]map[string]any{"list_skills": {}, "get_skill": {"uri": uri}, "read_skill_file": {"uri": uri}} {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
		if err == nil && res.IsError {
			err = fmt.Errorf("tool error %+v", res.Content)
		}
		add(tool, res, err)
	}
	prompts, err := cs.ListPrompts(ctx, nil)
	add("prompts/list", prompts, err)
	prompt, err := cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: name})
	add("prompts/get", prompt, err)
	cat, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "skillreg://catalog.json"})
	add("catalog.json", cat, err)
	return out
}

// TestProofResource lists and reads each git skill's proof with the
// official SDK's client, and checks it the way a client would (the
// format's rules 1-4 and 6) against the files the same server serves: the
// proof and the bytes agree, down to every file's git blob id.
func TestProofResource(t *testing.T) {
	hs, remote := proofServer(t)
	cs := connect(t, hs.URL, "")
	ctx := context.Background()
	list, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	proofs := map[string]*sdk.Resource{}
	metaProof := map[string]string{} // skill URI -> the proof its provenance names
	for _, r := range list.Resources {
		if strings.HasPrefix(r.URI, proof.URIPrefix) {
			proofs[r.URI] = r
			continue
		}
		if prov, ok := r.Meta[MetaProvenance].(map[string]any); ok {
			p, _ := prov["proof"].(string)
			metaProof[r.URI] = p
		}
	}
	want := []string{"skillreg://proof/team/lint", "skillreg://proof/team/review/pr"}
	if len(proofs) != len(want) {
		t.Fatalf("listed proofs %v, want %v", keysOf(proofs), want)
	}
	for _, u := range want {
		if r := proofs[u]; r == nil || r.MIMEType != "application/json" {
			t.Fatalf("proof %s listed as %+v", u, r)
		}
	}
	if metaProof["skill://team/review/pr/SKILL.md"] != "skillreg://proof/team/review/pr" || metaProof["skill://local/local/SKILL.md"] != "" {
		t.Fatalf("provenance proof members: %v", metaProof)
	}
	// The skills' entries, and every other answer with a provenance,
	// name the same proofs.
	list2, get := entryProofs(t, cs)
	for _, m := range []map[string]string{list2, get} {
		if m["skill://team/review/pr/SKILL.md"] != "skillreg://proof/team/review/pr" || m["skill://team/lint/SKILL.md"] != "skillreg://proof/team/lint" || m["skill://local/local/SKILL.md"] != "" {
			t.Fatalf("entries' proofs: %v", m)
		}
	}
	for what, v := range otherProvenances(t, cs, "skill://team/lint/SKILL.md", "lint") {
		if !strings.Contains(v, "skillreg://proof/team/lint") {
			t.Errorf("%s names no proof of lint: %s", what, v)
		}
	}
	commit := remote.Head()
	tag := remote.Git("rev-parse", "refs/tags/v1.0.0")
	for _, skillPath := range []string{"review/pr", "lint"} {
		res, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: proof.URI("team", skillPath)})
		if err != nil {
			t.Fatalf("read proof of %s: %v", skillPath, err)
		}
		if len(res.Contents) != 1 || res.Contents[0].MIMEType != "application/json" {
			t.Fatalf("proof contents %+v", res.Contents)
		}
		p, err := proof.Decode([]byte(res.Contents[0].Text))
		if err != nil {
			t.Fatal(err)
		}
		if p.Commit != commit || p.Tag != tag || p.Path != path.Join("skills", skillPath) || p.Source != "team" || p.Skill != skillPath {
			t.Fatalf("proof head %+v, want commit %s tag %s", p, commit, tag)
		}
		// The files the server serves for the skill, by path: the
		// manifest get_skill states, each file read with resources/read.
		served := map[string][]byte{}
		out, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "get_skill", Arguments: map[string]any{"uri": "skill://team/" + skillPath + "/SKILL.md"}})
		if err != nil || out.IsError {
			t.Fatalf("get_skill: %v %+v", err, out)
		}
		var got struct {
			Files []struct {
				Path string `json:"path"`
				URI  string `json:"uri"`
			} `json:"files"`
		}
		raw, _ := json.Marshal(out.StructuredContent)
		if err := json.Unmarshal(raw, &got); err != nil || len(got.Files) == 0 {
			t.Fatalf("get_skill answer %s: %v", raw, err)
		}
		for _, f := range got.Files {
			rr, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: f.URI})
			if err != nil {
				t.Fatal(err)
			}
			c := rr.Contents[0]
			data := c.Blob
			if data == nil {
				data = []byte(c.Text)
			}
			served[f.Path] = data
		}
		checkProof(t, p, served)
	}
}

// checkProof applies the format's rules 1-4 to p and the files served.
func checkProof(t *testing.T, p *proof.Proof, served map[string][]byte) {
	t.Helper()
	objs := map[string]proof.Object{}
	for _, o := range p.Objects {
		if proof.ObjectID(p.ObjectFormat, o.Type, o.Data) != o.ID {
			t.Fatalf("object %s does not hash to its id", o.ID)
		}
		objs[o.ID] = o
	}
	reached := map[string]bool{p.Commit: true}
	if p.Tag != "" {
		obj, typ, err := proof.TagTarget(p.ObjectFormat, objs[p.Tag].Data)
		if err != nil || obj != p.Commit || typ != "commit" {
			t.Fatalf("tag names %s %s: %v", typ, obj, err)
		}
		reached[p.Tag] = true
	}
	tree, err := proof.CommitTree(p.ObjectFormat, objs[p.Commit].Data)
	if err != nil {
		t.Fatal(err)
	}
	entries := func(id string) []proof.TreeEntry {
		o, ok := objs[id]
		if !ok || o.Type != "tree" {
			t.Fatalf("tree %s missing from the proof", id)
		}
		reached[id] = true
		es, err := proof.ParseTree(p.ObjectFormat, o.Data)
		if err != nil {
			t.Fatal(err)
		}
		return es
	}
	for _, c := range proof.Components(p.Path) {
		found := false
		for _, e := range entries(tree) {
			if e.Name == c && e.IsTree() {
				tree, found = e.ID, true
			}
		}
		if !found {
			t.Fatalf("path component %q not in its tree", c)
		}
	}
	files := map[string]string{}
	var walk func(id, at string)
	walk = func(id, at string) {
		for _, e := range entries(id) {
			rel := path.Join(at, e.Name)
			switch {
			case e.IsTree():
				walk(e.ID, rel)
			case e.IsFile():
				files[rel] = e.ID
			default:
				t.Fatalf("%s: mode %o below the skill", rel, e.Mode)
			}
		}
	}
	walk(tree, "")
	if len(files) != len(served) {
		t.Fatalf("the trees list %d files, the server served %d", len(files), len(served))
	}
	for rel, id := range files {
		data, ok := served[rel]
		if !ok || proof.BlobID(p.ObjectFormat, data) != id {
			t.Fatalf("%s: served bytes do not match blob %s (served: %v)", rel, id, ok)
		}
	}
	if len(reached) != len(p.Objects) {
		t.Fatalf("%d objects listed, %d reached", len(p.Objects), len(reached))
	}
}

func keysOf[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestProofResourceRefusals: a caller who may not see the source, a
// directory source's skill, an unknown skill and a malformed URI get
// errors, and diagnose reports no unproven skill for this small source.
func TestProofResourceRefusals(t *testing.T) {
	hs, _ := proofServer(t)
	ctx := context.Background()
	other := connect(t, hs.URL, "local")
	if _, err := other.ReadResource(ctx, &sdk.ReadResourceParams{URI: "skillreg://proof/team/lint"}); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("a caller who cannot see team read its proof: %v", err)
	}
	list, err := other.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range list.Resources {
		if strings.HasPrefix(r.URI, proof.URIPrefix) {
			t.Fatalf("a caller who sees only a directory source is listed proof %s", r.URI)
		}
	}
	cs := connect(t, hs.URL, "")
	for _, uri := range []string{"skillreg://proof/local/local", "skillreg://proof/team/nope", "skillreg://proof/team/a/../lint", "skillreg://proof/team"} {
		if _, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri}); err == nil {
			t.Errorf("%s: read succeeded", uri)
		}
	}
	out, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "diagnose", Arguments: map[string]any{}})
	if err != nil || out.IsError {
		t.Fatalf("diagnose: %v %+v", err, out)
	}
	raw, _ := json.Marshal(out.StructuredContent)
	if strings.Contains(string(raw), `"unproven"`) {
		t.Fatalf("diagnose reports unproven skills: %s", raw)
	}
}

// wideRemote is a repository whose one skill x has a proof over the
// bound: its directory sits in a root tree of 900 entries with
// 4,000-byte names.
func wideRemote(t *testing.T) *gittest.Repo {
	t.Helper()
	return gittest.NewServer(t).WideRepo("wide")
}

// TestDiagnoseUnproven serves a skill whose proof would pass the bound (its
// directory sits in a root tree of 900 entries with 4,000-byte names):
// reading the proof answers the too-large error, and diagnose names the
// skill under unproven for a caller who sees its source, not for another.
func TestDiagnoseUnproven(t *testing.T) {
	hs := serveWithProofs(t, wideRemote(t), "wide", gitref.Pin{Kind: gitref.Branch, Value: "main"}, "")
	ctx := context.Background()
	diagnose := func(cs *sdk.ClientSession) DiagnoseOutput {
		t.Helper()
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "diagnose", Arguments: map[string]any{}})
		if err != nil || res.IsError {
			t.Fatalf("diagnose: %v %+v", err, res)
		}
		raw, _ := json.Marshal(res.StructuredContent)
		var d DiagnoseOutput
		if err := json.Unmarshal(raw, &d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	cs := connect(t, hs.URL, "")
	// resources/list leaves out the proof resources/read refuses: before
	// diagnose has sized the source, and after (from what it keeps).
	listed := func() []string {
		t.Helper()
		var uris []string
		for r, err := range cs.Resources(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			uris = append(uris, r.URI)
		}
		return uris
	}
	if uris := listed(); !slices.Contains(uris, "skill://wide/x/SKILL.md") || slices.Contains(uris, "skillreg://proof/wide/x") {
		t.Fatalf("resources/list lists %v: want the skill, not its proof", uris)
	}
	if _, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "skillreg://proof/wide/x"}); err == nil || !strings.Contains(err.Error(), "no proof: it would be larger than") {
		t.Fatalf("reading the too-large proof: %v", err)
	}
	if u := diagnose(cs).Unproven; len(u) != 1 || u[0].Source != "wide" || u[0].Path != "x" || u[0].Name != "x" || !strings.Contains(u[0].Reason, "larger than") {
		t.Fatalf("diagnose unproven = %+v", u)
	}
	if u := diagnose(connect(t, hs.URL, "local")).Unproven; len(u) != 0 {
		t.Fatalf("a caller who sees only local is told of %+v", u)
	}
	if uris := listed(); slices.Contains(uris, "skillreg://proof/wide/x") {
		t.Fatalf("resources/list after diagnose lists %v", uris)
	}
}

// TestEntryNamesOnlyServedProofs: a skill whose proof resources/read
// refuses (too large) has an entry whose provenance names no proof, in
// skills/list and skills/get, on the fast path and off it, on a 2025-11-25
// session and a 2026-07-28 request, as resources/list leaves that proof
// out (and its SKILL.md resource's provenance names none either): a
// client that follows a proof member is never refused.
func TestEntryNamesOnlyServedProofs(t *testing.T) {
	remote := wideRemote(t)
	for _, fast := range []bool{true, false} {
		t.Run(fmt.Sprintf("fast=%v", fast), func(t *testing.T) {
			hs := serveWithProofs(t, remote, "wide", gitref.Pin{Kind: gitref.Branch, Value: "main"}, "", func(o *Options) { o.FastPath = &fast })
			list, get := entryProofs(t, connect(t, hs.URL, ""))
			for what, m := range map[string]map[string]string{"skills/list": list, "skills/get": get} {
				if p, ok := m["skill://wide/x/SKILL.md"]; !ok || p != "" {
					t.Errorf("%s: the too-large proof's skill: listed %v, its entry names proof %q", what, ok, p)
				}
			}
			for r, err := range connect(t, hs.URL, "").Resources(context.Background(), nil) {
				if err != nil {
					t.Fatal(err)
				}
				if prov, _ := r.Meta[MetaProvenance].(map[string]any); prov["proof"] != nil {
					t.Errorf("resources/list: %s names proof %v", r.URI, prov["proof"])
				}
			}
			for what, v := range otherProvenances(t, connect(t, hs.URL, ""), "skill://wide/x/SKILL.md", "x") {
				if strings.Contains(v, "skillreg://proof/wide/x") {
					t.Errorf("%s names the proof resources/read refuses: %s", what, v)
				}
			}
			_, body := post(t, hs.URL, map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "skills/list"}, `{"jsonrpc":"2.0","id":1,"method":"skills/list","params":{`+meta+`}}`)
			if !strings.Contains(string(body.Result), `"skill://wide/x/SKILL.md"`) || strings.Contains(string(body.Result), `"proof":`) {
				t.Errorf("2026-07-28 skills/list: %s", body.Result)
			}
		})
	}
}
