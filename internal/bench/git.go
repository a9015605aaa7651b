package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"syscall"
	"time"

	"github.com/skillreg/skillreg/gitref"
	"github.com/skillreg/skillreg/gitstore"
	"github.com/skillreg/skillreg/internal/corpus"
	"github.com/skillreg/skillreg/internal/gittest"
)

// gitChildEnv, when set, turns the bench binary into the measured side of
// the git section: a fresh process whose peak RSS the parent reads from
// the kernel, so that the figure is gitstore's alone, not the harness's.
const gitChildEnv = "SKILLREG_BENCH_GIT_CHILD"

func init() {
	if os.Getenv(gitChildEnv) != "" {
		os.Exit(gitChild())
	}
	register("git", runGit)
}

const (
	gitRounds         = 3
	gitPushesPerRound = 5
)

// runGit compares, against one loopback smart-HTTP server hosting a
// generated repository of env.Skills skills:
//   - initial sync: gitstore Fetch + Walk + SHA-256 of every blob read from
//     the object store, against git clone --depth 1 + sha256sum over the
//     checked-out files;
//   - sync after a one-file push: list refs, fetch, walk, hash the blobs
//     not seen before, against git fetch --depth 1 in the peer's clone.
//
// Rounds alternate ours and the peer and report medians (of 3 initial
// syncs, and of 15 one-file pushes), so that noise on this shared machine
// falls on both. Each round's sync runs in a child
// process that first syncs, then waits for the push and syncs again, as
// the daemon would.
func runGit(env *Env) (rows []Row, err error) {
	defer func() {
		// gittest helpers panic when they have no testing.TB.
		if p := recover(); p != nil {
			err = fmt.Errorf("git bench: %v", p)
		}
	}()
	for _, tool := range []string{"git", "sha256sum", "xargs", "find", "sh"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("git bench needs %s: %w", tool, err)
		}
	}
	srv, err := gittest.Start(filepath.Join(env.Tmp, "git-server"))
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	remote := srv.CreateRepo("corpus")
	start := time.Now()
	var files int
	var bytes int64
	remote.WriteTree(func(dir string) error {
		files, bytes, err = corpus.Write(dir, corpus.Options{Skills: env.Skills})
		return err
	})
	remote.Commit("corpus")
	remote.Push("main")
	env.Log("git: corpus of %d skills, %d files, %d MiB committed in %s", env.Skills, files, bytes>>20, time.Since(start).Round(time.Millisecond))

	var oursInit, peerInit, oursInc, peerInc []time.Duration
	var rss []int64
	var incBytes []int64
	var pruneTimes []time.Duration
	var before, after []int64
	for round := range gitRounds {
		dir := filepath.Join(env.Tmp, fmt.Sprintf("git-round-%d", round))
		child, err := startGitChild(remote.URL(), filepath.Join(dir, "ours"))
		if err != nil {
			return nil, err
		}
		first := round%2 == 0 // alternate who goes first
		var oi, pi time.Duration
		ours := func() error {
			r, err := child.do("initial")
			oi = r.Dur
			return err
		}
		peer := func() error {
			d, err := peerClone(remote.URL(), filepath.Join(dir, "peer"))
			pi = d
			return err
		}
		if err := gitBoth(first, ours, peer); err != nil {
			child.kill()
			return nil, err
		}
		oursInit, peerInit = append(oursInit, oi), append(peerInit, pi)

		// Several one-file pushes per round: each incremental sync is
		// short, so more samples keep the median steady on a busy machine.
		var oc, pc time.Duration
		for k := range gitPushesPerRound {
			n := round*gitPushesPerRound + k
			edited := fmt.Sprintf("group-%03d/%s/SKILL.md", n%100, corpus.SkillName(n))
			remote.WriteFiles(map[string]string{edited: fmt.Sprintf("---\nname: %s\ndescription: edited in push %d\n---\n", corpus.SkillName(n), n)})
			remote.Commit(fmt.Sprintf("edit %d", n))
			remote.Push("main")

			ours := func() error {
				srv.ResetRequests()
				r, err := child.do("incremental")
				oc = r.Dur
				incBytes = append(incBytes, srv.Requests().FetchBytes)
				if err == nil && r.Hashed != 1 {
					err = fmt.Errorf("git bench: incremental sync hashed %d blobs, want 1", r.Hashed)
				}
				return err
			}
			peer := func() error {
				d, err := peerFetch(filepath.Join(dir, "peer"))
				pc = d
				return err
			}
			if err := gitBoth((round+k)%2 == 1, ours, peer); err != nil {
				child.kill()
				return nil, err
			}
			oursInc, peerInc = append(oursInc, oc), append(peerInc, pc)
		}

		pr, err := child.do("prune")
		if err != nil {
			child.kill()
			return nil, err
		}
		pruneTimes, before, after = append(pruneTimes, pr.Dur), append(before, pr.Before), append(after, pr.After)
		maxRSS, err := child.finish()
		if err != nil {
			return nil, err
		}
		rss = append(rss, maxRSS)
		env.Log("git: round %d: initial %s vs %s, last incremental %s vs %s, rss %d MiB",
			round, oi.Round(time.Millisecond), pi.Round(time.Millisecond), oc.Round(time.Millisecond), pc.Round(time.Millisecond), maxRSS>>20)
	}

	oI, pI := gitMedian(oursInit), gitMedian(peerInit)
	oC, pC := gitMedian(oursInc), gitMedian(peerInc)
	peakRSS := slices.Max(rss)
	ratioI := float64(oI) / float64(pI)
	ratioC := float64(oC) / float64(pC)
	rows = []Row{
		{
			Name:  fmt.Sprintf("git initial sync, %d files (fetch+walk+sha256 vs clone --depth 1+sha256sum)", files),
			Ours:  gitSeconds(oI),
			Peer:  gitSeconds(pI),
			Ratio: fmt.Sprintf("%.2fx", ratioI),
			Goal:  "<= 0.7x",
			OK:    ratioI <= 0.7,
		},
		{
			Name: "git sync peak RSS (initial + incremental + prune, own process)",
			Ours: fmt.Sprintf("%d MiB", peakRSS>>20),
			Goal: "< 200 MiB",
			OK:   peakRSS < 200<<20,
		},
		{
			Name:  "git sync after a one-file push (list+fetch+walk+hash new vs fetch --depth 1)",
			Ours:  gitSeconds(oC),
			Peer:  gitSeconds(pC),
			Ratio: fmt.Sprintf("%.2fx", ratioC),
			Goal:  "<= 1x and < 0.5 s",
			OK:    ratioC <= 1 && oC < 500*time.Millisecond,
		},
		{
			Name:  "git incremental pack size (bytes the server sent)",
			Ours:  fmt.Sprintf("%d B", gitMedian(incBytes)),
			Ratio: "",
			Goal:  "info",
			OK:    true,
		},
		{
			Name:  "git prune to the latest commit (store size before -> after)",
			Ours:  gitSeconds(gitMedian(pruneTimes)),
			Ratio: fmt.Sprintf("%d -> %d MiB", gitMedian(before)>>20, gitMedian(after)>>20),
			Goal:  "info",
			OK:    true,
		},
	}
	return rows, nil
}

