package skill

import (
	"context"
	"fmt"
	"io/fs"
	"iter"
	"os"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// chunks lists the directory a part at a time, for Stream: each part is
// the sorted listing of some of the root's subdirectories, whole, of about
// n entries or more. Every skill but a root skill lies inside one top-level
// directory with all its files, so each part can be indexed alone, and only
// a part of the listing is held at once. With a SKILL.md at the root (a
// root skill holds every file of the tree) the whole listing is the one
// part; entries at the root that are not directories belong to no other
// skill and are left out.
func (d DirTree) chunks(ctx context.Context, n int) iter.Seq2[[]Entry, error] {
	return func(yield func([]Entry, error) bool) {
		whole := func() {
			entries, err := d.Entries(ctx)
			if err != nil {
				err = fmt.Errorf("list entries: %w", err)
			}
			yield(entries, err)
		}
		if d.Listing != nil {
			d.Listing("")
		}
		des, err := os.ReadDir(d.Root)
		if err != nil {
			whole() // Entries says what is wrong, as it would have
			return
		}
		var tops []string
		for _, de := range des {
			switch {
			case de.Name() == "SKILL.md":
				whole()
				return
			case de.IsDir() && de.Name() != ".git":
				tops = append(tops, de.Name())
			}
		}
		// The order of their entries: a directory's sort as its name and "/".
		slices.SortFunc(tops, func(a, b string) int { return strings.Compare(a+"/", b+"/") })
		rootfd, err := openDir(unix.AT_FDCWD, d.Root, false)
		if err != nil {
			yield(nil, fmt.Errorf("list entries: walk %s: %w", d.Root, &fs.PathError{Op: "open", Path: d.Root, Err: err}))
			return
		}
		defer unix.Close(rootfd)
		for len(tops) > 0 {
			var entries []Entry
			entries, tops, err = d.walkTops(ctx, rootfd, tops, n)
			if err != nil {
				yield(nil, fmt.Errorf("list entries: walk %s: %w", d.Root, err))
				return
			}
			if len(entries) > 0 && !yield(entries, nil) {
				return
			}
		}
	}
}

// walkTops walks top-level directories from the start of tops, in
// parallel as Entries does, until about n entries are listed, and returns
// their sorted listing and the directories left.
func (d DirTree) walkTops(ctx context.Context, rootfd int, tops []string, n int) ([]Entry, []string, error) {
	w := d.walker(ctx)
	k := 0
	for ; k < len(tops); k++ {
		w.mu.Lock()
		listed, failed := len(w.out), w.err != nil
		w.mu.Unlock()
		if listed >= n || failed {
			break
		}
		e, child, ok := w.entry(rootfd, "", tops[k], unix.DT_DIR)
		if !ok {
			break
		}
		if e.Path == "" {
			continue // gone since it was listed
		}
		w.mu.Lock()
		w.out = append(w.out, e)
		w.mu.Unlock()
		if child < 0 {
			continue // no longer a directory: described as what it is
		}
		w.descend(child, e.Path)
	}
	w.wg.Wait()
	if w.err != nil {
		return nil, nil, w.err
	}
	slices.SortFunc(w.out, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	return w.out, tops[k:], nil
}
