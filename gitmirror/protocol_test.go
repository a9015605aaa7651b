package gitmirror

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/internal/testkit"
)

// req builds a protocol v2 request from lines; "|" is the delimiter.
func req(lines ...string) []byte {
	var b bytes.Buffer
	for _, l := range lines {
		if l == "|" {
			b.WriteString("0001")
			continue
		}
		b.Write(pkt(l + "\n"))
	}
	b.WriteString("0000")
	return b.Bytes()
}

func fetchReq(args ...string) []byte {
	return req(append([]string{"command=fetch", "agent=test", "object-format=sha1", "|"}, args...)...)
}

func TestUploadPackRefusesBadRequests(t *testing.T) {
	t.Parallel()
	_, up := upstream(t)
	d := newDaemon(t, up.URL(), ServeOptions{})
	head := d.head(t, "team")
	wants := make([]string, MaxWants+1)
	for i := range wants {
		wants[i] = "want " + head
	}
	var bomb bytes.Buffer
	zw := gzip.NewWriter(&bomb)
	zw.Write(bytes.Repeat([]byte("0"), 4*MaxRequestBytes))
	zw.Close()
	cases := []struct {
		name   string
		body   []byte
		gzip   bool
		status int
	}{
		{name: "empty", body: nil, status: 400},
		{name: "not hex", body: []byte("zzzzcommand=fetch\n"), status: 400},
		{name: "truncated", body: []byte("00"), status: 400},
		{name: "length 3", body: []byte("0003"), status: 400},
		{name: "length past the body", body: []byte("ffffcommand=fetch"), status: 400},
		{name: "no flush", body: pkt("command=ls-refs\n"), status: 400},
		{name: "no command", body: req("|", "want "+head), status: 400},
		{name: "unknown command", body: req("command=push"), status: 400},
		{name: "unknown capability", body: req("command=fetch", "shiny-new-thing", "|", "want "+head, "done"), status: 400},
		{name: "other object format", body: req("command=fetch", "object-format=sha256", "|", "want "+head, "done"), status: 400},
		{name: "too many wants", body: fetchReq(append(wants, "done")...), status: 400},
		{name: "depth 0", body: fetchReq("want "+head, "deepen 0", "done"), status: 400},
		{name: "negative depth", body: fetchReq("want "+head, "deepen -1", "done"), status: 400},
		{name: "huge depth", body: fetchReq("want "+head, "deepen 99999999999999999999", "done"), status: 400},
		{name: "bad want", body: fetchReq("want nothex", "done"), status: 400},
		{name: "unknown want", body: fetchReq("want "+strings.Repeat("a", 40), "done"), status: 400},
		{name: "no want", body: fetchReq("done"), status: 400},
		{name: "filter not offered", body: fetchReq("want "+head, "filter blob:none", "done"), status: 400},
		{name: "data after flush", body: append(fetchReq("want "+head, "done"), "0000"...), status: 400},
		{name: "response-end packet", body: []byte("0002"), status: 400},
		{name: "too large", body: bytes.Repeat([]byte("0"), MaxRequestBytes+10), status: 413},
		{name: "gzip bomb", body: bomb.Bytes(), gzip: true, status: 413},
		{name: "bad gzip", body: []byte("not gzip"), gzip: true, status: 400},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, _ := http.NewRequest("POST", d.srv.URL+"/git/team.git/git-upload-pack", bytes.NewReader(c.body))
			r.Header.Set("Git-Protocol", "version=2")
			if c.gzip {
				r.Header.Set("Content-Encoding", "gzip")
			}
			res, err := http.DefaultClient.Do(r)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", res.StatusCode, c.status, b)
			}
		})
	}
	// Still serving after all of that.
	git(t, t.TempDir(), "clone", "--depth", "1", d.srv.URL+"/git/team.git", "c")
}

// TestProtocolV0AndV1: git with protocol.version 0 and 1 (the stateless
// HTTP exchange of older clients) clones shallow and in full, and fetches
// fast-forward after a push and a sync.
func TestProtocolV0AndV1(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"0", "1"} {
		t.Run("v"+v, func(t *testing.T) {
			_, up := upstream(t)
			d := newDaemon(t, up.URL(), ServeOptions{})
			work := t.TempDir()
			url := d.srv.URL + "/git/team.git"
			pv := "protocol.version=" + v
			git(t, work, "-c", pv, "clone", "--depth", "1", url, "shallow")
			git(t, work, "-c", pv, "clone", url, "full")
			shallow, full := filepath.Join(work, "shallow"), filepath.Join(work, "full")
			sameFiles(t, checkedOut(t, shallow), servedFiles(t, d.reg, "team", ""))
			old := git(t, full, "rev-parse", "HEAD")
			up.WriteFiles(map[string]string{"skills/new/SKILL.md": testkit.SkillMD("new")})
			up.Commit("second")
			up.Push("main")
			d.sync(t)
			for _, c := range []string{shallow, full} {
				git(t, c, "-c", pv, "pull", "--ff-only")
				if p := git(t, c, "rev-parse", "HEAD^"); p != old {
					t.Fatalf("%s: parent %s, want %s", c, p, old)
				}
				sameFiles(t, checkedOut(t, c), servedFiles(t, d.reg, "team", ""))
				git(t, c, "fsck", "--strict")
			}
			git(t, work, "-c", pv, "clone", d.srv.URL+"/git/all.git", "all")
		})
	}
}

