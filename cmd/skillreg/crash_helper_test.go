package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/config"
	"github.com/skillreg/skillreg/gitstore"
	"github.com/skillreg/skillreg/registry"
	"github.com/skillreg/skillreg/store"
)

// The helper process of TestCrashDuringSync: the test binary started again
// with crashHelperEnv set to the configuration file. It wires a registry
// from the same parts as newDaemon, except that the store and the git HTTP
// client report what they are doing on stdout, one "crash-phase" line
// before and after, and then syncs in a loop until it is killed.
const (
	crashHelperEnv = "SKILLREG_CRASH_HELPER"
	crashPhase     = "crash-phase "
)

// Phases the helper reports, in the order a sync goes through them.
const (
	phaseReady      = "ready"       // store loaded, stored catalog restored
	phaseSyncBegin  = "sync-begin"  // SyncNow called: list refs, resolve
	phaseFetchBegin = "fetch-begin" // POST git-upload-pack sent
	phaseFetchData  = "fetch-data"  // the first bytes of its answer arrived
	phaseFetchEnd   = "fetch-end"   // the answer closed: pack stored, commit held
	phaseWriteBegin = "write-begin" // SaveSnapshot called (its commit follows)
	phaseWriteEnd   = "write-end"   // SaveSnapshot returned (commit, then "ok" or the error)
	phaseSyncEnd    = "sync-end"    // SyncNow returned
)

// phaseReporter writes phase lines to stdout, one write each, so that a
// line is either wholly in the pipe or not at all when the kill lands.
type phaseReporter struct{ mu sync.Mutex }

func (p *phaseReporter) report(fields ...string) {
	line := crashPhase + strings.Join(fields, " ") + "\n"
	p.mu.Lock()
	defer p.mu.Unlock()
	os.Stdout.WriteString(line)
}

// phaseStore is the bbolt store with its write transactions bracketed by
// phase lines.
type phaseStore struct {
	*store.Store
	p      *phaseReporter
	writes *atomic.Int64
}

func (s phaseStore) SaveSnapshot(snap *catalog.Snapshot, st catalog.State) error {
	s.writes.Add(1)
	s.p.report(phaseWriteBegin, snap.Commit)
	start := time.Now()
	err := s.Store.SaveSnapshot(snap, st)
	dur := time.Since(start)
	result := "ok"
	if err != nil {
		result = strings.ReplaceAll(err.Error(), "\n", " ")
	}
	s.p.report(phaseWriteEnd, snap.Commit, result, dur.String())
	return err
}

// phaseTransport reports the fetches (POST .../git-upload-pack) that go
// through it: the fetch lasts until gitstore closes the answer, which it
// does after storing the pack and recording the commit.
type phaseTransport struct {
	base http.RoundTripper
	p    *phaseReporter
}

func (t phaseTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPost || !strings.HasSuffix(req.URL.Path, "/git-upload-pack") {
		return t.base.RoundTrip(req)
	}
	t.p.report(phaseFetchBegin)
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		t.p.report(phaseFetchEnd, "error")
		return nil, err
	}
	resp.Body = &phaseBody{ReadCloser: resp.Body, p: t.p}
	return resp, nil
}

type phaseBody struct {
	io.ReadCloser
	p         *phaseReporter
	data      bool
	closeOnce sync.Once
}

func (b *phaseBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 && !b.data {
		b.data = true
		b.p.report(phaseFetchData)
	}
	return n, err
}

func (b *phaseBody) Close() error {
	err := b.ReadCloser.Close()
	b.closeOnce.Do(func() { b.p.report(phaseFetchEnd) })
	return err
}

