package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/skillreg/skillreg/gitref"
	"github.com/skillreg/skillreg/internal/corpus"
	"github.com/skillreg/skillreg/internal/gittest"
)

func init() { register("webhook-e2e", runWebhookE2E) }

const webhookE2EPushes = 25

// runWebhookE2E measures issue 5's promise end to end: on a loopback git
// server holding a repository of env.Skills skills, each round changes one
// file, commits and pushes it, then delivers a signed `push` webhook (the
// real GitHub example payload, pointed at the repository) to the running
// daemon and times until skills/get over MCP (stateless 2026-07-28
// requests) shows the file's new digest. The peer, for scale, is
// `git fetch --depth 1` of the same push into a shallow clone: the bare
// network cost of learning about the change, without indexing or serving.
func runWebhookE2E(env *Env) (rows []Row, err error) {
	defer func() {
		// gittest helpers panic when they have no testing.TB.
		if p := recover(); p != nil {
			err = fmt.Errorf("webhook-e2e: %v", p)
		}
	}()
	pb, err := newPushBench(env, "webhook-e2e")
	if err != nil {
		return nil, err
	}
	defer pb.close()
	remote, example, before := pb.remote, pb.example, pb.before
	peerDir := filepath.Join(env.Tmp, "webhook-e2e-peer")
	clone := exec.Command("git", "clone", "--quiet", "--depth", "1", remote.URL(), peerDir)
	clone.Env = gitEnv()
	if out, err := clone.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("git clone: %w: %s", err, out)
	}
	source := "sources:\n  - name: bench\n    url: " + remote.URL() + "\n    ref: {branch: main}\n    poll: 0\n"
	ours, peer, err := webhookPushes(env, "webhook-e2e", source, remote, example, &before, peerDir)
	if err != nil {
		return nil, err
	}

	// Issue 15: the same pushes with two remotes beside the source that
	// accept connections and never answer, polled every 5 s, with the
	// default timeout (60 s) and MaxParallelSyncs (2). Before the sync
	// queue's classes, they held both slots and a push waited for one of
	// them to time out.
	var hungSources strings.Builder
	for i := range 2 {
		h, err := gittest.StartHung()
		if err != nil {
			return nil, err
		}
		defer h.Close()
		fmt.Fprintf(&hungSources, "  - name: hung%d\n    url: %s\n    poll: 5s\n", i+1, h.URL())
	}
	hungOurs, hungPeer, err := webhookPushes(env, "webhook-e2e-hung", source+hungSources.String(), remote, example, &before, peerDir)
	if err != nil {
		return nil, err
	}

	q := func(v []time.Duration, p float64) time.Duration {
		s := slices.Clone(v)
		slices.Sort(s)
		return s[min(len(s)-1, int(p*float64(len(s))))]
	}
	oM, o95, pM, p95 := median(ours), q(ours, 0.95), median(peer), q(peer, 0.95)
	hM, h95, hpM := median(hungOurs), q(hungOurs, 0.95), median(hungPeer)
	return []Row{
		{
			Name:  fmt.Sprintf("webhook push to new digest over MCP, %d-skill repo, one-file change (median of %d)", env.Skills, len(ours)),
			Ours:  storeMS(oM),
			Peer:  storeMS(pM) + " (git fetch --depth 1)",
			Ratio: fmt.Sprintf("%.2fx", float64(oM)/float64(pM)),
			Goal:  "< 1 s",
			OK:    oM < time.Second,
		},
		{
			Name:  fmt.Sprintf("webhook push to new digest over MCP, p95 of %d", len(ours)),
			Ours:  storeMS(o95),
			Peer:  storeMS(p95) + " (git fetch --depth 1)",
			Ratio: fmt.Sprintf("%.2fx", float64(o95)/float64(p95)),
			Goal:  "reported",
			OK:    true,
		},
		{
			Name:  fmt.Sprintf("the same with two hung remotes beside it (median of %d; p95 %s; without them %s)", len(hungOurs), storeMS(h95), storeMS(oM)),
			Ours:  storeMS(hM),
			Peer:  storeMS(hpM) + " (git fetch --depth 1)",
			Ratio: fmt.Sprintf("%.2fx", float64(hM)/float64(hpM)),
			Goal:  "< 1 s",
			OK:    hM < time.Second,
		},
	}, nil
}

