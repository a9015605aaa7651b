package hostile

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/internal/gittest"
	"github.com/skillreg/skillreg/internal/sigtest"
	"github.com/skillreg/skillreg/internal/testkit"
	"github.com/skillreg/skillreg/proof"
)

// GitProof builds the proof of the skill at path (from the repository's
// root, "" for the root) in commit (and the annotated tag, when not "")
// of the repository in dir, from git's own view of the objects (git
// cat-file and git ls-tree), not from proof.Build: tests of the client
// check it against git, and a round trip with the daemon checks Build.
// source and skill name the skill on the server; repository is the remote.
func GitProof(tb testing.TB, dir, repository, source, skillPath, path, commit, tag string) *proof.Proof {
	tb.Helper()
	p := &proof.Proof{
		Proof: proof.Version, Source: source, Skill: skillPath, Repository: repository,
		ObjectFormat: strings.TrimSpace(git(tb, dir, "rev-parse", "--show-object-format")),
		Commit:       commit, Tag: tag, Path: path,
	}
	add := func(id, typ string) {
		p.Objects = append(p.Objects, proof.Object{ID: id, Type: typ, Data: []byte(git(tb, dir, "cat-file", typ, id))})
	}
	add(commit, proof.TypeCommit)
	if tag != "" {
		add(tag, proof.TypeTag)
	}
	tree := strings.TrimSpace(git(tb, dir, "rev-parse", commit+"^{tree}"))
	add(tree, proof.TypeTree)
	for _, name := range proof.Components(path) {
		tree = lsTreeID(tb, dir, tree, name)
		add(tree, proof.TypeTree)
	}
	// Every tree below, each once (identical directories share a tree).
	seen := map[string]bool{tree: true}
	for _, line := range strings.Split(git(tb, dir, "ls-tree", "-r", "-t", tree), "\n") {
		meta, _, ok := strings.Cut(line, "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 3 || f[1] != "tree" || seen[f[2]] {
			continue
		}
		seen[f[2]] = true
		add(f[2], proof.TypeTree)
	}
	return p
}

func lsTreeID(tb testing.TB, dir, tree, name string) string {
	tb.Helper()
	out := git(tb, dir, "ls-tree", tree, "--", name)
	f := strings.Fields(out)
	if len(f) < 3 || f[1] != "tree" {
		tb.Fatalf("hostile: %s has no directory %q: %q", tree, name, out)
	}
	return f[2]
}

func git(tb testing.TB, dir string, args ...string) string {
	tb.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), gittest.Env()...)
	// One date for every commit and tag: the tests' history is the same
	// bytes on every run, apart from the keys.
	cmd.Env = append(cmd.Env, "GIT_COMMITTER_DATE=@1700000000 +0000", "GIT_AUTHOR_DATE=@1700000000 +0000")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		tb.Fatalf("hostile: git %s: %v: %s", strings.Join(args, " "), err, errb.String())
	}
	return out.String()
}