// crashHelper is the helper process's main: it never returns normally
// (the parent kills it), but exits when its stdin closes, so that a parent
// that died does not leave it running.
func crashHelper(cfgPath string) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "crash helper:", err)
		return 2
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return fail(err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	p := &phaseReporter{}
	var writes atomic.Int64

	// The same parts as newDaemon, with the reporting store and client.
	dir := dataDir(cfg)
	st, err := store.Open(filepath.Join(dir, store.FileName), store.Options{Logger: log})
	if err != nil {
		return fail(err)
	}
	digests, err := st.Digests()
	if err != nil {
		return fail(err)
	}
	base := http.DefaultTransport.(*http.Transport).Clone()
	pool, err := gitstore.NewPool(filepath.Join(dir, "git"), gitstore.PoolOptions{
		Logger:     log,
		HTTPClient: &http.Client{Transport: phaseTransport{base: base, p: p}},
	})
	if err != nil {
		return fail(err)
	}
	reg := registry.New(registry.Options{
		Logger:  log,
		Store:   phaseStore{st, p, &writes},
		Digests: registry.NewDigestMapFrom(digests),
		Git:     pool,
	})
	srcs, err := sources(cfg, nil)
	if err != nil {
		return fail(err)
	}
	reg.SetSources(srcs)
	ps, err := st.Load()
	if err != nil {
		return fail(err)
	}
	if _, err := reg.Restore(context.Background(), ps); err != nil {
		return fail(err)
	}
	go func() {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	p.report(phaseReady)
	for {
		p.report(phaseSyncBegin)
		err := reg.SyncNow(context.Background(), srcs[0].Name)
		result := "ok"
		if err != nil {
			result = strings.ReplaceAll(err.Error(), "\n", " ")
		}
		p.report(phaseSyncEnd, result)
		if writes.Swap(0) == 0 {
			// Nothing new: give the parent's push a moment rather than
			// spinning on ref listings (this only spaces the syncs out).
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// crashRepo is the parent's model of the repository: every file it wrote,
// so that the catalog each commit must produce is computed from what was
// written, independently of the indexer.
type crashRepo struct {
	rnd    *rand.Rand
	skills map[string]*crashSkill // by directory name under skills/
	next   int
	readme int
	disk   map[string][]byte // what write last put in the working tree
}

type crashSkill struct {
	valid bool              // name matches the directory; otherwise excluded
	desc  int               // bumps the description
	files map[string][]byte // by path relative to the skill, SKILL.md included
}

// wantFile and wantCatalog are what a commit must produce: skill paths,
// each file's size and sha256.
type wantFile struct {
	Size   int64
	Digest string
}

type wantCatalog struct {
	Skills   map[string]map[string]wantFile // skill path -> file path -> file
	Excluded []string                       // skill paths, sorted
}

func newCrashRepo(rnd *rand.Rand) *crashRepo {
	return &crashRepo{rnd: rnd, skills: map[string]*crashSkill{}}
}

func (m *crashRepo) randomBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(m.rnd.Uint32())
	}
	return b
}

func (m *crashRepo) skillMD(name string, s *crashSkill) []byte {
	fmName := name
	if !s.valid {
		fmName = name + "-mismatch"
	}
	body := hex.EncodeToString(m.randomBytes(20 + m.rnd.IntN(400)))
	return fmt.Appendf(nil, "---\nname: %s\ndescription: Skill %s, revision %d.\n---\n# %s\n\n%s\n", fmName, name, s.desc, name, body)
}

func (m *crashRepo) randomFile() (string, []byte) {
	dirs := []string{"references", "scripts", "assets", "assets/deep/er"}
	p := fmt.Sprintf("%s/f%04d.bin", dirs[m.rnd.IntN(len(dirs))], m.rnd.IntN(10000))
	return p, m.randomBytes(m.rnd.IntN(12 << 10))
}

func (m *crashRepo) addSkill() {
	name := fmt.Sprintf("skill-%04d", m.next)
	m.next++
	s := &crashSkill{valid: m.rnd.IntN(12) != 0, files: map[string][]byte{}}
	s.files["SKILL.md"] = m.skillMD(name, s)
	for range m.rnd.IntN(4) {
		p, b := m.randomFile()
		s.files[p] = b
	}
	m.skills[name] = s
}

func (m *crashRepo) randomSkill() (string, *crashSkill) {
	names := slices.Sorted(maps.Keys(m.skills))
	if len(names) == 0 {
		m.addSkill()
		return m.randomSkill()
	}
	n := names[m.rnd.IntN(len(names))]
	return n, m.skills[n]
}

// mutate applies a random change of random size: skills added, removed,
// made invalid or valid again, files added, changed and removed.
func (m *crashRepo) mutate() {
	ops := 1 + m.rnd.IntN(10)
	if m.rnd.IntN(8) == 0 {
		ops = 40 // now and then a large push
	}
	for range ops {
		switch op := m.rnd.IntN(10); {
		case op == 0 || len(m.skills) < 20:
			m.addSkill()
		case op == 1 && len(m.skills) > 20:
			name, _ := m.randomSkill()
			delete(m.skills, name)
		case op == 2:
			name, s := m.randomSkill()
			s.valid = !s.valid
			s.files["SKILL.md"] = m.skillMD(name, s)
		case op == 3:
			name, s := m.randomSkill()
			s.desc++
			s.files["SKILL.md"] = m.skillMD(name, s)
		case op <= 6:
			_, s := m.randomSkill()
			p, b := m.randomFile()
			s.files[p] = b
		case op == 7:
			_, s := m.randomSkill()
			for p := range s.files {
				if p != "SKILL.md" {
					delete(s.files, p)
					break
				}
			}
		default:
			_, s := m.randomSkill()
			for p := range s.files {
				if p != "SKILL.md" {
					s.files[p] = m.randomBytes(m.rnd.IntN(12 << 10))
					break
				}
			}
		}
	}
	if m.rnd.IntN(4) == 0 {
		m.readme++ // a change outside the source's path
	}
}

// write brings the working tree to the model's content, touching only
// the files that changed (so that git add rehashes only those).
func (m *crashRepo) write(dir string) error {
	files := map[string][]byte{"README.md": fmt.Appendf(nil, "readme %d\n", m.readme)}
	for name, s := range m.skills {
		for p, b := range s.files {
			files["skills/"+name+"/"+p] = b
		}
	}
	for p := range m.disk {
		if _, ok := files[p]; !ok {
			if err := os.Remove(filepath.Join(dir, filepath.FromSlash(p))); err != nil {
				return err
			}
		}
	}
	for p, b := range files {
		if old, ok := m.disk[p]; ok && bytes.Equal(old, b) {
			continue
		}
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, b, 0o644); err != nil {
			return err
		}
	}
	m.disk = files
	return nil
}

// want is the catalog the model's current content must produce.
func (m *crashRepo) want() wantCatalog {
	w := wantCatalog{Skills: map[string]map[string]wantFile{}}
	for name, s := range m.skills {
		if !s.valid {
			w.Excluded = append(w.Excluded, name)
			continue
		}
		files := map[string]wantFile{}
		for p, b := range s.files {
			sum := sha256.Sum256(b)
			files[p] = wantFile{Size: int64(len(b)), Digest: "sha256:" + hex.EncodeToString(sum[:])}
		}
		w.Skills[name] = files
	}
	slices.Sort(w.Excluded)
	return w
}

// compareCatalog returns the differences between a served snapshot and
// the catalog its commit must produce (nil when equal).
func compareCatalog(snap *catalog.Snapshot, want wantCatalog) []string {
	var diffs []string
	got := map[string]bool{}
	for _, sk := range snap.Skills {
		got[sk.Path] = true
		wf, ok := want.Skills[sk.Path]
		if !ok {
			diffs = append(diffs, "unexpected skill "+sk.Path)
			continue
		}
		seen := map[string]bool{}
		for _, f := range sk.Files {
			seen[f.Path] = true
			w, ok := wf[f.Path]
			switch {
			case !ok:
				diffs = append(diffs, fmt.Sprintf("unexpected file %s", path.Join(sk.Path, f.Path)))
			case w.Size != f.Size || w.Digest != f.Digest.String():
				diffs = append(diffs, fmt.Sprintf("%s: %d bytes %s, the commit has %d bytes %s", path.Join(sk.Path, f.Path), f.Size, f.Digest, w.Size, w.Digest))
			}
		}
		for p := range wf {
			if !seen[p] {
				diffs = append(diffs, "missing file "+path.Join(sk.Path, p))
			}
		}
	}
	for p := range want.Skills {
		if !got[p] {
			diffs = append(diffs, "missing skill "+p)
		}
	}
	var excluded []string
	for _, x := range snap.Excluded {
		excluded = append(excluded, x.Path)
	}
	slices.Sort(excluded)
	if !slices.Equal(excluded, want.Excluded) {
		diffs = append(diffs, fmt.Sprintf("excluded %v, the commit excludes %v", excluded, want.Excluded))
	}
	slices.Sort(diffs)
	return diffs
}
