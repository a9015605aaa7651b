// Package pull is the host side of the MCP Skills extension (SEP-2640): it
// installs skills from any conformant server into an agent's skills folder,
// verified and locked.
//
// A skill is written only when every file of it verified: each file is read
// through resources/read and checked for size, SHA-256 digest and (for
// SKILL.md) frontmatter, field by field, against the skill's entry; the
// entry itself must stay within the extension's limits, list only
// canonical URIs inside the skill, and not change while the files are read.
// The first failed check stops the skill (no further file of it is read on
// the connection) and nothing of it is written; other skills proceed.
// Writing is atomic per skill (a temporary folder renamed into place, the
// old version kept until the new one is complete), and skills.lock records
// what was installed so that `--locked` can reproduce it exactly.
//
// With keys (Options.Keys, `pull --verify-keys`), pull trusts the server
// for nothing: each skill's proof (the git commit, tag and tree objects its
// provenance names) must tie the verified bytes to a commit or tag signed
// by one of the keys (proof.Check), or the skill is refused, and the lock
// records the commit, signer and key.
package pull

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/skillreg/skillreg/sigverify"
)

// Errors about what the user asked for.
var (
	// ErrAmbiguous is matched by an *AmbiguousError.
	ErrAmbiguous = errors.New("ambiguous skill name")
	// ErrConflict is returned for a folder in the target that skills.lock
	// does not record: it was not installed by pull, so pull does not
	// replace it unless forced.
	ErrConflict = errors.New("folder exists and is not recorded in " + LockFile)
)

// AmbiguousError is a skill name served by several skills.
type AmbiguousError struct {
	Name       string
	Candidates []string // their URIs, sorted
}

func (e *AmbiguousError) Error() string {
	return fmt.Sprintf("%q names %d skills; name one by URI: %s", e.Name, len(e.Candidates), strings.Join(e.Candidates, ", "))
}

// Is makes errors.Is(err, ErrAmbiguous) true.
func (e *AmbiguousError) Is(target error) bool { return target == ErrAmbiguous }

// Options configures a run.
type Options struct {
	// Dir is the target folder: skills go to Dir/<name>/, the lock to
	// Dir/skills.lock.
	Dir string
	// Server is the MCP endpoint to pull from. In the lock-driven runs
	// (Locked, Update, Outdated) each skill comes from the server its lock
	// entry names, and a non-empty Server restricts the run to skills
	// locked from it.
	Server string
	// Token is sent as a bearer token to Server only, never to a server
	// the lock names otherwise.
	Token string
	// ClientName and ClientVersion are the MCP client info (the skill-meta
	// tool detects the client from the name).
	ClientName, ClientVersion string
	// ProtocolVersion to ask servers for (empty: the newest).
	ProtocolVersion string
	// Force replaces a folder that skills.lock does not record.
	Force bool
	// Keys, when set, require a proof for every skill installed: its
	// files must be the blobs of a commit (or tag) signed by one of the
	// keys, or the skill is refused (see ClientOptions.Keys). The lock
	// records what was verified, and Locked then needs Keys to install.
	Keys *sigverify.Keys
	// HTTPClient carries the requests (nil: a default one).
	HTTPClient *http.Client
	// Logger receives debug and warning lines; nil discards them.
	Logger *slog.Logger
	// Now stamps pulled_at (nil: time.Now).
	Now func() time.Time
}

func (o *Options) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

// Installed is a skill that was written.
type Installed struct {
	Name, URI string
	Files     int
	// Previous reports whether skills.lock held the skill before; Change
	// is then the difference from that version.
	Previous bool
	Change   Change
	// OldCommit and NewCommit are the provenance commits, when the server
	// sends them.
	OldCommit, NewCommit string
	// Verified is what the skill's proof proved (with Options.Keys).
	Verified *Verified
}

// Failure is a skill that was not written, and why.
type Failure struct {
	Name, URI string
	Err       error
}

// Report is what a run did, skill by skill, sorted by name.
type Report struct {
	Installed []Installed
	Failed    []Failure
}

func (r *Report) fail(name, uri string, err error) {
	r.Failed = append(r.Failed, Failure{Name: name, URI: uri, Err: err})
}

// connections opens one client per server, the token going only to
// Options.Server.
type connections struct {
	o  Options
	by map[string]*Client
}

