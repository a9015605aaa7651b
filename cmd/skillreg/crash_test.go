package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/config"
	"github.com/skillreg/skillreg/internal/gittest"
)

// TestCrashHelper is the helper process of TestCrashDuringSync; it does
// nothing in a normal run.
func TestCrashHelper(t *testing.T) {
	cfg := os.Getenv(crashHelperEnv)
	if cfg == "" {
		t.Skip("the helper process of TestCrashDuringSync")
	}
	os.Exit(crashHelper(cfg))
}

// TestCrashDuringSync kills a process that syncs a git source in a loop
// (SIGKILL, at random moments biased towards fetches and store writes)
// while the repository keeps changing, and after each kill checks that a
// fresh daemon on the same data directory serves, before any network
// call, the catalog of exactly one commit the source has had (no mix of
// two), at least as new as the last one whose write completed, and that
// every file it serves matches its manifest.
func TestCrashDuringSync(t *testing.T) {
	minKills, quota, maxKills := 50, 20, 150
	if testing.Short() {
		minKills, quota, maxKills = 12, 4, 40
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SKILLREG_CRASH_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (SKILLREG_CRASH_SEED reproduces the repository's history; kill moments stay random)", seed)
	rnd := rand.New(rand.NewPCG(seed, 1))

	srv, err := gittest.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	repo := srv.CreateRepo("crash")
	model := newCrashRepo(rand.New(rand.NewPCG(seed, 2)))
	for range 80 {
		model.addSkill()
	}
	h := &crashHistory{records: map[string]wantCatalog{}}
	if err := h.push(repo, model); err != nil {
		t.Fatal(err)
	}

	data := t.TempDir()
	cfgPath := filepath.Join(t.TempDir(), "config.yaml")
	yaml := "data_dir: " + data + "\nsources:\n  - name: crash\n    url: " + repo.URL() + "\n    ref: {branch: main}\n    path: skills\n    poll: 0\n"
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}

	// The pusher changes the repository whenever the helper finished a
	// sync, so that most syncs have a new commit to fetch and store.
	wantPush := make(chan struct{}, 1)
	stopPush := make(chan struct{})
	pushErr := make(chan error, 1)
	var pushWG sync.WaitGroup
	pushWG.Go(func() {
		for {
			select {
			case <-stopPush:
				return
			case <-wantPush:
			}
			model.mutate()
			if err := h.push(repo, model); err != nil {
				pushErr <- err
				return
			}
		}
	})
	defer func() {
		close(stopPush)
		pushWG.Wait()
	}()

	var (
		st       crashStats
		lastDone string // the commit of the last snapshot write that completed
	)
	st.landed = map[string]int{}
	for st.kills < maxKills && (st.kills < minKills || st.inPhase < quota) {
		select {
		case err := <-pushErr:
			t.Fatalf("push: %v", err)
		default:
		}
		run := startCrashHelper(t, cfgPath)
		plan := pickKill(rnd)
		lines := run.until(plan, func() {
			select {
			case wantPush <- struct{}{}:
			default:
			}
		})
		// Replay the lines the helper wrote before it died.
		inFlight := ""
		for _, l := range lines {
			f := strings.Fields(l)
			switch {
			case f[0] == phaseWriteBegin && len(f) > 1:
				inFlight = f[1]
			case f[0] == phaseWriteEnd && len(f) > 2:
				if f[2] == "ok" {
					lastDone = f[1]
					if len(f) > 3 {
						if d, err := time.ParseDuration(f[3]); err == nil {
							st.writeTimes = append(st.writeTimes, d)
						}
					}
				} else {
					st.writeErrors++
				}
				inFlight = ""
			case f[0] == phaseSyncEnd && len(f) > 1 && f[1] != "ok":
				st.syncErrors++
				if st.syncErrors <= 3 {
					t.Logf("sync failed in the helper: %s", strings.Join(f[1:], " "))
				}
			case f[0] == phaseSyncEnd:
				st.syncs++
			}
		}
		where := landing(lines)
		st.kills++
		st.landed[where]++
		st.plans[plan.kind]++
		if where == "fetch" || where == "fetch (pack arriving)" || where == "write" {
			st.inPhase++
		}

		served := checkRestart(t, yaml, h, lastDone, inFlight, where)
		switch {
		case served == "":
		case served == inFlight:
			st.inFlightKept++
		case inFlight != "":
			st.inFlightLost++
		}
		if served != "" {
			lastDone = served
		}
	}
	h.mu.Lock()
	commits := len(h.order)
	h.mu.Unlock()
	t.Logf("%d kills over %d commits pushed and %d syncs completed; %d landed in a fetch or a store write (quota %d)",
		st.kills, commits, st.syncs, st.inPhase, quota)
	for _, k := range []string{"start", "sync (list, walk, index)", "fetch", "fetch (pack arriving)", "after fetch (walk, index)", "write", "after write (swap)", "between syncs"} {
		t.Logf("  landed %-28s %3d", k+":", st.landed[k])
	}
	t.Logf("  kill plans: %d after write-begin, %d during a fetch, %d on a timer", st.plans[planWrite], st.plans[planFetch], st.plans[planTimer])
	if len(st.writeTimes) > 0 {
		slices.Sort(st.writeTimes)
		t.Logf("  snapshot writes that completed: %d, median %s, max %s", len(st.writeTimes), st.writeTimes[len(st.writeTimes)/2], st.writeTimes[len(st.writeTimes)-1])
	}
	t.Logf("  killed mid-write: restart served the new commit %d times, the previous one %d times", st.inFlightKept, st.inFlightLost)
	if st.syncErrors > 0 || st.writeErrors > 0 {
		t.Errorf("%d syncs and %d snapshot writes failed in the helper", st.syncErrors, st.writeErrors)
	}
	if st.kills < minKills || st.inPhase < quota {
		t.Errorf("%d kills, %d in a fetch or a write: want at least %d and %d (raise maxKills if this machine is unusually fast)", st.kills, st.inPhase, minKills, quota)
	}
}

type crashStats struct {
	kills, inPhase, syncs      int
	syncErrors, writeErrors    int
	inFlightKept, inFlightLost int
	landed                     map[string]int
	writeTimes                 []time.Duration
	plans                      [3]int
}

// crashHistory records every commit pushed and the catalog it must produce.
type crashHistory struct {
	mu      sync.Mutex
	records map[string]wantCatalog
	order   []string
}

// push commits the model's content and records its catalog before the
// commit becomes visible to the helper.
func (h *crashHistory) push(repo *gittest.Repo, model *crashRepo) (err error) {
	defer func() {
		if p := recover(); p != nil { // gittest helpers panic without a testing.TB
			err = fmt.Errorf("%v", p)
		}
	}()
	if err := model.write(repo.WorkDir()); err != nil {
		return err
	}
	commit := repo.Commit(fmt.Sprintf("change %d", len(h.order)))
	h.mu.Lock()
	h.records[commit] = model.want()
	h.order = append(h.order, commit)
	h.mu.Unlock()
	repo.Push("main")
	return nil
}

func (h *crashHistory) lookup(commit string) (wantCatalog, int, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w, ok := h.records[commit]
	return w, slices.Index(h.order, commit), ok
}

// killPlan says when to kill the helper.
type killPlan struct {
	kind  int           // planWrite, planFetch or planTimer
	nth   int           // at the nth write-begin or fetch-begin line
	delay time.Duration // after that line (fetch), or after the start (timer)
}

const (
	planWrite = iota
	planFetch
	planTimer
)

func pickKill(rnd *rand.Rand) killPlan {
	switch r := rnd.IntN(100); {
	case r < 40:
		// Mostly at once, now and then a little later, so that some kills
		// land after the commit of the transaction.
		d := time.Duration(0)
		if rnd.IntN(2) == 0 {
			d = time.Duration(rnd.IntN(40_000)) * time.Microsecond
		}
		return killPlan{kind: planWrite, nth: 1 + rnd.IntN(2), delay: d}
	case r < 75:
		return killPlan{kind: planFetch, nth: 1 + rnd.IntN(2), delay: time.Duration(rnd.IntN(80_000)) * time.Microsecond}
	default:
		return killPlan{kind: planTimer, delay: time.Duration(rnd.IntN(1500)) * time.Millisecond}
	}
}

type crashRun struct {
	t      *testing.T
	cmd    *exec.Cmd
	lines  chan string
	stderr *bytes.Buffer
}

func startCrashHelper(t *testing.T, cfgPath string) *crashRun {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelper$")
	cmd.Env = append(os.Environ(), crashHelperEnv+"="+cfgPath)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	_ = stdin // closed by Wait; the helper exits if this process dies first
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	r := &crashRun{t: t, cmd: cmd, lines: make(chan string, 1024), stderr: &bytes.Buffer{}}
	cmd.Stderr = &limitedBuffer{b: r.stderr, max: 64 << 10}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(r.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if l, ok := strings.CutPrefix(sc.Text(), crashPhase); ok {
				r.lines <- l
			}
		}
	}()
	return r
}

