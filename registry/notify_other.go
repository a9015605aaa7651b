//go:build !linux

package registry

import "github.com/fsnotify/fsnotify"

// fsnotifyWatcher is a directory source's notifier where there is no
// inotify: fsnotify's watcher as it is.
type fsnotifyWatcher struct{ *fsnotify.Watcher }

func newNotifier(string) (dirNotifier, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	return fsnotifyWatcher{w}, nil
}

func (w fsnotifyWatcher) Events() <-chan fsnotify.Event { return w.Watcher.Events }
func (w fsnotifyWatcher) Errors() chan error            { return w.Watcher.Errors }