// EncodeProof is p's JSON.
func EncodeProof(tb testing.TB, p *proof.Proof) []byte {
	tb.Helper()
	b, err := p.Encode()
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// CloneProof returns a deep copy of p, for a test to change.
func CloneProof(p *proof.Proof) *proof.Proof {
	c := *p
	c.Objects = make([]proof.Object, len(p.Objects))
	for i, o := range p.Objects {
		o.Data = bytes.Clone(o.Data)
		c.Objects[i] = o
	}
	return &c
}

// FindObject returns the index of the object id in p, or -1.
func FindObject(p *proof.Proof, id string) int {
	for i, o := range p.Objects {
		if o.ID == id {
			return i
		}
	}
	return -1
}

// SkillTree returns the id of the tree of the skill's directory in p (the
// last tree on its path).
func SkillTree(tb testing.TB, p *proof.Proof) string {
	tb.Helper()
	i := FindObject(p, p.Commit)
	if i < 0 {
		tb.Fatalf("hostile: the proof lacks its commit")
	}
	id, err := proof.CommitTree(p.ObjectFormat, p.Objects[i].Data)
	if err != nil {
		tb.Fatal(err)
	}
	for _, name := range proof.Components(p.Path) {
		j := FindObject(p, id)
		entries, err := proof.ParseTree(p.ObjectFormat, p.Objects[j].Data)
		if err != nil {
			tb.Fatal(err)
		}
		found := false
		for _, e := range entries {
			if e.Name == name {
				id, found = e.ID, true
			}
		}
		if !found {
			tb.Fatalf("hostile: no %q on the proof's path", name)
		}
	}
	return id
}

// RewriteObject replaces the data of object id in p, as a server that
// forges history would: the object gets the id of its new data, and every
// object naming the old id (a tree's entry, the commit's tree header, the
// tag's object header) is rewritten in turn, up to the commit and the tag,
// whose signatures are left as they were; p.Commit and p.Tag follow. The
// proof stays self-consistent in rules 1 to 4 (and 6, if the entry is
// made to match), so only the signature check can refuse it.
func RewriteObject(tb testing.TB, p *proof.Proof, id string, data []byte) {
	tb.Helper()
	i := FindObject(p, id)
	if i < 0 {
		tb.Fatalf("hostile: no object %s in the proof", id)
	}
	o := &p.Objects[i]
	o.Data = data
	newID := proof.ObjectID(p.ObjectFormat, o.Type, data)
	o.ID = newID
	switch id {
	case p.Commit:
		p.Commit = newID
	case p.Tag:
		p.Tag = newID
	}
	oldBin, _ := hex.DecodeString(id)
	newBin, _ := hex.DecodeString(newID)
	for j := range p.Objects {
		r := &p.Objects[j]
		if r.ID == newID {
			continue
		}
		var changed []byte
		switch r.Type {
		case proof.TypeTree:
			if bytes.Contains(r.Data, oldBin) {
				changed = bytes.ReplaceAll(r.Data, oldBin, newBin)
			}
		case proof.TypeCommit:
			if bytes.HasPrefix(r.Data, []byte("tree "+id+"\n")) {
				changed = append([]byte("tree "+newID+"\n"), r.Data[len("tree "+id+"\n"):]...)
			}
		case proof.TypeTag:
			if bytes.HasPrefix(r.Data, []byte("object "+id+"\n")) {
				changed = append([]byte("object "+newID+"\n"), r.Data[len("object "+id+"\n"):]...)
			}
		}
		if changed != nil {
			RewriteObject(tb, p, r.ID, changed)
		}
	}
}

// DropEntry removes the entry name from the tree id in p, as a server
// hiding a file or folder would: the tree and everything up to the commit
// are rewritten (RewriteObject), and the trees only the entry reached are
// left out of the proof, so that only the signature check can refuse it.
func DropEntry(tb testing.TB, p *proof.Proof, id, name string) {
	tb.Helper()
	i := FindObject(p, id)
	if i < 0 {
		tb.Fatalf("hostile: no tree %s in the proof", id)
	}
	entries, err := proof.ParseTree(p.ObjectFormat, p.Objects[i].Data)
	if err != nil {
		tb.Fatal(err)
	}
	RewriteObject(tb, p, id, WithoutEntry(tb, p.ObjectFormat, p.Objects[i].Data, name))
	for _, e := range entries {
		if e.Name == name && e.IsTree() {
			dropTree(tb, p, e.ID)
		}
	}
}

// dropTree removes a tree and the trees below it from p.
func dropTree(tb testing.TB, p *proof.Proof, id string) {
	i := FindObject(p, id)
	if i < 0 {
		return
	}
	entries, err := proof.ParseTree(p.ObjectFormat, p.Objects[i].Data)
	if err != nil {
		tb.Fatal(err)
	}
	p.Objects = append(p.Objects[:i], p.Objects[i+1:]...)
	for _, e := range entries {
		if e.IsTree() {
			dropTree(tb, p, e.ID)
		}
	}
}

// WithoutEntry returns a tree's data without the entry named name.
func WithoutEntry(tb testing.TB, format string, data []byte, name string) []byte {
	tb.Helper()
	entries, err := proof.ParseTree(format, data)
	if err != nil {
		tb.Fatal(err)
	}
	var out []byte
	found := false
	for _, e := range entries {
		if e.Name == name {
			found = true
			continue
		}
		bin, _ := hex.DecodeString(e.ID)
		out = append(out, fmt.Sprintf("%o %s\x00", e.Mode, e.Name)...)
		out = append(out, bin...)
	}
	if !found {
		tb.Fatalf("hostile: the tree has no entry %q", name)
	}
	return out
}

// Repo is a repository in a test folder (SHA-1 or SHA-256 object ids)
// whose commits and tags git signs with a key from internal/sigtest, or
// leaves unsigned: the history a server proves and a test forges.
type Repo struct {
	Dir    string
	Signer sigtest.Signer
}

// NewRepo makes an empty repository of object format ("sha1" or
// "sha256") signing with signer.
func NewRepo(tb testing.TB, format string, signer sigtest.Signer) *Repo {
	tb.Helper()
	r := &Repo{Dir: filepath.Join(tb.TempDir(), "repo"), Signer: signer}
	git(tb, filepath.Dir(r.Dir), "init", "-q", "--object-format="+format, "--initial-branch=main", r.Dir)
	return r
}

// Git runs git in the repository with the signer's configuration.
func (r *Repo) Git(tb testing.TB, args ...string) string {
	tb.Helper()
	cfg := append(r.Signer.GitConfig(), "-c", "user.name=alice", "-c", "user.email=alice@example.com")
	return strings.TrimSpace(git(tb, r.Dir, append(cfg, args...)...))
}

// Commit makes the work tree hold exactly files and commits it, signed or
// not; it returns the commit id.
func (r *Repo) Commit(tb testing.TB, files map[string]string, signed bool) string {
	tb.Helper()
	r.Git(tb, "rm", "-rq", "--ignore-unmatch", ".")
	testkit.WriteFiles(tb, r.Dir, files)
	r.Git(tb, "add", "-A")
	args := []string{"commit", "-q", "--allow-empty", "-m", "c"}
	if signed {
		args = append(args, "-S")
	}
	r.Git(tb, args...)
	return r.Git(tb, "rev-parse", "HEAD")
}

// Tag makes name an annotated tag of commit, signed or not; it returns the
// tag object's id.
func (r *Repo) Tag(tb testing.TB, name, commit string, signed bool) string {
	tb.Helper()
	args := []string{"tag", "-a", "-m", name, name, commit}
	if signed {
		args = append(args, "-s")
	}
	r.Git(tb, args...)
	return r.Git(tb, "rev-parse", name)
}

// SignedSkill is one skill of a commit of a Repo, ready to serve: its files
// as committed, the commit, and its proof from git.
type SignedSkill struct {
	Name   string
	Files  map[string]string // inside the skill
	Commit string
	Proof  *proof.Proof
}

// SignedSkills commits the named skills (skills/<name>, three files each)
// in a new SHA-1 repository, signed by signer, and returns the repository
// and each skill with its proof, served under the source "team".
func SignedSkills(tb testing.TB, signer sigtest.Signer, names ...string) (*Repo, map[string]SignedSkill) {
	tb.Helper()
	r := NewRepo(tb, "sha1", signer)
	all := map[string]string{}
	per := map[string]map[string]string{}
	for _, n := range names {
		per[n] = map[string]string{"SKILL.md": testkit.SkillMD(n), "references/guide.md": "# " + n + " guide\n", "scripts/run.sh": "#!/bin/sh\necho " + n + "\n"}
		for p, c := range per[n] {
			all["skills/"+n+"/"+p] = c
		}
	}
	commit := r.Commit(tb, all, true)
	out := map[string]SignedSkill{}
	for _, n := range names {
		out[n] = SignedSkill{Name: n, Files: per[n], Commit: commit,
			Proof: GitProof(tb, r.Dir, "https://example.com/acme/skills", "team", n, "skills/"+n, commit, "")}
	}
	return r, out
}

// Serve is the Server's Skill for s, honest until the test changes it:
// at team/<name>, with its proof and the provenance skillreg states.
func (s SignedSkill) Serve(tb testing.TB) Skill {
	tb.Helper()
	files := make(map[string]string, len(s.Files))
	for p, c := range s.Files {
		files[p] = c
	}
	return Skill{
		Path: "team/" + s.Name, Files: files,
		Proof:      EncodeProof(tb, s.Proof),
		Provenance: map[string]string{"commit": s.Commit, "path": "skills/" + s.Name, "repository": "https://example.com/acme/skills"},
	}
}