// until reads phase lines until the plan says kill, kills the helper with
// SIGKILL and returns every line it wrote before it died. onSyncEnd runs
// for each completed sync read before the kill.
func (r *crashRun) until(plan killPlan, onSyncEnd func()) []string {
	var lines []string
	var timer <-chan time.Time
	if plan.kind == planTimer {
		timer = time.After(plan.delay)
	}
	// A plan whose line never comes (nothing new to fetch, say) still
	// ends in a kill.
	fallback := time.After(30 * time.Second)
	seen := 0
wait:
	for {
		select {
		case l, ok := <-r.lines:
			if !ok {
				r.cmd.Wait()
				r.t.Fatalf("helper exited on its own: %s\n%s", r.cmd.ProcessState, r.stderr)
			}
			lines = append(lines, l)
			f := strings.Fields(l)
			switch f[0] {
			case phaseSyncEnd:
				onSyncEnd()
			case phaseWriteBegin:
				if plan.kind == planWrite {
					if seen++; seen == plan.nth {
						if plan.delay == 0 {
							break wait
						}
						timer = time.After(plan.delay)
					}
				}
			case phaseFetchBegin:
				if plan.kind == planFetch {
					if seen++; seen == plan.nth {
						timer = time.After(plan.delay)
					}
				}
			}
		case <-timer:
			break wait
		case <-fallback:
			break wait
		}
	}
	if err := r.cmd.Process.Kill(); err != nil {
		r.t.Fatalf("kill helper: %v", err)
	}
	for l := range r.lines { // what it wrote before the kill landed
		lines = append(lines, l)
	}
	r.cmd.Wait()
	return lines
}

