package publish

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/internal/testkit"
	"github.com/skillreg/skillreg/registry"
	"github.com/skillreg/skillreg/skill"
)

// file is one fixture file; Exec makes it mode 0755.
type file struct {
	data string
	exec bool
}

func md(name, desc string) file {
	return file{data: "---\nname: " + name + "\ndescription: " + desc + "\n---\n# " + name + "\n"}
}

// teamFiles: a SKILL.md-only skill, an archive skill with an executable
// script and a nested directory, a skill the v0.1 index cannot hold, and
// a name another source also uses.
var teamFiles = map[string]file{
	"lint/SKILL.md":                 md("lint", "Lint the code before a commit."),
	"deploy/SKILL.md":               md("deploy", "Deploy a service to production."),
	"deploy/scripts/check.sh":       {data: "#!/bin/sh\necho ok\n", exec: true},
	"deploy/references/runbook.md":  {data: "# Runbook\nStep one.\n"},
	"dotty/SKILL.md":                md("dotty", "A skill with a file name the v0.1 index cannot carry."),
	"dotty/notes..md":               {data: "two dots\n"},
	"shared-name/SKILL.md":          md("shared-name", "The team's version."),
	"nested/group/review/SKILL.md":  md("review", "Review a pull request."),
	"nested/group/review/guide.txt": {data: "be kind\n"},
}

var otherFiles = map[string]file{
	"shared-name/SKILL.md": md("shared-name", "The other source's version."),
	"solo/SKILL.md":        md("solo", "A skill only the other source has."),
}

type fixture struct {
	t    testing.TB
	reg  *registry.Registry
	h    *Handler
	srv  *httptest.Server
	dirs map[string]string
}

// writeTree writes files under dir, then sets each one's mode (0755 for
// exec, else 0644) whatever the umask, since the published archives carry the
// executable bit.
func writeTree(t testing.TB, dir string, files map[string]file) {
	t.Helper()
	data := make(map[string]string, len(files))
	for p, f := range files {
		data[p] = f.data
	}
	testkit.WriteFiles(t, dir, data)
	for p, f := range files {
		mode := os.FileMode(0o644)
		if f.exec {
			mode = 0o755
		}
		if err := os.Chmod(filepath.Join(dir, filepath.FromSlash(p)), mode); err != nil {
			t.Fatal(err)
		}
	}
}

// newFixture runs a real registry over directory sources (synced before
// it returns) and the publisher on a real HTTP server, beside stand-ins
// for the web catalog's /skills/* and /sources/:name routes, so a route
// clash shows.
func newFixture(t testing.TB, sources map[string]map[string]file, mod func(*Options)) *fixture {
	t.Helper()
	f := &fixture{t: t, dirs: map[string]string{}}
	f.reg = registry.New(registry.Options{ContentCacheBytes: -1})
	var srcs []catalog.Source
	names := make([]string, 0, len(sources))
	for name := range sources {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		dir := t.TempDir()
		writeTree(t, dir, sources[name])
		f.dirs[name] = dir
		srcs = append(srcs, catalog.Source{Name: name, Kind: catalog.KindDir, Dir: dir})
	}
	f.reg.SetSources(srcs)
	for _, name := range names {
		f.sync(name)
	}
	f.serve(mod)
	return f
}

// serve runs the publisher over f.reg on a real HTTP server.
func (f *fixture) serve(mod func(*Options)) {
	t := f.t
	t.Helper()
	o := Options{Catalog: f.reg}
	if mod != nil {
		mod(&o)
	}
	h, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	f.h = h
	e := echo.New()
	e.GET("/skills/*", func(c echo.Context) error { return c.String(200, "web skill page") })
	e.GET("/sources/:name", func(c echo.Context) error { return c.String(200, "web source page") })
	h.Register(e)
	f.srv = httptest.NewServer(e)
	t.Cleanup(f.srv.Close)
}

func (f *fixture) sync(name string) {
	f.t.Helper()
	if err := f.reg.SyncNow(context.Background(), name); err != nil {
		f.t.Fatalf("sync %s: %v", name, err)
	}
}

func defaultSources() map[string]map[string]file {
	return map[string]map[string]file{"team": teamFiles, "other": otherFiles}
}

type response struct {
	code   int
	header http.Header
	body   []byte
}

func (f *fixture) get(path string, header ...string) response {
	return f.do(http.MethodGet, path, header...)
}

func (f *fixture) do(method, path string, header ...string) response {
	f.t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := f.srv.Client().Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	return response{res.StatusCode, res.Header, b}
}

func (f *fixture) json(path string, v any, header ...string) response {
	f.t.Helper()
	r := f.get(path, header...)
	if r.code != 200 {
		f.t.Fatalf("GET %s: %d %s", path, r.code, r.body)
	}
	if err := json.Unmarshal(r.body, v); err != nil {
		f.t.Fatalf("GET %s: %v\n%s", path, err, r.body)
	}
	return r
}

func (f *fixture) v2(path string, header ...string) indexV2 {
	f.t.Helper()
	var idx indexV2
	f.json(path, &idx, header...)
	return idx
}

func (f *fixture) v1(path string, header ...string) indexV1 {
	f.t.Helper()
	var idx indexV1
	f.json(path, &idx, header...)
	return idx
}

func names2(idx indexV2) []string {
	var out []string
	for _, e := range idx.Skills {
		out = append(out, e.Name)
	}
	return out
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// unzip reads an archive and returns its files and their modes, failing
// on anything but a plain Store archive of regular files.
func unzip(t testing.TB, b []byte) (map[string]string, map[string]os.FileMode) {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	files, modes := map[string]string{}, map[string]os.FileMode{}
	var order []string
	for _, zf := range zr.File {
		if zf.Method != zip.Store {
			t.Errorf("%s: method %d, want Store", zf.Name, zf.Method)
		}
		if !zf.Mode().IsRegular() {
			t.Errorf("%s: mode %v is not a regular file", zf.Name, zf.Mode())
		}
		if p := skill.CheckPath(zf.Name); p != nil {
			t.Errorf("%s: %v", zf.Name, p)
		}
		rc, err := zf.Open()
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatalf("%s: %v", zf.Name, err)
		}
		files[zf.Name], modes[zf.Name] = string(data), zf.Mode()
		order = append(order, zf.Name)
	}
	if !slices.IsSorted(order) {
		t.Errorf("entries not sorted: %v", order)
	}
	return files, modes
}

// sourceFiles is what a fixture source's skill directory holds.
func sourceFiles(files map[string]file, dir string) map[string]string {
	out := map[string]string{}
	for p, f := range files {
		if rel, ok := strings.CutPrefix(p, dir+"/"); ok {
			out[rel] = f.data
		}
	}
	return out
}