// webhookPushes starts a daemon on config (source "bench" on remote) and
// times webhookE2EPushes pushes from delivery to the new digest over MCP,
// each beside a git fetch of the same push into peerDir.
func webhookPushes(env *Env, name, config string, remote *gittest.Repo, example []byte, before *string, peerDir string) (ours, peer []time.Duration, err error) {
	start := time.Now()
	d, err := startDaemon(env, name, config)
	if err != nil {
		return nil, nil, err
	}
	defer d.stop()
	env.Log("%s: daemon ready (initial sync) in %s", name, time.Since(start).Round(time.Millisecond))
	base := "http://" + d.addr

	c := &http.Client{}
	var answers []time.Duration
	var polls []int
	for i := range webhookE2EPushes {
		k := (i*7919 + 13) % env.Skills
		skillDir := corpus.SkillDir(k, 0)
		file := skillDir + "/references/file-1.md"
		content := fmt.Sprintf("edited by %s push %d at %s\n%s\n", name, i, time.Now().Format(time.RFC3339Nano), strings.Repeat("more words ", 50+i))
		want := gitref.Sum([]byte(content)).String()
		remote.WriteFiles(map[string]string{file: content})
		after := remote.Commit(fmt.Sprintf("edit %s", file))
		remote.Push("main")

		body, err := pushDelivery(example, remote.URL(), *before, after)
		if err != nil {
			return nil, nil, err
		}
		*before = after
		skillURI := "skill://bench/" + skillDir + "/SKILL.md"
		fileURI := "skill://bench/" + file

		t0 := time.Now()
		status, err := deliverSigned(c, base, fmt.Sprintf("%s-%d", name, i), body)
		if err != nil {
			return nil, nil, err
		}
		answered := time.Since(t0)
		if status != http.StatusAccepted {
			return nil, nil, fmt.Errorf("%s: push delivery answered %d, want 202 (is the webhook mounted and the source matched?)", name, status)
		}
		n := 0
		for {
			n++
			got, err := fileDigest(c, base+"/mcp", skillURI, fileURI)
			if err != nil {
				return nil, nil, err
			}
			if got == want {
				break
			}
			if time.Since(t0) > 2*time.Minute {
				return nil, nil, fmt.Errorf("%s: %s still at %s two minutes after the delivery", name, fileURI, got)
			}
			time.Sleep(time.Millisecond)
		}
		ours, answers, polls = append(ours, time.Since(t0)), append(answers, answered), append(polls, n)

		p, err := peerFetch(peerDir)
		if err != nil {
			return nil, nil, err
		}
		peer = append(peer, p)
	}
	env.Log("%s: push to visible %v", name, ours)
	env.Log("%s: webhook answered in %v; skills/get polls %v", name, answers, polls)
	env.Log("%s: git fetch --depth 1 %v", name, peer)
	return ours, peer, nil
}

// pushDelivery is the real GitHub push example with its repository
// pointed at ours, on refs/heads/main, moving from before to after.
func pushDelivery(example []byte, cloneURL, before, after string) ([]byte, error) {
	var m map[string]any
	if err := json.Unmarshal(example, &m); err != nil {
		return nil, err
	}
	m["ref"], m["before"], m["after"] = "refs/heads/main", before, after
	repo, ok := m["repository"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("push example without a repository")
	}
	repo["full_name"], repo["name"] = "skillreg/bench-skills", "bench-skills"
	repo["clone_url"], repo["html_url"] = cloneURL, strings.TrimSuffix(cloneURL, ".git")
	repo["default_branch"], repo["master_branch"] = "main", "main"
	if owner, ok := repo["owner"].(map[string]any); ok {
		owner["login"] = "skillreg"
	}
	if hc, ok := m["head_commit"].(map[string]any); ok {
		hc["id"] = after
	}
	return json.Marshal(m)
}

// deliverSigned posts a push delivery signed with the bench secret, the
// way GitHub does.
func deliverSigned(c *http.Client, base, id string, body []byte) (int, error) {
	mac := hmac.New(sha256.New, []byte(webhookSecret))
	mac.Write(body)
	req, err := http.NewRequest(http.MethodPost, base+"/webhooks/github", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-GitHub-Delivery", id)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// fileDigest asks skills/get for a skill and returns the digest its
// manifest gives one file.
func fileDigest(c *http.Client, url, skillURI, fileURI string) (string, error) {
	req := mcpRequest{"skills/get", "", `{"jsonrpc":"2.0","id":1,"method":"skills/get","params":{` + meta2026 + `,"uri":"` + skillURI + `"}}`}
	b, err := req.do(c, url)
	if err != nil {
		return "", fmt.Errorf("skills/get %s: %w", skillURI, err)
	}
	var res struct {
		Result struct {
			Skill struct {
				Resources []struct {
					URI    string `json:"uri"`
					Digest string `json:"digest"`
				} `json:"resources"`
			} `json:"skill"`
		} `json:"result"`
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(b, &res); err != nil {
		return "", fmt.Errorf("skills/get %s: %w", skillURI, err)
	}
	if res.Error != nil {
		return "", fmt.Errorf("skills/get %s: %s", skillURI, res.Error)
	}
	for _, r := range res.Result.Skill.Resources {
		if r.URI == fileURI {
			return r.Digest, nil
		}
	}
	return "", fmt.Errorf("skills/get %s: no %s in the manifest", skillURI, fileURI)
}

// pushBench is what the webhook benches share: the real GitHub push
// example, a loopback git server holding a corpus of env.Skills skills on
// main (before is its commit), and the webhook secret set in the
// environment the daemons inherit. close restores the environment and
// stops the server.
type pushBench struct {
	example []byte
	remote  *gittest.Repo
	before  string
	close   func()
}

func newPushBench(env *Env, name string) (*pushBench, error) {
	example, err := os.ReadFile(filepath.Join("webhook", "testdata", "push.json"))
	if err != nil {
		return nil, fmt.Errorf("%s reads the real push payload (run from the module root): %w", name, err)
	}
	srv, err := gittest.Start(filepath.Join(env.Tmp, name+"-git"))
	if err != nil {
		return nil, err
	}
	remote := srv.CreateRepo("bench-skills")
	start := time.Now()
	remote.WriteTree(func(dir string) error {
		_, _, err := corpus.Write(dir, corpus.Options{Skills: env.Skills})
		return err
	})
	before := remote.Commit("corpus")
	remote.Push("main")
	env.Log("%s: %d-skill repository committed in %s", name, env.Skills, time.Since(start).Round(time.Millisecond))

	old, had := os.LookupEnv("SKILLREG_WEBHOOK_SECRET")
	os.Setenv("SKILLREG_WEBHOOK_SECRET", webhookSecret)
	return &pushBench{example: example, remote: remote, before: before, close: func() {
		if had {
			os.Setenv("SKILLREG_WEBHOOK_SECRET", old)
		} else {
			os.Unsetenv("SKILLREG_WEBHOOK_SECRET")
		}
		srv.Close()
	}}, nil
}
