package registry

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"weak"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/proof"
	"github.com/skillreg/skillreg/skill"
)

// Proof returns the proof (package proof) of the skill at skillPath in
// source's served snapshot: its commit, the annotated tag that resolved
// the pin, and the trees down to and below the skill's directory, read
// from the source's object store. catalog.ErrNotFound for a source or
// skill not served, and for a directory source (it has no commit to
// prove); proof.ErrTooLarge above proof.MaxBytes.
func (r *Registry) Proof(ctx context.Context, source, skillPath string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	snap, sk, repo, err := r.proofOf(source, skillPath)
	if err != nil {
		return nil, err
	}
	b, err := proof.Build(repo, proofHead(snap, sk.Path))
	if err != nil {
		return nil, fmt.Errorf("proof of %s/%s at %s: %w", source, skillPath, shortCommit(snap.Commit), err)
	}
	return b, nil
}

// proofOf finds what a proof of a served skill is built from.
func (r *Registry) proofOf(source, skillPath string) (*catalog.Snapshot, *skill.Skill, GitRepo, error) {
	snap, ok := r.Current().Snapshot(source)
	if !ok {
		return nil, nil, nil, fmt.Errorf("proof of %s/%s: source %w", source, skillPath, catalog.ErrNotFound)
	}
	sk, ok := snap.SkillAt(skillPath)
	if !ok {
		return nil, nil, nil, fmt.Errorf("proof of %s/%s: skill %w", source, skillPath, catalog.ErrNotFound)
	}
	if snap.Kind != catalog.KindGit || snap.Commit == "" {
		return nil, nil, nil, fmt.Errorf("proof of %s/%s: a %s source has no commit to prove: %w", source, skillPath, snap.Kind, catalog.ErrNotFound)
	}
	repo, err := r.gitRepo(snap.Repository)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("proof of %s/%s: %w", source, skillPath, err)
	}
	return snap, sk, repo, nil
}

func proofHead(snap *catalog.Snapshot, skillPath string) proof.Proof {
	return proof.Proof{
		Source: snap.Source, Skill: skillPath, Repository: snap.Repository,
		Commit: snap.Commit, Tag: snap.Tag, Path: path.Join(snap.Path, skillPath),
	}
}

// Unproven is a served skill that has no proof, and why.
type Unproven struct {
	Source string
	Path   string // the skill's directory within the source
	Name   string
	Reason string
}

// unprovenCache keeps each source's Unproven answer for the snapshot it
// was computed on: a snapshot never changes, so neither does its answer,
// and sizing a 10,000-skill source reads all its trees (about a second).
type unprovenCache struct {
	mu   sync.Mutex
	snap map[string]*catalog.Snapshot
	list map[string][]Unproven
}

// Unproven lists the served skills of source ("" for every source) that
// have no proof: those whose proof would be larger than proof.MaxBytes,
// or that cannot be built from the object store (the reason says why).
// Each git source's trees are read once per snapshot (proof.Sizer), and
// the answer is kept until the snapshot is replaced.
func (r *Registry) Unproven(ctx context.Context, source string) []Unproven {
	var out []Unproven
	c := &r.unproven
	c.mu.Lock()
	defer c.mu.Unlock()
	served := map[string]bool{}
	for _, snap := range r.Current().Sources(catalog.Filter{}) {
		served[snap.Source] = true
		if source != "" && snap.Source != source {
			continue
		}
		if snap.Kind != catalog.KindGit || snap.Commit == "" || ctx.Err() != nil {
			continue
		}
		if c.snap[snap.Source] != snap {
			if c.snap == nil {
				c.snap, c.list = map[string]*catalog.Snapshot{}, map[string][]Unproven{}
			}
			c.snap[snap.Source], c.list[snap.Source] = snap, r.unprovenOf(snap)
		}
		out = append(out, c.list[snap.Source]...)
	}
	for name := range c.snap { // sources no longer served
		if !served[name] {
			delete(c.snap, name)
			delete(c.list, name)
		}
	}
	return out
}

