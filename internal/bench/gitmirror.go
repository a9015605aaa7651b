package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/gitmirror"
	"github.com/skillreg/skillreg/gitref"
	"github.com/skillreg/skillreg/gitstore"
	"github.com/skillreg/skillreg/internal/corpus"
	"github.com/skillreg/skillreg/internal/gittest"
	"github.com/skillreg/skillreg/registry"
)

func init() { register("gitmirror", runGitMirror) }

const mirrorConcurrent = 16

// runGitMirror compares git clone --depth 1 (plus sha256sum of the
// checkout, as in the git section) of a source's git mirror with the same
// clone of the upstream repository from the loopback git server, in
// alternating rounds, then runs 16 mirror clones at once and reports the
// Go heap's growth while they run.
func runGitMirror(env *Env) (rows []Row, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("gitmirror bench: %v", p)
		}
	}()
	srv, err := gittest.Start(filepath.Join(env.Tmp, "mirror-git-server"))
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	remote := srv.CreateRepo("corpus")
	remote.WriteTree(func(dir string) error {
		_, _, err := corpus.Write(dir, corpus.Options{Skills: env.Skills})
		return err
	})
	remote.Commit("corpus")
	remote.Push("main")

	pool, err := gitstore.NewPool(filepath.Join(env.Tmp, "mirror-pool"), gitstore.PoolOptions{})
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	repo, err := gitref.ParseRepo(remote.URL())
	if err != nil {
		return nil, err
	}
	reg := registry.New(registry.Options{Git: pool})
	reg.SetSources([]catalog.Source{{Name: "corpus", Kind: catalog.KindGit,
		Git: &catalog.GitSource{Repo: repo, Pin: gitref.Pin{Kind: gitref.Branch, Value: "main"}}}})
	if err := reg.SyncNow(context.Background(), "corpus"); err != nil {
		return nil, err
	}
	m, err := gitmirror.New(gitmirror.Options{Catalog: reg})
	if err != nil {
		return nil, err
	}
	start := time.Now()
	m.Update(context.Background())
	env.Log("gitmirror: mirror of %d skills built in %s", env.Skills, time.Since(start).Round(time.Millisecond))
	hs := httptest.NewServer(m.Handler(gitmirror.ServeOptions{Concurrent: mirrorConcurrent}))
	defer hs.Close()
	mirrorURL := hs.URL + "/git/corpus.git"

	var ours, peer []time.Duration
	for round := range gitRounds {
		dir := filepath.Join(env.Tmp, fmt.Sprintf("mirror-round-%d", round))
		var o, p time.Duration
		err := gitBoth(round%2 == 0, func() error {
			d, err := peerClone(mirrorURL, filepath.Join(dir, "mirror"))
			o = d
			return err
		}, func() error {
			d, err := peerClone(remote.URL(), filepath.Join(dir, "upstream"))
			p = d
			return err
		})
		if err != nil {
			return nil, err
		}
		ours, peer = append(ours, o), append(peer, p)
	}
	om, pm := gitMedian(ours), gitMedian(peer)
	ratio := om.Seconds() / pm.Seconds()
	rows = append(rows, Row{
		Name: fmt.Sprintf("git clone --depth 1 + sha256sum, %d-skill mirror vs the upstream repository (median of %d)", env.Skills, gitRounds),
		Ours: gitSeconds(om), Peer: gitSeconds(pm), Ratio: fmt.Sprintf("%.2fx", ratio), Goal: "≤ 1.5x", OK: ratio <= 1.5,
	})

	// 16 clones at once: wall time and the heap's growth while they run.
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base, peak := ms.HeapInuse, ms.HeapInuse
	done := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				var s runtime.MemStats
				runtime.ReadMemStats(&s)
				peak = max(peak, s.HeapInuse)
			}
		}
	}()
	start = time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, mirrorConcurrent)
	for i := range mirrorConcurrent {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := peerClone(mirrorURL, filepath.Join(env.Tmp, fmt.Sprintf("mirror-many-%d", i))); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	close(done)
	sampler.Wait()
	close(errs)
	for err := range errs {
		return nil, err
	}
	rows = append(rows, Row{
		Name: fmt.Sprintf("%d concurrent mirror clones (--depth 1) of %d skills: wall time; Go heap growth at peak", mirrorConcurrent, env.Skills),
		Ours: fmt.Sprintf("%s; %d MiB", gitSeconds(wall), (peak-base)>>20), Ratio: "", Goal: "memory bounded (no pack held)", OK: true,
	})
	return rows, nil
}
