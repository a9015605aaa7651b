package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/skillreg/skillreg/gitref"
	"github.com/skillreg/skillreg/internal/corpus"
	"github.com/skillreg/skillreg/internal/gittest"
)

func init() { register("replicas", runReplicas) }

const (
	replicasPushes = 25
	replicasCount  = 3
	// replicasWait bounds how long a replica may take to serve a push
	// before the section gives up: with poll 0 a replica the relay did
	// not reach never converges.
	replicasWait = time.Minute
	// replicasPollEvery spaces each replica's skills/get while a push is
	// awaited: fine enough for a 1 s goal, and three pollers at 1 ms took
	// CPU the replicas' syncs needed on this 2-core machine.
	replicasPollEvery = 5 * time.Millisecond
)

// runReplicas measures issue 23's promise: three `skillreg serve`
// processes over one loopback git source, all with poll 0 and static
// peers naming each other (each list includes the replica itself, which
// it recognises by its instance id), so only the relay can carry a push
// from the replica that got the webhook to the other two. Each of 25
// rounds changes one file, pushes it and delivers one signed push webhook
// to one replica (the next in turn), then times until every replica's
// skills/get shows the new digest. The peer is one replica without peers
// measured the same way in the same run: the relay's cost is the
// difference.
func runReplicas(env *Env) (rows []Row, err error) {
	defer func() {
		// gittest helpers panic when they have no testing.TB.
		if p := recover(); p != nil {
			err = fmt.Errorf("replicas: %v", p)
		}
	}()
	pb, err := newPushBench(env, "replicas")
	if err != nil {
		return nil, err
	}
	defer pb.close()
	remote, example, before := pb.remote, pb.example, pb.before
	// The daemons read the webhook secret from the environment they
	// inherit (newPushBench sets it), and the peers secret from a file.
	secret := make([]byte, 32)
	rand.Read(secret)
	secretFile := filepath.Join(env.Tmp, "replicas-peers-secret")
	if err := os.WriteFile(secretFile, []byte(hex.EncodeToString(secret)+"\n"), 0o600); err != nil {
		return nil, err
	}
	source := "sources:\n  - name: bench\n    url: " + remote.URL() + "\n    ref: {branch: main}\n    poll: 0\n"

	one, err := replicaPushes(env, "replicas-1", 1, source, "", remote, example, &before)
	if err != nil {
		return nil, err
	}
	oneM, oneX := median(one.last), slices.Max(one.last)
	three, err := replicaPushes(env, "replicas-3", replicasCount, source, secretFile, remote, example, &before)
	name := fmt.Sprintf("webhook to new digest served by all of %d replicas (static peers, poll 0, one webhook to one of them), %d-skill repo, median / max of %d", replicasCount, env.Skills, replicasPushes)
	peer := fmt.Sprintf("%s / %s (1 replica, no peers)", storeMS(oneM), storeMS(oneX))
	if err != nil {
		return []Row{{Name: name, Ours: "failed (see the log)", Peer: peer, Goal: "max < 1 s"}}, err
	}
	m, x := median(three.last), slices.Max(three.last)
	lag := make([]time.Duration, len(three.last))
	for i := range lag {
		lag[i] = three.last[i] - three.first[i]
	}
	return []Row{
		{
			Name:  name,
			Ours:  storeMS(m) + " / " + storeMS(x),
			Peer:  peer,
			Ratio: fmt.Sprintf("%.2fx", float64(m)/float64(oneM)),
			Goal:  "max < 1 s",
			OK:    x < time.Second,
		},
		{
			Name: fmt.Sprintf("of which the relay: the replica that got the webhook serving it to the last of %d serving it, median / max of %d", replicasCount, replicasPushes),
			Ours: storeMS(median(lag)) + " / " + storeMS(slices.Max(lag)),
			Goal: "reported",
			OK:   true,
		},
		{
			Name:  fmt.Sprintf("CPU (user+sys) per push, summed over the %d replicas (they share this machine's cores; each has its own in a deployment)", replicasCount),
			Ours:  storeMS(three.cpu / replicasPushes),
			Peer:  storeMS(one.cpu/replicasPushes) + " (1 replica)",
			Ratio: fmt.Sprintf("%.2fx", float64(three.cpu)/float64(max(one.cpu, 1))),
			Goal:  "reported",
			OK:    true,
		},
	}, nil
}

// pushTimes are one replica set's rounds: from the delivery to the new
// digest served by the replica that got the webhook (first) and by the
// last of them (last).
type pushTimes struct {
	first, last []time.Duration
	cpu         time.Duration // all replicas' CPU (user+sys) over the rounds
}

