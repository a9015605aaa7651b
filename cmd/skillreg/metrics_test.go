package main

import (
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/internal/testkit"
)

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d", resp.StatusCode)
	}
	return string(b)
}

func metricValue(t *testing.T, text, series string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(text)
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestMetricsMoveAfterSync: the metrics are there, named by convention,
// and move when a sync and requests happen.
func TestMetricsMoveAfterSync(t *testing.T) {
	root := t.TempDir()
	writeSkill(t, filepath.Join(root, "a"), "a", nil)
	writeSkill(t, filepath.Join(root, "b"), "other", nil)
	d := startDaemon(t, "sources:\n  - name: local\n    dir: "+root+"\n    poll: 0\n", "")
	// Ready means the first catalog is served: the sync swaps it in,
	// then records and counts it, so the count may lag /readyz by that
	// step (it did, once in 50 runs under -race). A scrape is not one
	// snapshot either (the registry gathers its collectors in parallel):
	// wait for a scrape that has both the sync's count and its duration.
	var before string
	waitUntil(t, func() bool {
		before = scrape(t, d.URL)
		return metricValue(t, before, `skillreg_syncs_total{result="updated",source="local"}`) >= 1 &&
			metricValue(t, before, `skillreg_sync_duration_seconds_count{source="local"}`) >= 1
	})
	for _, series := range []string{
		`skillreg_skills{source="local",state="served"}`, `skillreg_skills{source="local",state="excluded"}`,
		`skillreg_syncs_total{result="updated",source="local"}`, `skillreg_indexed_files{source="local"}`,
	} {
		if metricValue(t, before, series) != 1 {
			t.Errorf("%s = %v, want 1", series, metricValue(t, before, series))
		}
	}
	for _, name := range []string{"skillreg_sync_duration_seconds_bucket", "skillreg_store_size_bytes", "skillreg_mcp_sessions", "skillreg_catalog_generation", "process_resident_memory_bytes"} {
		if !regexp.MustCompile(`(?m)^` + name).MatchString(before) {
			t.Errorf("no %s", name)
		}
	}
	writeSkill(t, filepath.Join(root, "c"), "c", nil)
	d.Registry.RequestSync("local", catalog.TriggerManual)
	// The watcher may see c's SKILL.md half written and sync before the
	// manual sync does: the count is at least 2 once c is served.
	waitUntil(t, func() bool {
		m := scrape(t, d.URL)
		return metricValue(t, m, `skillreg_syncs_total{result="updated",source="local"}`) >= 2 &&
			metricValue(t, m, `skillreg_skills{source="local",state="served"}`) == 2
	})
	cs := connect(t, d.URL, "2026-07-28")
	listAll(t, cs)
	// The fast path counts a request once its answer is written: the
	// client may read the answer first.
	testkit.WaitUntil(t, "skills/list counted", func() bool {
		return metricValue(t, scrape(t, d.URL), `skillreg_mcp_requests_total{method="skills/list",outcome="ok"}`) >= 1
	})
}