// Provable reports, for each skill at skillPaths in snap (one of the
// catalog's git snapshots), whether a proof of it can be served: false
// for a skill snap does not hold, a snapshot without a commit, and a
// skill whose proof would be larger than proof.MaxBytes or cannot be
// built from the object store (Unproven says why). A skill whose
// proof.Sizer.Bound is within half of proof.MaxBytes is provable without
// reading its own trees (a listing asks this of every skill on a page).
// What Unproven keeps for snap answers at once; otherwise the answers are
// kept for snap (two bits a skill, by its index in snap.Skills; snap
// itself is not held) with one proof.Sizer, which reads the trees above
// each directory of skills once for all of a listing's pages, so the next
// listing of the same snapshot reads no tree.
func (r *Registry) Provable(ctx context.Context, snap *catalog.Snapshot, skillPaths []string) []bool {
	out := make([]bool, len(skillPaths))
	if snap == nil || snap.Kind != catalog.KindGit || snap.Commit == "" || ctx.Err() != nil {
		return out
	}
	// Unproven holds c.mu while it sizes a whole source: never wait.
	c := &r.unproven
	var unproven map[string]bool
	known := false
	if c.mu.TryLock() {
		if known = c.snap[snap.Source] == snap; known {
			unproven = make(map[string]bool, len(c.list[snap.Source]))
			for _, u := range c.list[snap.Source] {
				unproven[u.Path] = true
			}
		}
		c.mu.Unlock()
	}
	pc := &r.provable
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.answers == nil {
		pc.answers = map[string]*provableAnswers{}
	}
	ans := pc.answers[snap.Source]
	if ans == nil || ans.snap != weak.Make(snap) {
		n := (len(snap.Skills) + 63) / 64
		ans = &provableAnswers{snap: weak.Make(snap), known: make([]uint64, n), ok: make([]uint64, n)}
		pc.answers[snap.Source] = ans
		cur := r.Current()
		for name := range pc.answers { // sources no longer served
			if _, ok := cur.Snapshot(name); !ok && name != snap.Source {
				delete(pc.answers, name)
			}
		}
	}
	defer func() {
		if ans.sz != nil {
			ans.sz.Release() // keep Bound's counts, not the trees read
		}
	}()
	var files []string
	for i, p := range skillPaths {
		k, ok := slices.BinarySearchFunc(snap.Skills, p, func(sk *skill.Skill, p string) int { return strings.Compare(sk.Path, p) })
		if !ok {
			continue
		}
		sk := snap.Skills[k]
		if known {
			out[i] = !unproven[sk.Path]
			continue
		}
		w, bit := k/64, uint64(1)<<(k%64)
		if ans.known[w]&bit != 0 {
			out[i] = ans.ok[w]&bit != 0
			continue
		}
		if ans.sz == nil {
			repo, err := r.gitRepo(snap.Repository)
			if err != nil {
				return out
			}
			ans.sz = proof.NewSizer(repo, proof.SHA1)
		}
		head := proofHead(snap, sk.Path)
		files = files[:0]
		for j := range sk.Files {
			files = append(files, sk.Files[j].Path)
		}
		// A bound well within proof.MaxBytes answers without reading
		// the skill's own trees (its files are every blob beneath it);
		// one near it, or past it, is sized.
		if n, err := ans.sz.Bound(head, files); err == nil && n <= proof.MaxBytes/2 {
			out[i] = true
		} else {
			_, err := ans.sz.Size(head)
			out[i] = err == nil
		}
		ans.known[w] |= bit
		if out[i] {
			ans.ok[w] |= bit
		}
	}
	return out
}

// provableCache keeps Provable's answers per source, for one snapshot
// each: what a proof holds depends on nothing else.
type provableCache struct {
	mu      sync.Mutex
	answers map[string]*provableAnswers // by source
}

type provableAnswers struct {
	snap      weak.Pointer[catalog.Snapshot]
	known, ok []uint64     // bit k: snap.Skills[k] answered, and provable
	sz        *proof.Sizer // what Bound counted above each directory
}

func (r *Registry) unprovenOf(snap *catalog.Snapshot) []Unproven {
	var list []Unproven
	repo, err := r.gitRepo(snap.Repository)
	if err != nil {
		for _, sk := range snap.Skills {
			list = append(list, Unproven{Source: snap.Source, Path: sk.Path, Name: sk.Name(), Reason: r.redact.String(err.Error())})
		}
		return list
	}
	sz := proof.NewSizer(repo, proof.SHA1)
	for _, sk := range snap.Skills {
		if _, err := sz.Size(proofHead(snap, sk.Path)); err != nil {
			reason := r.redact.String(err.Error())
			if errors.Is(err, proof.ErrTooLarge) {
				reason = fmt.Sprintf("its proof would be larger than %d bytes (a directory on its path, or below it, has too many entries)", proof.MaxBytes)
			}
			list = append(list, Unproven{Source: snap.Source, Path: sk.Path, Name: sk.Name(), Reason: reason})
		}
	}
	return list
}