// gitBoth runs a and b in the order first says.
func gitBoth(aFirst bool, a, b func() error) error {
	if !aFirst {
		a, b = b, a
	}
	if err := a(); err != nil {
		return err
	}
	return b()
}

func gitMedian[T time.Duration | int64](v []T) T {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func gitSeconds(d time.Duration) string { return fmt.Sprintf("%.3f s", d.Seconds()) }

func gitEnv() []string {
	return append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0")
}

// peerClone times git clone --depth 1 followed by sha256sum of every
// checked-out file.
func peerClone(url, dir string) (time.Duration, error) {
	start := time.Now()
	clone := exec.Command("git", "clone", "--quiet", "--depth", "1", url, dir)
	clone.Env = gitEnv()
	if out, err := clone.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("git clone: %w: %s", err, out)
	}
	hash := exec.Command("sh", "-c", `find . -path ./.git -prune -o -type f -print0 | xargs -0 sha256sum >/dev/null`)
	hash.Dir = dir
	if out, err := hash.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("sha256sum: %w: %s", err, out)
	}
	return time.Since(start), nil
}

// peerFetch times git fetch --depth 1 of the default branch in the clone.
func peerFetch(dir string) (time.Duration, error) {
	start := time.Now()
	fetch := exec.Command("git", "-C", dir, "fetch", "--quiet", "--depth", "1", "origin", "main")
	fetch.Env = gitEnv()
	if out, err := fetch.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("git fetch: %w: %s", err, out)
	}
	return time.Since(start), nil
}

// gitResult is one child answer, a JSON line.
type gitResult struct {
	Dur    time.Duration `json:"dur"`
	Files  int           `json:"files"`
	Hashed int           `json:"hashed"`
	Before int64         `json:"before"`
	After  int64         `json:"after"`
	Err    string        `json:"err"`
}

type gitChildProc struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

