package gitstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/skillreg/skillreg/gitref"
	"github.com/skillreg/skillreg/internal/fulldisk"
	"github.com/skillreg/skillreg/internal/gittest"
)

// TestUnwritableDiskKeepsStore reopens (as a restart does) an object
// store on a real file system that refuses writes (a full tmpfs, or one
// remounted read-only): the store must be kept as it was and serve the
// commit it holds; a fetch while writes still fail says so and loses
// nothing; once writes work the next fetch repairs it and nothing is
// lost across another restart either.
func TestUnwritableDiskKeepsStore(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		cleanClose  bool // the last process left the clean-close marker
		refuse      func(t *testing.T, dir string) (restore func())
		wantRefusal error
	}{
		{"full after clean close", true, fulldisk.Fill, syscall.ENOSPC},
		{"full after crash", false, fulldisk.Fill, syscall.ENOSPC},
		{"read-only", true, fulldisk.ReadOnly, syscall.EROFS},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mnt, ok := fulldisk.Mount(t, 4<<20)
			if !ok {
				return
			}
			srv := gittest.NewServer(t)
			remote := srv.CreateRepo("r")
			files := map[string]string{"skills/a/SKILL.md": "---\nname: a\n---\n", "skills/a/run.sh": strings.Repeat("echo a\n", 500)}
			remote.WriteFiles(files)
			c1 := remote.Commit("one")
			remote.Push("main")
			dir := filepath.Join(mnt, "git")

			pool := newPool(t, dir)
			repo, err := pool.Repo(remote.URL())
			if err != nil {
				t.Fatal(err)
			}
			syncPin(t, repo, gitref.Pin{})
			storeDir := repo.Dir()
			pool.Close()
			if !tc.cleanClose {
				if err := os.Remove(filepath.Join(storeDir, cleanMarker)); err != nil {
					t.Fatal(err)
				}
			}
			before := listFiles(t, storeDir)

			restore := tc.refuse(t, mnt)
			pool2 := newPool(t, dir)
			repo2, err := pool2.Repo(remote.URL())
			if err != nil {
				t.Fatalf("reopen on an unwritable disk: %v", err)
			}
			if !repo2.HasCommit(c1) {
				t.Fatalf("after reopening on an unwritable disk the store holds %v, want %s", repo2.Commits(), c1)
			}
			if got := snapshot(t, repo2, c1, "skills"); got["a/run.sh"] != files["skills/a/run.sh"] {
				t.Fatalf("reading %s after reopening: %v", c1, got)
			}
			// A fetch cannot repair it yet, and says why.
			err = repo2.Fetch(context.Background(), resolve(t, repo2, gitref.Pin{}), Auth{})
			if !errors.Is(err, ErrStorage) || !errors.Is(err, tc.wantRefusal) {
				t.Fatalf("fetch while writes fail: %v, want ErrStorage wrapping %v", err, tc.wantRefusal)
			}
			if !repo2.HasCommit(c1) {
				t.Fatal("a fetch on an unwritable disk dropped the commit")
			}
			for name := range before {
				if _, err := os.Stat(filepath.Join(storeDir, name)); err != nil && name != cleanMarker {
					t.Errorf("%s is gone after reopening on an unwritable disk: %v", name, err)
				}
			}

			restore()
			if err := repo2.Fetch(context.Background(), resolve(t, repo2, gitref.Pin{}), Auth{}); err != nil {
				t.Fatalf("fetch once writes work: %v", err)
			}
			if repo2.suspect.Load() {
				t.Fatal("still suspect after a repair that could write")
			}
			if b, err := os.ReadFile(filepath.Join(storeDir, "shallow")); err != nil || string(b) != c1+"\n" {
				t.Fatalf("shallow after the repair: %q %v", b, err)
			}
			pool2.Close()
			pool3 := newPool(t, dir)
			repo3, err := pool3.Repo(remote.URL())
			if err != nil || !repo3.HasCommit(c1) {
				t.Fatalf("after another restart: %v, holds %v", err, repo3.Commits())
			}
			if got := snapshot(t, repo3, c1, "skills"); got["a/run.sh"] != files["skills/a/run.sh"] {
				t.Fatalf("reading %s after the repair: %v", c1, got)
			}
		})
	}
}

func listFiles(t *testing.T, dir string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out[rel] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCannotWriteNow: which failures keep a store (the file system
// refusing, for now) and which prove it damaged.
func TestCannotWriteNow(t *testing.T) {
	t.Parallel()
	pathErr := func(errno syscall.Errno) error {
		return fmt.Errorf("repair: %w", &fs.PathError{Op: "write", Path: "/x/shallow", Err: errno})
	}
	for _, tc := range []struct {
		err  error
		keep bool
	}{
		{pathErr(syscall.ENOSPC), true},
		{pathErr(syscall.EDQUOT), true},
		{pathErr(syscall.EROFS), true},
		{pathErr(syscall.EIO), true},
		{pathErr(syscall.EFBIG), true},
		{pathErr(syscall.EACCES), true},
		{pathErr(syscall.EPERM), true},
		{fmt.Errorf("x: %w", ErrStorage), true},
		{pathErr(syscall.ENOTDIR), false},
		{pathErr(syscall.ENOENT), false},
		{fmt.Errorf("pack: %w", ErrCorrupt), false},
		{errors.New("index is for pack 0123"), false},
		{errors.New("pack header does not match its index"), false},
	} {
		if got := cannotWriteNow(tc.err); got != tc.keep {
			t.Errorf("cannotWriteNow(%v) = %v, want %v", tc.err, got, tc.keep)
		}
		if got := errors.Is(storageErr(tc.err), ErrStorage); got != tc.keep {
			t.Errorf("storageErr(%v) wraps ErrStorage: %v, want %v", tc.err, got, tc.keep)
		}
	}
}
