package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/skillreg/skillreg/internal/corpus"
	"github.com/skillreg/skillreg/internal/gittest"
	"github.com/skillreg/skillreg/store"
)

func init() { register("restart", runRestart) }

// restartRow measures restarts of a daemon whose configuration cfg (a
// source of env.Skills skills) was synced and persisted once, against the
// cold index of the corpus at dir.
func restartRow(env *Env, name, kind, cfg, dir string) (Row, restartRun, error) {
	start := time.Now()
	d, err := startDaemon(env, name, cfg)
	if err != nil {
		return Row{}, restartRun{}, err
	}
	if err := waitSynced("http://" + d.addr); err != nil {
		d.stop()
		return Row{}, restartRun{}, err
	}
	d.stop()
	env.Log("%s: first start (sync, index and persist) took %s", name, time.Since(start).Round(time.Millisecond))
	home := filepath.Join(env.Tmp, name)
	cfgPath, data := filepath.Join(home, "config.yaml"), filepath.Join(home, "data")
	if _, err := timeCmd(*binPath, "index", dir); err != nil { // warm the cache for the peer
		return Row{}, restartRun{}, err
	}
	var ours, peer, listen, checked []time.Duration
	for round := range restartRounds {
		o := func() error {
			r, err := timeRestart(cfgPath, data, env.Skills)
			ours, listen, checked = append(ours, r.firstList), append(listen, r.listening), append(checked, r.synced)
			return err
		}
		p := func() error {
			d, err := timeCmd(*binPath, "index", dir)
			peer = append(peer, d)
			return err
		}
		if err := gitBoth(round%2 == 0, o, p); err != nil {
			return Row{}, restartRun{}, err
		}
	}
	env.Log("%s: first skills/list %v (listening after %v, first sync done after %v); cold index %v", name, ours, listen, checked, peer)
	oM, pM := median(ours), median(peer)
	ratio := float64(oM) / float64(pM)
	return Row{
		Name:  fmt.Sprintf("restart to first skills/list answer, %d persisted skills of a %s source (median of %d)", env.Skills, kind, restartRounds),
		Ours:  storeMS(oM),
		Peer:  storeMS(pM) + " (skillreg index, cold)",
		Ratio: fmt.Sprintf("%.1f%%", 100*ratio),
		Goal:  "< 10% and < 500 ms",
		OK:    ratio < 0.10 && oM < 500*time.Millisecond,
	}, restartRun{data: data, cold: pM, synced: median(checked)}, nil
}

// restartRun is what restartRow measured besides its row: the data dir,
// the cold index's median and the median time from the process start to
// the end of the source's first sync.
type restartRun struct {
	data         string
	cold, synced time.Duration
}

const restartRounds = 5

// runRestart measures what issue 4 promises a restart costs: from the
// start of a `skillreg serve` process whose data directory holds the
// persisted catalog of env.Skills skills (a dir source over the shared
// corpus) to its first successful skills/list answer (a full first page of
// the stored catalog, over loopback), against the cold index of the same
// corpus (`skillreg index DIR`). Rounds alternate the two and report
// medians; the page cache is warm for both. It also reports the store's
// size on disk (allocated blocks of skillreg.db) per 1,000 skills.
func runRestart(env *Env) ([]Row, error) {
	dir, _, _, err := corpusDir(env)
	if err != nil {
		return nil, err
	}
	// A git source: the catalog is checked by its commit alone.
	srv, err := gittest.Start(filepath.Join(env.Tmp, "restart-git-server"))
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	remote := srv.CreateRepo("restart")
	remote.WriteTree(func(d string) error {
		_, _, err := corpus.Write(d, corpus.Options{Skills: env.Skills})
		return err
	})
	remote.Commit("corpus")
	remote.Push("main")
	gitRow, _, err := restartRow(env, "restart-git", "git", "sources:\n  - name: bench\n    url: "+remote.URL()+"\n    poll: 0\n", dir)
	if err != nil {
		return nil, err
	}
	// A directory source: the stored catalog is served before any file
	// is looked at; the source's first sync is the check (one walk of the
	// tree, stat keys compared with the stored ones, stepping aside for
	// requests).
	dirRow, run, err := restartRow(env, "restart", "dir", "sources:\n  - name: bench\n    dir: "+dir+"\n    poll: 0\n", dir)
	if err != nil {
		return nil, err
	}
	checkRow := Row{
		Name:  fmt.Sprintf("the dir source's check: process start to the end of its first sync after the restart, in the background (median of %d)", restartRounds),
		Ours:  storeMS(run.synced),
		Peer:  storeMS(run.cold) + " (skillreg index, cold)",
		Ratio: fmt.Sprintf("%.0f%%", 100*float64(run.synced)/float64(run.cold)),
		Goal:  "reported",
		OK:    true,
	}

	dbBlocks, err := allocated(filepath.Join(run.data, store.FileName))
	if err != nil {
		return nil, err
	}
	var corpusBlocks int64
	err = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		n, err := allocated(p)
		corpusBlocks += n
		return err
	})
	if err != nil {
		return nil, err
	}
	perK := func(b int64) float64 { return float64(b) / float64(env.Skills) * 1000 / (1 << 20) }
	return []Row{
		gitRow,
		dirRow,
		checkRow,
		{
			Name:  "store on disk per 1,000 skills (allocated blocks of skillreg.db vs of the corpus's files)",
			Ours:  fmt.Sprintf("%.2f MiB", perK(dbBlocks)),
			Peer:  fmt.Sprintf("%.2f MiB", perK(corpusBlocks)),
			Ratio: fmt.Sprintf("%.2fx", float64(dbBlocks)/float64(corpusBlocks)),
			Goal:  "reported",
			OK:    true,
		},
	}, nil
}

