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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skillreg/skillreg/internal/fakegithub"
	"github.com/skillreg/skillreg/internal/gittest"
)

const testSecret = "it's a secret to everybody"

// payload loads a real GitHub example payload and points it at a
// repository of ours.
func payload(t *testing.T, name, fullName, cloneURL string, edit func(map[string]any)) []byte {
	t.Helper()
	b, err := os.ReadFile("../../webhook/testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	repo := m["repository"].(map[string]any)
	owner, repoName, _ := strings.Cut(fullName, "/")
	repo["full_name"], repo["name"], repo["clone_url"] = fullName, repoName, cloneURL
	repo["html_url"] = strings.TrimSuffix(cloneURL, ".git")
	repo["owner"].(map[string]any)["login"] = owner
	if edit != nil {
		edit(m)
	}
	out, _ := json.Marshal(m)
	return out
}

// onMain points a push payload at refs/heads/main of a repository whose
// default branch is main.
func onMain(m map[string]any) {
	m["ref"] = "refs/heads/main"
	repo := m["repository"].(map[string]any)
	repo["default_branch"], repo["master_branch"] = "main", "main"
}

// deliver posts a delivery signed independently of the code under test.
func deliver(t *testing.T, url, event, id string, body []byte) (int, string) {
	t.Helper()
	mac := hmac.New(sha256.New, []byte(testSecret))
	mac.Write(body)
	req, _ := http.NewRequest("POST", url+"/webhooks/github", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", id)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestWebhookPushEndToEnd: a push to the tracked branch, announced by a
// signed delivery, reaches MCP clients without any polling.
func TestWebhookPushEndToEnd(t *testing.T) {
	t.Setenv("SKILLREG_WEBHOOK_SECRET", "old-secret,"+testSecret)
	remote := gitRemote(t)
	d := startDaemon(t, teamSource(remote), "")
	cs := connect(t, d.URL, "2025-11-25")
	const uri, file = "skill://team/deploy/SKILL.md", "skill://team/deploy/references/run.md"
	before := gitEntryDigest(t, cs, uri, file)

	remote.WriteFiles(map[string]string{"skills/deploy/references/run.md": "changed by a push\n"})
	remote.Commit("change")
	remote.Push("main")
	body := payload(t, "push.json", "acme/team-skills", remote.URL(), onMain)
	status, reply := deliver(t, d.URL, "push", "d-1", body)
	if status != http.StatusAccepted || !strings.Contains(reply, "team") {
		t.Fatalf("push delivery: %d %s", status, reply)
	}
	waitUntil(t, func() bool { return gitEntryDigest(t, cs, uri, file) != before })

	// A redelivery is answered 200 and asks again (cheap: nothing moved).
	if status, reply := deliver(t, d.URL, "push", "d-1", body); status != http.StatusOK || !strings.Contains(reply, `"redelivery":true`) {
		t.Fatalf("redelivery: %d %s", status, reply)
	}
	// A forged delivery is refused with nothing in the body.
	req, _ := http.NewRequest("POST", d.URL+"/webhooks/github", bytes.NewReader(body))
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-Hub-Signature-256", "sha256="+strings.Repeat("0", 64))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || len(b) != 0 {
		t.Fatalf("forged: %d %q", resp.StatusCode, b)
	}
}

// TestWebhookReleaseEndToEnd: a source pinned to the latest GitHub release
// moves when a signed release delivery announces a new one.
func TestWebhookReleaseEndToEnd(t *testing.T) {
	t.Setenv("SKILLREG_WEBHOOK_SECRET", testSecret)
	srv := gittest.NewServer(t)
	remote := srv.CreateRepo("acme/skills")
	remote.WriteFiles(map[string]string{"deploy/SKILL.md": "---\nname: deploy\ndescription: Deploy, first release.\n---\n"})
	remote.Commit("v1")
	remote.Push("main")
	remote.Tag("v1.0.0", true)
	gh := fakegithub.New(fakegithub.Options{})
	defer gh.Close()
	gh.CreateRepo("acme/skills")
	gh.Publish("acme/skills", fakegithub.Release{TagName: "v1.0.0", PublishedAt: time.Now().Add(-time.Hour)})

	d := startDaemon(t, fmt.Sprintf("github:\n  api_url: %s/\nsources:\n  - name: acme\n    url: %s\n    ref: {release: latest}\n    poll: 0\n", gh.URL, remote.URL()), "")
	cs := connect(t, d.URL, "2025-11-25")
	const uri = "skill://acme/deploy/SKILL.md"
	before := gitEntryDigest(t, cs, uri, uri)

	remote.WriteFiles(map[string]string{"deploy/SKILL.md": "---\nname: deploy\ndescription: Deploy, second release.\n---\n"})
	remote.Commit("v1.1")
	remote.Push("main")
	remote.Tag("v1.1.0", true)
	published := gh.Publish("acme/skills", fakegithub.Release{TagName: "v1.1.0", PublishedAt: time.Now()})
	body := payload(t, "release-published.json", "acme/skills", remote.URL(), func(m map[string]any) {
		rel := m["release"].(map[string]any)
		rel["tag_name"] = "v1.1.0"
		rel["id"] = published.ID
		rel["published_at"] = published.PublishedAt.UTC().Format(time.RFC3339)
		rel["html_url"] = "https://github.com/acme/skills/releases/tag/v1.1.0"
	})
	status, reply := deliver(t, d.URL, "release", "r-1", body)
	if status != http.StatusAccepted {
		t.Fatalf("release delivery: %d %s", status, reply)
	}
	waitUntil(t, func() bool { return gitEntryDigest(t, cs, uri, uri) != before })
	snap, _ := d.Registry.Current().Snapshot("acme")
	if snap.Commit != remote.Head() {
		t.Fatalf("serving %s, want the v1.1.0 commit %s", snap.Commit, remote.Head())
	}
}

func TestWebhookNotMountedWithoutSecret(t *testing.T) {
	t.Setenv("SKILLREG_WEBHOOK_SECRET", "")
	d := startDaemon(t, "", "")
	if status, _ := deliver(t, d.URL, "ping", "p-1", []byte(`{"zen":"x","hook_id":1}`)); status != http.StatusNotFound && status != http.StatusMethodNotAllowed {
		t.Fatalf("unmounted endpoint answered %d", status)
	}
}

// TestConcurrentDeliveriesCoalesce: 100 deliveries for one source while a
// sync is stuck produce one follow-up sync, not 100.
func TestConcurrentDeliveriesCoalesce(t *testing.T) {
	t.Setenv("SKILLREG_WEBHOOK_SECRET", testSecret)
	srv := gittest.NewServer(t)
	remote := srv.CreateRepo("team")
	remote.WriteFiles(map[string]string{"skills/a/SKILL.md": "---\nname: a\ndescription: A.\n---\n"})
	remote.Commit("one")
	remote.Push("main")
	d := startDaemon(t, "sources:\n  - name: team\n    url: "+remote.URL()+"\n    path: skills\n    poll: 0\n    timeout: 2s\n", "")
	syncs := func() float64 {
		return metricValue(t, scrape(t, d.URL), `skillreg_syncs_total{result="failed",source="team"}`) +
			metricValue(t, scrape(t, d.URL), `skillreg_syncs_total{result="unchanged",source="team"}`) +
			metricValue(t, scrape(t, d.URL), `skillreg_syncs_total{result="updated",source="team"}`)
	}
	base := syncs()
	srv.SetFailure(gittest.Failure{Hang: true}) // the next sync sticks in its ref listing
	body := payload(t, "push.json", "acme/team", remote.URL(), func(m map[string]any) {
		m["ref"] = "refs/heads/main"
		m["repository"].(map[string]any)["default_branch"] = "main"
	})
	if status, _ := deliver(t, d.URL, "push", "first", body); status != http.StatusAccepted {
		t.Fatalf("first delivery: %d", status)
	}
	waitUntil(t, func() bool { return d.Registry.States()[0].Syncing })
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if status, _ := deliver(t, d.URL, "push", fmt.Sprintf("d-%d", i), body); status != http.StatusAccepted {
				t.Errorf("delivery %d: %d", i, status)
			}
		}()
	}
	wg.Wait()
	srv.SetFailure(gittest.Failure{})
	waitUntil(t, func() bool { return syncs()-base >= 2 && !d.Registry.States()[0].Syncing })
	if n := syncs() - base; n > 2 {
		t.Fatalf("101 deliveries ran %v syncs, want the stuck one and one follow-up", n)
	}
}
