package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/skillreg/skillreg/catalog"
)

// TestStalledGauge: a stalled source shows in skillreg_source_stalled with
// its reason, and a stalled sync is counted under its own result; a
// healthy source has no stall series at all.
func TestStalledGauge(t *testing.T) {
	t.Parallel()
	m := New(Options{States: func() []catalog.State {
		return []catalog.State{
			{Source: "team", LastResult: catalog.ResultStalled, Stalled: catalog.StallAuthRefused},
			{Source: "local", LastResult: catalog.ResultUpdated},
		}
	}})
	m.SyncFinished("team", catalog.ResultStalled, time.Second, nil)
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	out := string(b)
	for _, want := range []string{
		`skillreg_source_stalled{reason="auth_refused",source="team"} 1`,
		`skillreg_syncs_total{result="stalled",source="team"} 1`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(out, `skillreg_source_stalled{reason="",source="local"}`) || strings.Contains(out, `source_stalled{reason="",`) {
		t.Error("a healthy source has a stall series")
	}
}

// TestWatchGauges: a directory source's watch state is a metric: the
// directories watched, exhaustion of the kernel's watches, blindness (no
// poll to fall back on), overflows and rescans by scope; a git source has
// none of them.
func TestWatchGauges(t *testing.T) {
	t.Parallel()
	m := New(Options{States: func() []catalog.State {
		return []catalog.State{
			{Source: "local", Kind: catalog.KindDir, Watch: catalog.Watch{Dirs: 7, Exhausted: true, Blind: true, Overflows: 2, Rescans: 5, FullRescans: 1}},
			{Source: "team", Kind: catalog.KindGit},
		}
	}})
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	out := string(b)
	for _, want := range []string{
		`skillreg_source_watched_directories{source="local"} 7`,
		`skillreg_source_watch_exhausted{source="local"} 1`,
		`skillreg_source_watch_blind{source="local"} 1`,
		`skillreg_source_watch_overflows_total{source="local"} 2`,
		`skillreg_source_rescans_total{scope="changed",source="local"} 5`,
		`skillreg_source_rescans_total{scope="whole",source="local"} 1`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(out, `watched_directories{source="team"}`) {
		t.Error("a git source has watch series")
	}
}