// restartTimes is one measured restart.
type restartTimes struct {
	listening time.Duration // process start to the "serving" log line
	firstList time.Duration // process start to the first full skills/list page
	synced    time.Duration // process start to every source's first sync attempted (/readyz)
}

// timeRestart starts `skillreg serve` on an existing data directory and
// times its first successful skills/list answer: a page of skills from
// the stored catalog (an empty page, which a daemon that lost its store
// would answer, does not count). It then lets the background resync of
// the source finish and stops the daemon, so rounds do not overlap.
func timeRestart(cfgPath, data string, skills int) (restartTimes, error) {
	var rt restartTimes
	cmd := exec.Command(*binPath, "serve", "--config", cfgPath, "--listen", "127.0.0.1:0", "--data", data)
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	found := make(chan string, 1)
	var logBuf bytes.Buffer
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if logBuf.Len() < 64<<10 {
				logBuf.WriteString(line + "\n")
			}
			if m := servingRE.FindStringSubmatch(line); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	begin := time.Now()
	if err := cmd.Start(); err != nil {
		return rt, err
	}
	d := &daemon{cmd: cmd}
	defer func() {
		d.stop()
		pw.Close()
		<-scanned
	}()
	var addr string
	select {
	case addr = <-found:
	case <-time.After(60 * time.Second):
		return rt, errors.New("restart: no serving line within 60s")
	}
	rt.listening = time.Since(begin)
	url := "http://" + addr + "/mcp"
	c := &http.Client{}
	for {
		b, err := listReq("").do(c, url)
		if err == nil {
			var res struct {
				Result struct {
					Skills     []json.RawMessage `json:"skills"`
					NextCursor string            `json:"nextCursor"`
				} `json:"result"`
			}
			if err := json.Unmarshal(b, &res); err != nil {
				return rt, fmt.Errorf("restart: skills/list: %w", err)
			}
			if len(res.Result.Skills) > 0 && (res.Result.NextCursor != "" || len(res.Result.Skills) == skills) {
				rt.firstList = time.Since(begin)
				break
			}
		}
		if time.Since(begin) > 60*time.Second {
			return rt, fmt.Errorf("restart: no skills/list answer with the stored catalog within 60s (last error %v)", err)
		}
		time.Sleep(time.Millisecond)
	}
	if err := waitSynced("http://" + addr); err != nil {
		return rt, err
	}
	rt.synced = time.Since(begin)
	if strings.Contains(logBuf.String(), "not serving the stored catalog") {
		return rt, fmt.Errorf("restart: the daemon dropped its stored catalog:\n%s", logBuf.String())
	}
	return rt, nil
}

// waitSynced waits until every source has finished a sync attempt since
// the daemon started (readyz reports each source's "attempted").
func waitSynced(base string) error {
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			var rz struct {
				Sources []struct {
					Attempted bool `json:"attempted"`
				} `json:"sources"`
			}
			err = json.NewDecoder(resp.Body).Decode(&rz)
			resp.Body.Close()
			done := err == nil && len(rz.Sources) > 0
			for _, s := range rz.Sources {
				done = done && s.Attempted
			}
			if done {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return errors.New("sources not synced within 5 minutes")
}

// allocated is the space a file takes on disk (its allocated blocks).
func allocated(path string) (int64, error) {
	info, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return info.Size(), nil
	}
	return st.Blocks * 512, nil
}