// landing names where the kill landed, from the last line the helper
// wrote.
func landing(lines []string) string {
	if len(lines) == 0 {
		return "start"
	}
	switch strings.Fields(lines[len(lines)-1])[0] {
	case phaseReady:
		return "start"
	case phaseSyncBegin:
		return "sync (list, walk, index)"
	case phaseFetchBegin:
		return "fetch"
	case phaseFetchData:
		return "fetch (pack arriving)"
	case phaseFetchEnd:
		return "after fetch (walk, index)"
	case phaseWriteBegin:
		return "write"
	case phaseWriteEnd:
		return "after write (swap)"
	case phaseSyncEnd:
		return "between syncs"
	}
	return "unknown"
}

// checkRestart starts a daemon on the data directory (NewDaemon restores
// the stored catalog and makes no network call; nothing is served or
// synced) and checks what it would serve. It returns the served commit.
func checkRestart(t *testing.T, yaml string, h *crashHistory, lastDone, inFlight, where string) string {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), "")
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	d, err := NewDaemon(cfg, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
	if err != nil {
		t.Fatalf("restart after a kill (%s): %v", where, err)
	}
	defer d.Close()
	cat := d.Registry.Current()
	snap, ok := cat.Snapshot("crash")
	if !ok {
		if lastDone != "" {
			t.Fatalf("restart after a kill (%s) serves nothing, though commit %s was stored:\n%s", where, lastDone, logs.String())
		}
		return ""
	}
	want, n, ok := h.lookup(snap.Commit)
	if !ok {
		t.Fatalf("restart after a kill (%s) serves commit %s, which the source never had", where, snap.Commit)
	}
	if snap.Commit != lastDone && snap.Commit != inFlight {
		t.Fatalf("restart after a kill (%s) serves commit %s (#%d); the last stored was %s, the one being written %q",
			where, snap.Commit, n, lastDone, inFlight)
	}
	if diffs := compareCatalog(snap, want); len(diffs) > 0 {
		t.Fatalf("restart after a kill (%s) serves commit %s (#%d) with a catalog that is not that commit's:\n  %s",
			where, snap.Commit, n, strings.Join(diffs[:min(len(diffs), 20)], "\n  "))
	}
	ctx := context.Background()
	for _, sk := range snap.Skills {
		for i := range sk.Files {
			f := &sk.Files[i]
			uri := snap.FileURI(sk, f)
			ref, err := cat.File(catalog.Filter{}, uri)
			if err != nil {
				t.Fatalf("restart after a kill (%s): %s: %v", where, uri, err)
			}
			b, err := d.Registry.ReadFile(ctx, ref)
			if err != nil {
				t.Fatalf("restart after a kill (%s): read %s: %v", where, uri, err)
			}
			sum := sha256.Sum256(b)
			if int64(len(b)) != f.Size || "sha256:"+hex.EncodeToString(sum[:]) != f.Digest.String() {
				t.Fatalf("restart after a kill (%s): %s serves %d bytes %x, its manifest says %d bytes %s", where, uri, len(b), sum, f.Size, f.Digest)
			}
		}
	}
	return snap.Commit
}

// limitedBuffer keeps the first max bytes written to it.
type limitedBuffer struct {
	mu  sync.Mutex
	b   *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if room := l.max - l.b.Len(); room > 0 {
		l.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

var _ io.Writer = (*limitedBuffer)(nil)
