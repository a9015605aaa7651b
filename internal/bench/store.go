package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/internal/corpus"
	"github.com/skillreg/skillreg/skill"
	"github.com/skillreg/skillreg/store"
)

func init() { register("store", runStore) }

const storeRounds = 7

// runStore compares, on one generated corpus of env.Skills skills in a
// directory:
//   - loading the persisted catalog from skillreg.db (Open, Load and
//     Digests: what a restart does before it can answer skills/list)
//     against indexing the directory cold, as `skillreg index` does
//     (skill.Index over skill.DirTree, no digest cache);
//   - the store's size on disk per 1,000 skills, against the corpus's own
//     bytes;
//   - saving a snapshot in which one skill changed (what a push of one
//     file costs the store, before the new catalog is served).
//
// Rounds alternate ours and the peer and report medians, so that noise on
// this shared machine falls on both.
func runStore(env *Env) ([]Row, error) {
	ctx := context.Background()
	dir := filepath.Join(env.Tmp, "store-corpus")
	start := time.Now()
	files, corpusBytes, err := corpus.Write(dir, corpus.Options{Skills: env.Skills})
	if err != nil {
		return nil, err
	}
	env.Log("store: corpus of %d skills, %d files, %d MiB written in %s", env.Skills, files, corpusBytes>>20, time.Since(start).Round(time.Millisecond))

	index := func() (*skill.Result, time.Duration, error) {
		runtime.GC() // each side starts from the same heap
		start := time.Now()
		res, err := skill.Index(ctx, skill.DirTree{Root: dir}, skill.Options{RootName: "store-corpus"})
		return res, time.Since(start), err
	}
	res, _, err := index()
	if err != nil {
		return nil, err
	}
	if len(res.Skills) != env.Skills {
		return nil, fmt.Errorf("store bench: indexed %d skills, want %d", len(res.Skills), env.Skills)
	}
	snap := &catalog.Snapshot{Source: "corpus", Kind: catalog.KindDir, Skills: res.Skills, Excluded: res.Excluded, Stats: res.Stats, IndexedAt: time.Now()}
	state := catalog.State{Source: "corpus", Kind: catalog.KindDir, Skills: len(res.Skills), LastResult: "updated", LastEnd: time.Now()}
	path := filepath.Join(env.Tmp, "store-data", store.FileName)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	s, err := store.Open(path, store.Options{})
	if err != nil {
		return nil, err
	}
	if err := s.SaveSnapshot(snap, state); err != nil {
		s.Close()
		return nil, err
	}
	size, err := s.SizeBytes()
	s.Close()
	if err != nil {
		return nil, err
	}

	restart := func() (time.Duration, error) {
		runtime.GC()
		start := time.Now()
		s, err := store.Open(path, store.Options{})
		if err != nil {
			return 0, err
		}
		defer s.Close()
		ps, err := s.Load()
		if err != nil {
			return 0, err
		}
		if _, err := s.Digests(); err != nil {
			return 0, err
		}
		d := time.Since(start)
		if len(ps) != 1 || ps[0].Snapshot == nil || len(ps[0].Snapshot.Skills) != env.Skills {
			return 0, fmt.Errorf("store bench: loaded %d sources", len(ps))
		}
		return d, nil
	}
	var ours, peer []time.Duration
	for round := range storeRounds {
		o := func() error {
			d, err := restart()
			ours = append(ours, d)
			return err
		}
		p := func() error {
			_, d, err := index()
			peer = append(peer, d)
			return err
		}
		first, second := o, p
		if round%2 == 1 {
			first, second = p, o
		}
		if err := first(); err != nil {
			return nil, err
		}
		if err := second(); err != nil {
			return nil, err
		}
	}
	oL, pI := storeMedian(ours), storeMedian(peer)
	ratio := float64(oL) / float64(pI)
	env.Log("store: load %v, cold index %v", ours, peer)

	// One skill changed: the save the registry makes before serving it.
	s, err = store.Open(path, store.Options{})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	changed := storeWithOneChange(snap)
	var saves []time.Duration
	for i := range 2 * storeRounds {
		v := snap
		if i%2 == 0 {
			v = changed
		}
		start := time.Now()
		if err := s.SaveSnapshot(v, state); err != nil {
			return nil, err
		}
		if i > 0 { // the first save after a restart compares every record
			saves = append(saves, time.Since(start))
		}
	}
	oS := storeMedian(saves)

	perK := func(b int64) float64 { return float64(b) / float64(env.Skills) * 1000 / (1 << 20) }
	return []Row{
		{
			Name:  fmt.Sprintf("store load of %d persisted skills (Open+Load+Digests vs cold skill.Index of the directory)", env.Skills),
			Ours:  storeMS(oL),
			Peer:  storeMS(pI),
			Ratio: fmt.Sprintf("%.1f%%", 100*ratio),
			Goal:  "< 10% and < 500 ms",
			OK:    ratio < 0.10 && oL < 500*time.Millisecond,
		},
		{
			Name:  "store size on disk per 1,000 skills (skillreg.db vs the corpus's file bytes)",
			Ours:  fmt.Sprintf("%.2f MiB", perK(size)),
			Peer:  fmt.Sprintf("%.2f MiB", perK(corpusBytes)),
			Ratio: fmt.Sprintf("%.2fx", float64(size)/float64(corpusBytes)),
			Goal:  "reported",
			OK:    true,
		},
		{
			Name: fmt.Sprintf("store save of a %d-skill snapshot with one skill changed (median)", env.Skills),
			Ours: storeMS(oS),
			Goal: "reported",
			OK:   true,
		},
	}, nil
}

// storeWithOneChange is snap with one file of one skill changed, the
// other skills the same values (as the indexer reuses them).
func storeWithOneChange(snap *catalog.Snapshot) *catalog.Snapshot {
	// Field by field: a Snapshot holds a sync.Once (its search segment)
	// that must not be copied.
	c := catalog.Snapshot{
		Source: snap.Source, Kind: snap.Kind, Repository: snap.Repository, Ref: snap.Ref,
		Commit: snap.Commit, Path: snap.Path, Excluded: snap.Excluded, Stats: snap.Stats, IndexedAt: snap.IndexedAt,
	}
	c.Skills = slices.Clone(snap.Skills)
	i := len(c.Skills) / 2
	sk := *c.Skills[i]
	sk.Files = slices.Clone(sk.Files)
	f := &sk.Files[len(sk.Files)-1]
	f.Digest = skill.Sum{31: 1}
	f.Key += "|changed"
	c.Skills[i] = &sk
	return &c
}

func storeMedian(v []time.Duration) time.Duration {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func storeMS(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}