func (cc *connections) get(ctx context.Context, server string) (*Client, error) {
	if c, ok := cc.by[server]; ok {
		return c, nil
	}
	token := ""
	if server == cc.o.Server {
		token = cc.o.Token
	}
	c, err := Connect(ctx, ClientOptions{
		Server: server, Token: token,
		ClientName: cc.o.ClientName, ClientVersion: cc.o.ClientVersion,
		ProtocolVersion: cc.o.ProtocolVersion,
		HTTPClient:      cc.o.HTTPClient, Logger: cc.o.Logger,
		Keys: cc.o.Keys,
	})
	if err != nil {
		return nil, err
	}
	if cc.by == nil {
		cc.by = map[string]*Client{}
	}
	cc.by[server] = c
	return c, nil
}

func (cc *connections) close() {
	for _, c := range cc.by {
		c.Close()
	}
}

// Pull installs the named skills (all the server lists when names is
// empty) from Options.Server into Options.Dir and records them in
// skills.lock. A name is a SKILL.md URI or a frontmatter name; a name that
// is not served, or that several skills share, is an error before anything
// is fetched, and so is a skill skills.lock records as verified when
// Options.Keys is not set (ErrKeysRequired). Each skill is fetched,
// verified and written on its own: one
// that fails is reported in Report.Failed and the others proceed. The
// returned error is for what ends the run (the server unreachable, a
// protocol error, a bad name or lock).
func Pull(ctx context.Context, o Options, names []string) (*Report, error) {
	lock, err := ReadLock(o.Dir)
	if errors.Is(err, ErrNoLock) {
		lock, err = &Lock{Version: LockVersion}, nil
	}
	if err != nil {
		return nil, err
	}
	cc := &connections{o: o}
	defer cc.close()
	c, err := cc.get(ctx, o.Server)
	if err != nil {
		return nil, err
	}
	rep := &Report{}
	entries, err := selectEntries(ctx, c, names, rep)
	if err != nil {
		return nil, err
	}
	if o.Keys == nil {
		var verified []string
		for _, e := range entries {
			if prev, ok := lock.Find(entryName(e)); ok && prev.Verified != nil {
				verified = append(verified, prev.Name)
			}
		}
		if err := keysRequired(verified); err != nil {
			return nil, err
		}
	}
	for _, e := range entries {
		name := entryName(e)
		if prev, ok := lock.Find(name); !ok || prev.Server != o.Server || prev.URI != e.URI {
			if err := checkFree(o.Dir, name, ok, o.Force); err != nil {
				rep.fail(name, e.URI, err)
				continue
			}
		}
		s, err := c.Fetch(ctx, e)
		if errors.Is(err, ErrVerify) {
			rep.fail(name, e.URI, err)
			continue
		}
		if err != nil {
			return rep, err
		}
		if in, ok := installAndLock(o, lock, s, rep); ok {
			rep.Installed = append(rep.Installed, in)
		}
	}
	if len(rep.Installed) > 0 {
		if err := WriteLock(o.Dir, lock); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// keysRequired is ErrKeysRequired for the named locked skills, or nil: a
// skill the lock records as verified is installed again only verified, so
// that forgetting the keys never turns it into an unverified one.
func keysRequired(names []string) error {
	if len(names) == 0 {
		return nil
	}
	return fmt.Errorf("%s (%s): %w", LockFile, strings.Join(names, ", "), ErrKeysRequired)
}

// installAndLock writes a verified skill and moves its lock entry forward;
// the entry stays as it was (pulled_at included) when nothing changed, so a
// pull that finds nothing new leaves skills.lock byte for byte the same.
func installAndLock(o Options, lock *Lock, s *Skill, rep *Report) (Installed, bool) {
	if err := install(o.Dir, s); err != nil {
		rep.fail(s.Name, s.URI, err)
		return Installed{}, false
	}
	entry := LockedSkill{
		Name: s.Name, Provenance: s.Provenance, PulledAt: o.now().UTC().Format(time.RFC3339),
		Resources: lockResources(s.Resources), Server: s.Server, URI: s.URI,
		Verified: s.Verified,
	}
	in := Installed{Name: s.Name, URI: s.URI, Files: len(s.Files), Verified: s.Verified}
	if s.Provenance != nil {
		in.NewCommit = s.Provenance.Commit
	}
	prev, had := lock.Find(s.Name)
	if had {
		in.Previous = true
		if prev.Provenance != nil {
			in.OldCommit = prev.Provenance.Commit
		}
		dir := strings.TrimSuffix(s.URI, "/SKILL.md")
		if prev.URI != s.URI {
			// Another skill under the same name: every file is new.
			in.Change = diffResources(dir, nil, s.Resources)
		} else {
			in.Change = diffResources(dir, prev.resources(), s.Resources)
		}
		if prev.Server == entry.Server && prev.URI == entry.URI && in.Change.Empty() && prev.Provenance.equal(entry.Provenance) && prev.Verified.equal(entry.Verified) {
			return in, true
		}
	}
	lock.put(entry)
	return in, true
}

// checkFree refuses to replace a folder that pull did not install.
func checkFree(dir, name string, locked, force bool) error {
	if locked || force {
		return nil
	}
	_, err := os.Lstat(filepath.Join(dir, name))
	switch {
	case err == nil:
		return fmt.Errorf("%s: %w; move it away or pass --force", filepath.Join(dir, name), ErrConflict)
	case errors.Is(err, fs.ErrNotExist):
		return nil
	default:
		return fmt.Errorf("check %s: %w", filepath.Join(dir, name), err)
	}
}

// selectEntries resolves names to entries. Problems with the names
// themselves (not served, ambiguous) end the run; with no names, skills
// that share a name are reported as failures and the rest proceed.
func selectEntries(ctx context.Context, c *Client, names []string, rep *Report) ([]Entry, error) {
	var listed []Entry
	needList := len(names) == 0
	for _, n := range names {
		if !strings.HasPrefix(n, uriScheme) {
			needList = true
		}
	}
	if needList {
		var err error
		if listed, err = c.List(ctx); err != nil {
			return nil, err
		}
	}
	var picked []Entry
	if len(names) == 0 {
		picked = listed
	} else {
		var problems []error
		seen := map[string]bool{}
		for _, n := range names {
			e, err := resolveName(ctx, c, listed, n)
			if err != nil {
				problems = append(problems, err)
				continue
			}
			if !seen[e.URI] {
				seen[e.URI] = true
				picked = append(picked, *e)
			}
		}
		if len(problems) > 0 {
			return nil, errors.Join(problems...)
		}
	}
	// Two skills cannot share a folder.
	byName := map[string][]Entry{}
	for _, e := range picked {
		byName[entryName(e)] = append(byName[entryName(e)], e)
	}
	var out []Entry
	var clashes []error
	for name, es := range byName {
		if len(es) == 1 {
			out = append(out, es[0])
			continue
		}
		amb := &AmbiguousError{Name: name}
		for _, e := range es {
			amb.Candidates = append(amb.Candidates, e.URI)
		}
		sort.Strings(amb.Candidates)
		if len(names) > 0 {
			clashes = append(clashes, amb)
			continue
		}
		rep.fail(name, "", amb)
	}
	if len(clashes) > 0 {
		return nil, errors.Join(clashes...)
	}
	sort.Slice(out, func(i, j int) bool { return entryName(out[i]) < entryName(out[j]) })
	sort.Slice(rep.Failed, func(i, j int) bool { return rep.Failed[i].Name < rep.Failed[j].Name })
	return out, nil
}

func resolveName(ctx context.Context, c *Client, listed []Entry, n string) (*Entry, error) {
	if strings.HasPrefix(n, uriScheme) {
		for i := range listed {
			if listed[i].URI == n {
				return &listed[i], nil
			}
		}
		return c.Get(ctx, n)
	}
	var found []Entry
	for _, e := range listed {
		if frontmatterName(e) == n {
			found = append(found, e)
		}
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("%s: %w", clip(n), ErrNotServed)
	case 1:
		return &found[0], nil
	}
	amb := &AmbiguousError{Name: n}
	for _, e := range found {
		amb.Candidates = append(amb.Candidates, clip(e.URI))
	}
	sort.Strings(amb.Candidates)
	return nil, amb
}

// entryName is the folder a skill goes to: the last segment of its
// directory (which checkEntry holds equal to the frontmatter name), or the
// URI itself when it does not parse (such an entry is refused anyway).
func entryName(e Entry) string {
	if loc, err := locateSkill(e.URI); err == nil {
		return loc.name
	}
	return clip(e.URI)
}

func frontmatterName(e Entry) string {
	var fm struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(e.Frontmatter, &fm)
	return fm.Name
}

// entryResources reads an entry's resources list leniently (for comparing
// with the lock; Fetch checks it strictly).
func entryResources(e Entry) ([]Resource, bool) {
	raw := bytes.TrimSpace(e.Resources)
	var list []Resource
	if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &list) != nil {
		return nil, false
	}
	sortResources(list)
	return list, true
}

// lockTargets returns the locked skills a lock-driven run works on.
func lockTargets(o Options, lock *Lock) ([]LockedSkill, error) {
	var out []LockedSkill
	for _, s := range lock.Skills {
		if o.Server == "" || s.Server == o.Server {
			out = append(out, s)
		}
	}
	if o.Server != "" && len(out) == 0 && len(lock.Skills) > 0 {
		return nil, fmt.Errorf("no skill in %s comes from %s: %w", LockFile, o.Server, ErrNotLocked)
	}
	return out, nil
}

// againstLock compares what a server serves now with a lock entry.
func againstLock(t LockedSkill, e *Entry) error {
	list, ok := entryResources(*e)
	if !ok {
		return refuse(t.URI, "", CheckLock, "the server's entry has no resources list to compare with %s", LockFile)
	}
	ch := diffResources(strings.TrimSuffix(t.URI, "/SKILL.md"), t.resources(), list)
	if ch.Empty() {
		return nil
	}
	return refuse(t.URI, "", CheckLock, "the server serves other files than %s records (%s: %s)", LockFile, ch.Summary(), ch.oneLine())
}

// oneLine lists a change's files on one line, a few at most.
func (c Change) oneLine() string {
	var parts []string
	for _, k := range []struct {
		word  string
		paths []string
	}{{"added", c.Added}, {"changed", c.Changed}, {"removed", c.Removed}} {
		for _, p := range k.paths {
			parts = append(parts, k.word+" "+p)
		}
	}
	if len(parts) > 5 {
		parts = append(parts[:5], fmt.Sprintf("and %d more", len(parts)-5))
	}
	return strings.Join(parts, ", ")
}

// Locked installs exactly what skills.lock records. Every locked skill is
// fetched and verified first, against the lock as well as its entry; if
// any differs from the lock (a file added, removed or changed, or the skill
// gone) or fails verification, nothing at all is written. The lock itself
// is never rewritten. A skill the lock records as verified is proven
// again (Options.Keys is then required: ErrKeysRequired otherwise), and
// must be the same commit and tag, signed with the same key.
func Locked(ctx context.Context, o Options) (*Report, error) {
	lock, err := ReadLock(o.Dir)
	if err != nil {
		return nil, err
	}
	targets, err := lockTargets(o, lock)
	if err != nil {
		return nil, err
	}
	if o.Keys == nil {
		var verified []string
		for _, t := range targets {
			if t.Verified != nil {
				verified = append(verified, t.Name)
			}
		}
		if err := keysRequired(verified); err != nil {
			return nil, err
		}
	}
	cc := &connections{o: o}
	defer cc.close()
	rep := &Report{}
	var staged []*Skill
	for _, t := range targets {
		c, err := cc.get(ctx, t.Server)
		if err != nil {
			return rep, err
		}
		e, err := c.Get(ctx, t.URI)
		if errors.Is(err, ErrNotServed) {
			rep.fail(t.Name, t.URI, refuse(t.URI, "", CheckLock, "the server no longer serves the skill"))
			continue
		}
		if err != nil {
			return rep, err
		}
		if err := againstLock(t, e); err != nil {
			rep.fail(t.Name, t.URI, err)
			continue
		}
		s, err := c.Fetch(ctx, *e)
		if errors.Is(err, ErrVerify) {
			rep.fail(t.Name, t.URI, err)
			continue
		}
		if err != nil {
			return rep, err
		}
		if s.Name != t.Name {
			rep.fail(t.Name, t.URI, refuse(t.URI, "", CheckLock, "the skill is now named %q", s.Name))
			continue
		}
		if err := againstLockVerified(t, s.Verified); err != nil {
			rep.fail(t.Name, t.URI, err)
			continue
		}
		staged = append(staged, s)
	}
	if len(rep.Failed) > 0 {
		return rep, nil
	}
	for _, s := range staged {
		if err := install(o.Dir, s); err != nil {
			rep.fail(s.Name, s.URI, err)
			continue
		}
		rep.Installed = append(rep.Installed, Installed{Name: s.Name, URI: s.URI, Files: len(s.Files), Previous: true, Verified: s.Verified})
	}
	return rep, nil
}

// Update moves one locked skill forward: it fetches what the skill's
// server serves now, verifies and installs it, and rewrites its lock
// entry. The report says which files were added, removed or changed.
func Update(ctx context.Context, o Options, name string) (*Report, error) {
	lock, err := ReadLock(o.Dir)
	if err != nil {
		return nil, err
	}
	t, ok := lock.Find(name)
	if !ok {
		return nil, fmt.Errorf("%s: %w", clip(name), ErrNotLocked)
	}
	if o.Server != "" && t.Server != o.Server {
		return nil, fmt.Errorf("%s is locked from %s, not %s: %w", name, t.Server, o.Server, ErrNotLocked)
	}
	if o.Keys == nil && t.Verified != nil {
		return nil, keysRequired([]string{t.Name})
	}
	cc := &connections{o: o}
	defer cc.close()
	c, err := cc.get(ctx, t.Server)
	if err != nil {
		return nil, err
	}
	rep := &Report{}
	e, err := c.Get(ctx, t.URI)
	if errors.Is(err, ErrNotServed) {
		rep.fail(t.Name, t.URI, refuse(t.URI, "", CheckLock, "the server no longer serves the skill"))
		return rep, nil
	}
	if err != nil {
		return nil, err
	}
	s, err := c.Fetch(ctx, *e)
	if errors.Is(err, ErrVerify) {
		rep.fail(t.Name, t.URI, err)
		return rep, nil
	}
	if err != nil {
		return nil, err
	}
	if s.Name != name {
		rep.fail(name, t.URI, refuse(t.URI, "", CheckLock, "the skill is now named %q", s.Name))
		return rep, nil
	}
	in, ok := installAndLock(o, lock, s, rep)
	if !ok {
		return rep, nil
	}
	rep.Installed = append(rep.Installed, in)
	if err := WriteLock(o.Dir, lock); err != nil {
		return rep, err
	}
	return rep, nil
}

// State is how a locked skill compares with what its server serves now.
type State string

// The states Outdated reports.
const (
	UpToDate State = "up to date"
	Changed  State = "changed"
	Gone     State = "gone"
)

// Status is one locked skill in an Outdated report.
type Status struct {
	Name, URI, Server string
	State             State
	Change            Change     // when Changed
	Meta              *SkillMeta // from the skill's skill-meta tool, when the server has one
	MetaErr           error      // why calling the tool failed
}

// Outdated compares each locked skill with what its server serves now and,
// where the server offers a skill-meta tool for the skill
// (<name>_skill_meta), calls it for the latest version and the upgrade
// instruction for this client.
func Outdated(ctx context.Context, o Options) ([]Status, error) {
	lock, err := ReadLock(o.Dir)
	if err != nil {
		return nil, err
	}
	targets, err := lockTargets(o, lock)
	if err != nil {
		return nil, err
	}
	cc := &connections{o: o}
	defer cc.close()
	tools := map[string]map[string]bool{}
	var out []Status
	for _, t := range targets {
		c, err := cc.get(ctx, t.Server)
		if err != nil {
			return out, err
		}
		st := Status{Name: t.Name, URI: t.URI, Server: t.Server, State: UpToDate}
		e, err := c.Get(ctx, t.URI)
		switch {
		case errors.Is(err, ErrNotServed):
			st.State = Gone
		case err != nil:
			return out, err
		default:
			list, ok := entryResources(*e)
			if !ok {
				st.State = Changed
			} else if st.Change = diffResources(strings.TrimSuffix(t.URI, "/SKILL.md"), t.resources(), list); !st.Change.Empty() {
				st.State = Changed
			}
		}
		if _, ok := tools[t.Server]; !ok {
			names, err := c.Tools(ctx)
			if err != nil {
				return out, err
			}
			tools[t.Server] = names
		}
		if tool := SkillMetaTool(t.Name); tools[t.Server][tool] {
			st.Meta, st.MetaErr = c.SkillMeta(ctx, tool)
		}
		out = append(out, st)
	}
	return out, nil
}