func startGitChild(url, dataDir string) (*gitChildProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(gitEnv(), gitChildEnv+"=1", "SKILLREG_BENCH_GIT_URL="+url, "SKILLREG_BENCH_GIT_DIR="+dataDir)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &gitChildProc{cmd: cmd, in: in, out: bufio.NewScanner(out)}, nil
}

func (c *gitChildProc) do(step string) (gitResult, error) {
	if _, err := fmt.Fprintln(c.in, step); err != nil {
		return gitResult{}, err
	}
	if !c.out.Scan() {
		return gitResult{}, fmt.Errorf("git bench child: no answer to %s: %v", step, c.out.Err())
	}
	var r gitResult
	if err := json.Unmarshal(c.out.Bytes(), &r); err != nil {
		return r, err
	}
	if r.Err != "" {
		return r, fmt.Errorf("git bench child %s: %s", step, r.Err)
	}
	return r, nil
}

// finish ends the child and returns its peak resident set size.
func (c *gitChildProc) finish() (int64, error) {
	c.in.Close()
	if err := c.cmd.Wait(); err != nil {
		return 0, fmt.Errorf("git bench child: %w", err)
	}
	ru, ok := c.cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0, errors.New("git bench child: no rusage on this platform")
	}
	return ru.Maxrss * 1024, nil // Linux reports kilobytes
}

func (c *gitChildProc) kill() {
	c.in.Close()
	c.cmd.Process.Kill()
	c.cmd.Wait()
}

// gitChild is the measured process: it syncs the default branch each time
// its parent asks, hashing only blobs it has not hashed before, the way
// the registry keeps a blob-id to digest map.
//
// SKILLREG_BENCH_GIT_CPUPROFILE=file writes a CPU profile of this side,
// and SKILLREG_BENCH_GIT_STEPS=1 logs each step's time to stderr.
func gitChild() int {
	url, dir := os.Getenv("SKILLREG_BENCH_GIT_URL"), os.Getenv("SKILLREG_BENCH_GIT_DIR")
	if prof := os.Getenv("SKILLREG_BENCH_GIT_CPUPROFILE"); prof != "" {
		f, err := os.Create(prof)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	pool, err := gitstore.NewPool(dir, gitstore.PoolOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer pool.Close()
	repo, err := pool.Repo(url)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	digests := map[string][sha256.Size]byte{}
	var last string
	in := bufio.NewScanner(os.Stdin)
	enc := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var r gitResult
		start := time.Now()
		switch step := in.Text(); step {
		case "initial", "incremental":
			last, r.Files, r.Hashed, err = gitSync(repo, digests)
		case "prune":
			if r.Before, err = repo.DiskUsage(); err == nil {
				if err = repo.Prune(context.Background(), []string{last}); err == nil {
					r.After, err = repo.DiskUsage()
				}
			}
		default:
			err = fmt.Errorf("unknown step %q", step)
		}
		r.Dur = time.Since(start)
		if err != nil {
			r.Err = err.Error()
		}
		if err := enc.Encode(r); err != nil {
			return 1
		}
	}
	return 0
}

func gitSync(repo *gitstore.Repo, digests map[string][sha256.Size]byte) (commit string, files, hashed int, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	step := time.Now()
	lap := func(name string) {
		if os.Getenv("SKILLREG_BENCH_GIT_STEPS") != "" {
			fmt.Fprintf(os.Stderr, "bench: git child: %-6s %s\n", name, time.Since(step).Round(time.Millisecond))
		}
		step = time.Now()
	}
	defer lap("hash")
	refs, err := repo.ListRemote(ctx, gitstore.Auth{})
	if err != nil {
		return "", 0, 0, err
	}
	res, err := refs.Resolve(gitref.Pin{})
	if err != nil {
		return "", 0, 0, err
	}
	lap("list")
	if err := repo.Fetch(ctx, res, gitstore.Auth{}); err != nil {
		return "", 0, 0, err
	}
	lap("fetch")
	entries, err := repo.Walk(res.Commit, "")
	if err != nil {
		return "", 0, 0, err
	}
	lap("walk")
	for _, e := range entries {
		if e.Mode != gitstore.ModeRegular && e.Mode != gitstore.ModeExecutable {
			continue
		}
		files++
		if _, ok := digests[e.Blob]; ok {
			continue
		}
		data, err := repo.ReadBlob(e.Blob)
		if err != nil {
			return "", 0, 0, err
		}
		digests[e.Blob] = sha256.Sum256(data)
		hashed++
	}
	return res.Commit, files, hashed, nil
}