// replicaPushes starts n daemons on config (source "bench" on remote;
// with a peers secret file, peers: all n addresses), runs replicasPushes
// rounds, each delivering one webhook to replica i%n, and times each
// until every replica serves the pushed file's new digest.
func replicaPushes(env *Env, name string, n int, config, secretFile string, remote *gittest.Repo, example []byte, before *string) (pushTimes, error) {
	var res pushTimes
	// The addresses must be known before the daemons start, for their
	// peers lists: bind n free loopback ports at once (so they differ),
	// then let them go for the daemons to take.
	addrs := make([]string, n)
	lns := make([]net.Listener, n)
	for i := range addrs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			for _, l := range lns[:i] {
				l.Close()
			}
			return res, err
		}
		lns[i], addrs[i] = ln, ln.Addr().String()
	}
	for _, l := range lns {
		l.Close()
	}
	if secretFile != "" {
		var b strings.Builder
		b.WriteString("peers:\n")
		for _, a := range addrs {
			fmt.Fprintf(&b, "  - http://%s\n", a)
		}
		fmt.Fprintf(&b, "peers_secret_file: %s\n", secretFile)
		config += b.String()
	}
	ds := make([]*daemon, n)
	for i := range ds {
		start := time.Now()
		d, err := startDaemonOn(env, fmt.Sprintf("%s-%d", name, i), config, addrs[i])
		if err != nil {
			return res, fmt.Errorf("%s: replica %d: %w", name, i, err)
		}
		defer d.stop()
		ds[i] = d
		env.Log("%s: replica %d on %s ready (initial sync) in %s", name, i, d.addr, time.Since(start).Round(time.Millisecond))
	}

	c := &http.Client{}
	per := make([][]time.Duration, n) // per replica, per round
	var cpu0 time.Duration
	for _, d := range ds {
		cpu0 += d.cpu()
	}
	env.Log("%s: load average before the pushes %s", name, loadAvg())
	for i := range replicasPushes {
		k := (i*7919 + 29) % env.Skills
		skillDir := corpus.SkillDir(k, 0)
		file := skillDir + "/references/file-1.md"
		content := fmt.Sprintf("edited by %s push %d at %s\n%s\n", name, i, time.Now().Format(time.RFC3339Nano), strings.Repeat("more words ", 50+i))
		want := gitref.Sum([]byte(content)).String()
		remote.WriteFiles(map[string]string{file: content})
		after := remote.Commit(fmt.Sprintf("edit %s", file))
		remote.Push("main")
		body, err := pushDelivery(example, remote.URL(), *before, after)
		if err != nil {
			return res, err
		}
		*before = after
		skillURI := "skill://bench/" + skillDir + "/SKILL.md"
		fileURI := "skill://bench/" + file

		to := i % n
		t0 := time.Now()
		status, err := deliverSigned(c, "http://"+ds[to].addr, fmt.Sprintf("%s-%d", name, i), body)
		if err != nil {
			return res, err
		}
		if status != http.StatusAccepted {
			return res, fmt.Errorf("%s: push delivery to replica %d answered %d, want 202 (is the webhook mounted and the source matched?)", name, to, status)
		}
		// Every replica is asked at once, each by its own client loop, so
		// the last one's time is not the sum of the others'.
		seen := make([]time.Duration, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for j, d := range ds {
			wg.Go(func() {
				for {
					got, err := fileDigest(c, "http://"+d.addr+"/mcp", skillURI, fileURI)
					if err != nil {
						errs[j] = fmt.Errorf("replica %d: %w", j, err)
						return
					}
					if got == want {
						seen[j] = time.Since(t0)
						return
					}
					if time.Since(t0) > replicasWait {
						errs[j] = fmt.Errorf("replica %d still serves %s at %s %s after the delivery to replica %d (with poll 0 only the relay reaches it: is it in this binary?)", j, fileURI, got, replicasWait, to)
						return
					}
					time.Sleep(replicasPollEvery)
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return res, fmt.Errorf("%s: push %d: %w", name, i, err)
		}
		for j := range ds {
			per[j] = append(per[j], seen[j])
		}
		res.first = append(res.first, seen[to])
		res.last = append(res.last, slices.Max(seen))
	}
	for _, d := range ds {
		res.cpu += d.cpu()
	}
	res.cpu -= cpu0
	env.Log("%s: load average after the pushes %s; the replicas' CPU %s", name, loadAvg(), res.cpu)
	for j, d := range ds {
		env.Log("%s: replica %d serving each push after %v", name, j, per[j])
		if n > 1 {
			env.Log("%s: replica %d: %s", name, j, relayCounts(c, d.addr))
		}
	}
	env.Log("%s: delivery to served by all %d: %v", name, n, res.last)
	return res, nil
}

// relayCounts is a replica's relay counters from /metrics, for the log:
// with poll 0 every push reached the others through them.
func relayCounts(c *http.Client, addr string) string {
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "skillreg_relays_") || strings.HasPrefix(line, "skillreg_peers_known") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "; ")
}

// loadAvg is /proc/loadavg's first three fields, for the log: this
// machine is shared, and three replicas' syncs compete for its cores.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}