func TestParseV0Refuses(t *testing.T) {
	t.Parallel()
	id := strings.Repeat("ab", 20)
	wants := strings.Repeat("want "+id+"\n", MaxWants+1)
	for name, body := range map[string][]byte{
		"empty":              nil,
		"no flush":           pkt("want " + id + "\n"),
		"unknown capability": req("want " + id + " shiny"),
		"caps twice":         req("want "+id+" side-band-64k", "want "+id+" side-band-64k"),
		"bad want":           req("want nothex"),
		"depth 0":            req("want "+id, "deepen 0"),
		"deepen-since":       req("want "+id, "deepen-since 1"),
		"too many wants":     []byte(string(req(strings.Split(strings.TrimSuffix(wants, "\n"), "\n")...))),
		"data after done":    append(req("want "+id), append(pkt("done\n"), pkt("have "+id+"\n")...)...),
		"bad have":           append(req("want "+id), pkt("have x\n")...),
		"no want":            req(),
	} {
		if _, err := ParseV0(body); !errors.Is(err, ErrProtocol) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestConcurrentUploadPacksCapped(t *testing.T) {
	t.Parallel()
	_, up := upstream(t)
	d := newDaemon(t, up.URL(), ServeOptions{Concurrent: 1})
	h := d.m.Handler(ServeOptions{Concurrent: 1})
	h.sem <- struct{}{} // one upload-pack in flight
	rec := &recorder{header: http.Header{}}
	r, _ := http.NewRequest("POST", "/git/team.git/git-upload-pack", bytes.NewReader(fetchReq("want "+d.head(t, "team"), "done")))
	h.ServeHTTP(rec, r)
	if rec.status != http.StatusServiceUnavailable || rec.header.Get("Retry-After") == "" {
		t.Fatalf("over the cap: %d %v", rec.status, rec.header)
	}
	<-h.sem
	rec = &recorder{header: http.Header{}}
	r, _ = http.NewRequest("POST", "/git/team.git/git-upload-pack", bytes.NewReader(fetchReq("want "+d.head(t, "team"), "done")))
	r.Header.Set("Git-Protocol", "version=2")
	h.ServeHTTP(rec, r)
	if rec.status != 0 && rec.status != 200 || !bytes.Contains(rec.body.Bytes(), []byte("packfile")) {
		t.Fatalf("under the cap: %d %q", rec.status, rec.body.Bytes())
	}
}

type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
func (r *recorder) WriteHeader(s int)           { r.status = s }

func FuzzParseRequest(f *testing.F) {
	id := strings.Repeat("ab", 20)
	f.Add(fetchReq("want "+id, "have "+id, "shallow "+id, "deepen 1", "done"))
	f.Add(req("command=ls-refs", "agent=x", "|", "symrefs", "ref-prefix HEAD"))
	f.Add([]byte("ffff"))
	f.Add([]byte("0003"))
	f.Add([]byte("0001000100000000"))
	f.Add(fetchReq("deepen 0"))
	f.Add(fetchReq(strings.Repeat("want "+id+"\n", 300)))
	f.Add(append(req("want "+id+" multi_ack_detailed side-band-64k", "deepen 1"), append(pkt("have "+id+"\n"), "0000"...)...))
	f.Fuzz(func(t *testing.T, body []byte) {
		if r, err := ParseV0(body); err == nil && (len(r.Wants) == 0 || len(r.Wants) > MaxWants || len(r.Haves) > MaxHaves) {
			t.Fatalf("out of bounds v0 request accepted: %+v", r)
		} else if err != nil && !errors.Is(err, ErrProtocol) {
			t.Fatalf("v0 error outside ErrProtocol: %v", err)
		}
		c, err := ParseCommand(body)
		if err != nil {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("error outside ErrProtocol: %v", err)
			}
			return
		}
		_ = checkCaps(c.Caps)
		if c.Name == "fetch" {
			r, err := ParseFetch(c)
			if err == nil && (len(r.Wants) == 0 || len(r.Wants) > MaxWants || len(r.Haves) > MaxHaves || r.Depth < 0 || r.Depth > MaxDepth) {
				t.Fatalf("out of bounds request accepted: %+v", r)
			}
		}
	})
}

// TestProtocolV0BeyondHeld (v0 and v2): with only the newest generation held (as
// after a restart), a v0 full clone is told where the history stops (the
// advertisement's shallow line) and a v0 client one commit behind still
// fast-forwards.
func TestProtocolV0BeyondHeld(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"0", "2"} {
		t.Run("v"+v, func(t *testing.T) { beyondHeld(t, "protocol.version="+v) })
	}
}

func beyondHeld(t *testing.T, pv string) {
	_, up := upstream(t)
	d := newDaemon(t, up.URL(), ServeOptions{})
	d.m.o.Held = 1
	work := t.TempDir()
	url := d.srv.URL + "/git/team.git"
	git(t, work, "-c", pv, "clone", url, "behind")
	old := git(t, filepath.Join(work, "behind"), "rev-parse", "HEAD")
	up.WriteFiles(map[string]string{"skills/new/SKILL.md": testkit.SkillMD("new")})
	up.Commit("second")
	up.Push("main")
	d.sync(t)
	git(t, work, "-c", pv, "clone", url, "full")
	git(t, filepath.Join(work, "full"), "fsck")
	behind := filepath.Join(work, "behind")
	git(t, behind, "-c", pv, "pull", "--ff-only")
	if p := git(t, behind, "rev-parse", "HEAD^"); p != old {
		t.Fatalf("parent %s, want %s", p, old)
	}
}
