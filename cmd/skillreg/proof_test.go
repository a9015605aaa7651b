package main

import (
	"context"
	"encoding/json"
	"path"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skillreg/skillreg/internal/sigtest"
	"github.com/skillreg/skillreg/proof"
	"github.com/skillreg/skillreg/sigverify"
)

// TestProvenanceAndProofEndToEnd: a running daemon serving a source whose
// commits must carry an OpenPGP signature states the signature (who, with
// which key) and the proof's URI in every skill's provenance, on MCP, in
// both discovery indexes, in the marketplace's plugins and on the web
// page; and the proof it serves ties the bytes it serves to that signed
// commit: the commit's signature verifies with the signer's public key
// alone, and the trees name every served file by its git blob id, as git
// itself has them.
func TestProvenanceAndProofEndToEnd(t *testing.T) {
	key := sigtest.NewGPGKey(t, "Release Bot <release@example.com>", sigtest.GPGOptions{})
	remote := scriptRemote(t)
	signed := sigtest.Commit(remote, key, "signed release")
	remote.Push("main")
	dir := t.TempDir()
	keyFile := key.WritePublic(t, dir)
	cfg := "public_url: http://127.0.0.1\n" + teamSource(remote) + "    verify:\n      mode: head\n      openpgp_keys: [" + keyFile + "]\n"
	d := startDaemon(t, cfg, dir)
	waitUntil(t, func() bool { return readyzSource(t, d.URL).Commit == signed })

	wantSig := sigverify.Signature{Verified: true, Type: "openpgp", Key: key.Fingerprint, Signer: "Release Bot <release@example.com>"}
	checkProv := func(where string, raw any) {
		t.Helper()
		b, _ := json.Marshal(raw)
		var p struct {
			Commit    string               `json:"commit"`
			Path      string               `json:"path"`
			Signature *sigverify.Signature `json:"signature"`
			Proof     string               `json:"proof"`
		}
		if err := json.Unmarshal(b, &p); err != nil || p.Signature == nil || *p.Signature != wantSig || p.Commit != signed ||
			!strings.HasPrefix(p.Proof, "skillreg://proof/team/") || p.Proof != proof.URI("team", strings.TrimPrefix(p.Path, "skills/")) {
			t.Errorf("%s: provenance %s, want signature %+v, commit %s and its proof", where, b, wantSig, signed)
		}
	}

	// MCP: every entry's _meta, then the proof of each skill.
	cs := connect(t, d.URL, "2025-11-25")
	entries, _ := listAll(t, cs)
	if len(entries) != 2 {
		t.Fatalf("listed %d skills", len(entries))
	}
	keys, err := sigverify.LoadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		checkProv("skills/list "+e.URI, e.Meta.Provenance)
		p := readProof(t, cs, e.Meta.Provenance.Proof)
		if p.Commit != signed || p.Path != e.Meta.Provenance.Path || p.Objects[0].ID != signed || p.Objects[0].Type != "commit" {
			t.Fatalf("%s: proof of %s at %s", e.URI, p.Path, p.Commit)
		}
		got, err := keys.Verify(sigverify.Commit, p.Objects[0].Data)
		if err != nil || got != wantSig {
			t.Fatalf("%s: the proof's commit verifies as %+v, %v", e.URI, got, err)
		}
		// The trees name exactly the files git has under the skill, and
		// each file the daemon serves hashes to its blob id.
		files := proofFiles(t, p)
		lsTree := remote.Git("ls-tree", "-r", "--format=%(objectname) %(path)", signed+":"+p.Path)
		if len(strings.Split(lsTree, "\n")) != len(files) {
			t.Fatalf("%s: the proof names %d files, git %d:\n%s", e.URI, len(files), len(strings.Split(lsTree, "\n")), lsTree)
		}
		for _, line := range strings.Split(lsTree, "\n") {
			id, rel, _ := strings.Cut(line, " ")
			if files[rel] != id {
				t.Errorf("%s: %s is %s in the proof, %s in git", e.URI, rel, files[rel], id)
			}
			res, err := cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: "skill://team/" + strings.TrimPrefix(p.Path, "skills/") + "/" + rel})
			if err != nil {
				t.Fatal(err)
			}
			data := res.Contents[0].Blob
			if data == nil {
				data = []byte(res.Contents[0].Text)
			}
			if proof.BlobID(p.ObjectFormat, data) != id {
				t.Errorf("%s: served %s does not hash to its blob %s", e.URI, rel, id)
			}
		}
	}

	// The installers' indexes and the marketplace.
	for _, idx := range []string{"/.well-known/agent-skills/index.json", "/.well-known/skills/index.json"} {
		var doc struct {
			Skills []map[string]any `json:"skills"`
		}
		if err := json.Unmarshal([]byte(getBody(t, d.URL+idx)), &doc); err != nil || len(doc.Skills) != 2 {
			t.Fatalf("%s: %v %+v", idx, err, doc)
		}
		for _, s := range doc.Skills {
			checkProv(idx+" "+s["name"].(string), s["dev.skillreg/provenance"])
		}
	}
	var mp struct {
		Plugins []struct {
			Name     string         `json:"name"`
			Metadata map[string]any `json:"metadata"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal([]byte(getBody(t, d.URL+"/marketplace.json")), &mp); err != nil || len(mp.Plugins) != 3 {
		t.Fatalf("marketplace: %v %+v", err, mp)
	}
	for _, p := range mp.Plugins {
		if p.Name != "team-all" {
			checkProv("marketplace "+p.Name, p.Metadata["dev.skillreg/provenance"])
		}
	}

	// The web catalog.
	page := getBody(t, d.URL+"/skills/team/deploy")
	for _, want := range []string{"<dt>Signature</dt>", key.Fingerprint, "Release Bot &lt;release@example.com&gt;", "skillreg://proof/team/deploy"} {
		if !strings.Contains(page, want) {
			t.Errorf("the skill page does not show %q", want)
		}
	}
}

// readProof reads and decodes a proof resource.
func readProof(t *testing.T, cs *sdk.ClientSession, uri string) *proof.Proof {
	t.Helper()
	res, err := cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatalf("read %s: %v", uri, err)
	}
	if len(res.Contents) != 1 || res.Contents[0].MIMEType != "application/json" {
		t.Fatalf("%s: contents %+v", uri, res.Contents)
	}
	p, err := proof.Decode([]byte(res.Contents[0].Text))
	if err != nil {
		t.Fatalf("%s: %v", uri, err)
	}
	return p
}

// proofFiles walks a proof from its commit along its path and returns the
// blob id of every file below the skill's directory, by relative path.
func proofFiles(t *testing.T, p *proof.Proof) map[string]string {
	t.Helper()
	objs := map[string][]byte{}
	for _, o := range p.Objects {
		if proof.ObjectID(p.ObjectFormat, o.Type, o.Data) != o.ID {
			t.Fatalf("object %s does not hash to its id", o.ID)
		}
		objs[o.ID] = o.Data
	}
	tree, err := proof.CommitTree(p.ObjectFormat, objs[p.Commit])
	if err != nil {
		t.Fatal(err)
	}
	parse := func(id string) []proof.TreeEntry {
		es, err := proof.ParseTree(p.ObjectFormat, objs[id])
		if err != nil || objs[id] == nil {
			t.Fatalf("tree %s: %v (in the proof: %v)", id, err, objs[id] != nil)
		}
		return es
	}
	for _, c := range proof.Components(p.Path) {
		next := ""
		for _, e := range parse(tree) {
			if e.Name == c && e.IsTree() {
				next = e.ID
			}
		}
		if next == "" {
			t.Fatalf("no directory %q on the proof's path", c)
		}
		tree = next
	}
	files := map[string]string{}
	var walk func(id, at string)
	walk = func(id, at string) {
		for _, e := range parse(id) {
			if e.IsTree() {
				walk(e.ID, path.Join(at, e.Name))
			} else {
				files[path.Join(at, e.Name)] = e.ID
			}
		}
	}
	walk(tree, "")
	return files
}
