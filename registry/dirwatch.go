package registry

import (
	"context"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/skillreg/skillreg/catalog"
)

// watchDebounce gathers the events of one save (editors write, rename and
// chmod in quick succession) into one sync request.
const watchDebounce = 150 * time.Millisecond

// watchDir asks for a sync of a directory source whenever something under
// it changes. It watches every directory (inotify is not recursive) and
// adds new ones as they appear. If watching fails (for example when the
// system's watch limit is reached), the periodic scan (poll) still finds
// changes; the failure is logged once.
func (r *Registry) watchDir(ctx context.Context, run *sourceRun) {
	name, root := run.src.Name, run.src.Dir
	w, err := fsnotify.NewWatcher()
	if err != nil {
		r.log.Warn("cannot watch directory; relying on periodic scans", "source", name, "err", err)
		return
	}
	defer w.Close()
	addTree := func(dir string) {
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			if err := w.Add(p); err != nil {
				r.log.Warn("cannot watch directory; relying on periodic scans", "source", name, "dir", p, "err", err)
				return filepath.SkipAll
			}
			return nil
		})
	}
	addTree(root)
	var timer *time.Timer
	fire := make(chan struct{}, 1)
	for {
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			if ev.Has(fsnotify.Create) {
				addTree(ev.Name)
			}
			if timer == nil {
				timer = time.AfterFunc(watchDebounce, func() {
					select {
					case fire <- struct{}{}:
					default:
					}
				})
			} else {
				timer.Reset(watchDebounce)
			}
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			r.log.Warn("directory watch error", "source", name, "err", err)
		case <-fire:
			r.RequestSync(name, catalog.TriggerWatch)
		}
	}
}
