//go:build linux

package registry

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/fsnotify/fsnotify"
	"golang.org/x/sys/unix"
)

// inotifyWatcher is a directory source's notifier on Linux: inotify read
// directly, because fsnotify keeps each watch's absolute path in two maps
// (about 195 bytes a directory, of which the path is 80: at 100,000
// skills, 300,000 directories and 58 MB of the live heap). Here a watched
// directory is a node in a slice, naming its parent, first child, next
// sibling and its own name (names shared where they repeat, "references",
// "scripts"), and an event's path is built from the nodes when it
// arrives. A child is found among the nodes made last (a listing adds
// each directory just after its parent) or by walking its siblings.
// Events and errors are fsnotify's types, so the watcher's loop reads
// either.
type inotifyWatcher struct {
	fd     int
	file   *os.File
	events chan fsnotify.Event
	errs   chan error
	stop   chan struct{} // closed by Close: a send gives up
	done   chan struct{} // closed when the reader has ended

	mu     sync.Mutex
	closed bool
	nodes  []watchNode       // nodes[0] is the root
	free   []int32           // indexes of removed nodes, to reuse
	byWd   map[int32]int32   // a watch descriptor's node
	names  map[string]string // repeated names, shared
	recent [recentNodes]int32
	next   int // recent[next] is replaced next
}

// recentNodes is how many of the nodes made last a lookup tries before
// walking siblings: a listing adds a directory's subdirectories just after
// it, a few listings at a time.
const recentNodes = 32

// watchNode is one directory under the root: watched when wd >= 0, or
// only the way to watched ones (a directory whose watch failed, or was
// removed, with watched directories beneath it).
type watchNode struct {
	parent      int32 // -1 for the root, and for a free node
	wd          int32 // -1 when not watched
	first, next int32 // the first child, the next sibling; -1 for none
	name        string
}

// inotifyMask is what fsnotify asks for by default: every change of a
// directory's entries and of the directory itself.
const inotifyMask = unix.IN_CREATE | unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_DELETE | unix.IN_DELETE_SELF |
	unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_MOVE_SELF

// maxNamesShared bounds the table of shared names: the names that repeat
// (a skill's "references") come first; names past it are kept each on
// its own.
const maxNamesShared = 4096

// newNotifier watches nothing yet; root is the directory every path
// given to Add lies in (or is).
func newNotifier(root string) (dirNotifier, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify_init1: %w", err)
	}
	w := &inotifyWatcher{
		fd:     fd,
		file:   os.NewFile(uintptr(fd), "inotify"),
		events: make(chan fsnotify.Event),
		errs:   make(chan error),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
		nodes:  []watchNode{{parent: -1, wd: -1, first: -1, next: -1, name: filepath.Clean(root)}},
		byWd:   map[int32]int32{},
		names:  map[string]string{},
	}
	go w.read()
	return w, nil
}

func (w *inotifyWatcher) Events() <-chan fsnotify.Event { return w.events }
func (w *inotifyWatcher) Errors() chan error            { return w.errs }

// Close stops the notifier: its channels are closed once the reader ends.
func (w *inotifyWatcher) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	w.mu.Unlock()
	close(w.stop)
	err := w.file.Close() // ends the reader's blocked read
	<-w.done
	return err
}

// Add watches the directory at path (the root, or beneath it).
func (w *inotifyWatcher) Add(path string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return fsnotify.ErrClosed
	}
	n, ok := w.nodeLocked(path, true)
	if !ok {
		return fmt.Errorf("watch %s: outside %s", path, w.nodes[0].name)
	}
	wd, err := unix.InotifyAddWatch(w.fd, path, inotifyMask)
	if err != nil {
		w.pruneLocked(n)
		return &os.PathError{Op: "inotify_add_watch", Path: path, Err: err}
	}
	w.watchedLocked(n, int32(wd))
	return nil
}

// watchedLocked records that node n is watched as wd.
func (w *inotifyWatcher) watchedLocked(n, wd int32) {
	if old, ok := w.byWd[wd]; ok && old != n {
		// The same directory under another name (renamed, or a bind
		// mount): the kernel keeps one watch, named by its newest path.
		w.nodes[old].wd = -1
		w.pruneLocked(old)
	}
	w.nodes[n].wd = wd
	w.byWd[wd] = n
}

// Remove stops watching the directory at path.
func (w *inotifyWatcher) Remove(path string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	n, ok := w.nodeLocked(path, false)
	if !ok || w.nodes[n].wd < 0 {
		return fmt.Errorf("%w: %s", fsnotify.ErrNonExistentWatch, path)
	}
	wd := w.nodes[n].wd
	w.unwatchLocked(n)
	if _, err := unix.InotifyRmWatch(w.fd, uint32(wd)); err != nil {
		return &os.PathError{Op: "inotify_rm_watch", Path: path, Err: err}
	}
	return nil
}

// WatchList returns the paths of every watched directory.
func (w *inotifyWatcher) WatchList() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.byWd))
	for _, n := range w.byWd {
		out = append(out, w.pathLocked(n))
	}
	return out
}

// nodeLocked finds the node of path, making it and the nodes on the way
// to it when make is set. ok is false for a path outside the root (or,
// without make, one with no node).
func (w *inotifyWatcher) nodeLocked(path string, make bool) (int32, bool) {
	root := w.nodes[0].name
	path = filepath.Clean(path)
	if path == root {
		return 0, true
	}
	rest, ok := strings.CutPrefix(path, root)
	if !ok || !strings.HasPrefix(rest, string(filepath.Separator)) && root != string(filepath.Separator) {
		return 0, false
	}
	rest = strings.TrimPrefix(rest, string(filepath.Separator))
	n := int32(0)
	for rest != "" {
		name := rest
		if i := strings.IndexByte(rest, filepath.Separator); i >= 0 {
			name, rest = rest[:i], rest[i+1:]
		} else {
			rest = ""
		}
		c, ok := w.childLocked(n, name)
		if !ok {
			if !make {
				return 0, false
			}
			c = w.newNodeLocked(n, name)
		}
		n = c
	}
	return n, true
}

func (w *inotifyWatcher) newNodeLocked(parent int32, name string) int32 {
	if s, ok := w.names[name]; ok {
		name = s
	} else {
		name = strings.Clone(name) // never a part of the caller's path
		if len(w.names) < maxNamesShared {
			w.names[name] = name
		}
	}
	nd := watchNode{parent: parent, wd: -1, first: -1, next: w.nodes[parent].first, name: name}
	var c int32
	if k := len(w.free); k > 0 {
		c, w.free = w.free[k-1], w.free[:k-1]
		w.nodes[c] = nd
	} else {
		c = int32(len(w.nodes))
		w.nodes = append(w.nodes, nd)
	}
	w.nodes[parent].first = c
	w.recent[w.next] = c
	w.next = (w.next + 1) % recentNodes
	return c
}

// childLocked finds parent's child of that name.
func (w *inotifyWatcher) childLocked(parent int32, name string) (int32, bool) {
	for _, c := range w.recent {
		if c > 0 && w.nodes[c].parent == parent && w.nodes[c].name == name {
			return c, true
		}
	}
	for c := w.nodes[parent].first; c >= 0; c = w.nodes[c].next {
		if w.nodes[c].name == name {
			return c, true
		}
	}
	return 0, false
}

// unwatchLocked forgets n's watch (the kernel's is gone or being removed).
func (w *inotifyWatcher) unwatchLocked(n int32) {
	if wd := w.nodes[n].wd; wd >= 0 {
		if w.byWd[wd] == n {
			delete(w.byWd, wd)
		}
		w.nodes[n].wd = -1
	}
	w.pruneLocked(n)
}

// pruneLocked drops n, and then its parents, while each is neither
// watched nor on the way to a watched directory.
func (w *inotifyWatcher) pruneLocked(n int32) {
	for n > 0 && w.nodes[n].wd < 0 && w.nodes[n].first < 0 {
		nd := w.nodes[n]
		if p := &w.nodes[nd.parent]; p.first == n {
			p.first = nd.next
		} else {
			for c := p.first; c >= 0; c = w.nodes[c].next {
				if w.nodes[c].next == n {
					w.nodes[c].next = nd.next
					break
				}
			}
		}
		w.nodes[n] = watchNode{parent: -1, wd: -1, first: -1, next: -1}
		w.free = append(w.free, n)
		n = nd.parent
	}
}

// pathLocked is node n's path.
func (w *inotifyWatcher) pathLocked(n int32) string {
	var parts []string
	for ; n > 0; n = w.nodes[n].parent {
		parts = append(parts, w.nodes[n].name)
	}
	var b strings.Builder
	b.WriteString(w.nodes[0].name)
	for i := len(parts) - 1; i >= 0; i-- {
		if b.Len() > 0 && !strings.HasSuffix(b.String(), string(filepath.Separator)) {
			b.WriteByte(filepath.Separator)
		}
		b.WriteString(parts[i])
	}
	return b.String()
}

// read turns the kernel's events into fsnotify's until Close.
func (w *inotifyWatcher) read() {
	defer func() {
		close(w.done)
		close(w.errs)
		close(w.events)
	}()
	buf := make([]byte, unix.SizeofInotifyEvent*4096)
	for {
		n, err := w.file.Read(buf)
		if err != nil {
			if errors.Is(err, os.ErrClosed) || w.isClosed() {
				return
			}
			if !w.send(fsnotify.Event{}, err) {
				return
			}
			continue
		}
		err = parseInotify(buf[:n], func(ev rawEvent) bool {
			if ev.mask&unix.IN_Q_OVERFLOW != 0 {
				return w.send(fsnotify.Event{}, fsnotify.ErrEventOverflow)
			}
			e, ok := w.event(ev)
			return !ok || w.send(e, nil)
		})
		if errors.Is(err, errNotifierClosed) {
			return
		}
		if err != nil && !w.send(fsnotify.Event{}, err) {
			return
		}
	}
}

var errNotifierClosed = errors.New("notifier closed")

func (w *inotifyWatcher) isClosed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.closed
}

// send hands the loop an event or an error; false once closed.
func (w *inotifyWatcher) send(e fsnotify.Event, err error) bool {
	if err != nil {
		select {
		case w.errs <- err:
			return true
		case <-w.stop:
			return false
		}
	}
	select {
	case w.events <- e:
		return true
	case <-w.stop:
		return false
	}
}

// event names a kernel event the way fsnotify does; ok is false for one
// to drop (a watch removed, an event of a watch already forgotten).
func (w *inotifyWatcher) event(ev rawEvent) (fsnotify.Event, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, ok := w.byWd[ev.wd]
	if !ok {
		return fsnotify.Event{}, false
	}
	if ev.mask&(unix.IN_IGNORED|unix.IN_UNMOUNT) != 0 {
		w.unwatchLocked(n)
		return fsnotify.Event{}, false
	}
	name := w.pathLocked(n)
	if ev.name != "" {
		name = filepath.Join(name, ev.name)
	}
	if ev.mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0 {
		// Its parent, when watched, reports the same change by name.
		parentWatched := n > 0 && w.nodes[w.nodes[n].parent].wd >= 0
		wd := w.nodes[n].wd
		w.unwatchLocked(n)
		if ev.mask&unix.IN_MOVE_SELF != 0 {
			unix.InotifyRmWatch(w.fd, uint32(wd)) // it would report under its old name
		}
		if parentWatched {
			return fsnotify.Event{}, false
		}
	}
	var op fsnotify.Op
	if ev.mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0 {
		op |= fsnotify.Create
	}
	if ev.mask&(unix.IN_DELETE|unix.IN_DELETE_SELF) != 0 {
		op |= fsnotify.Remove
	}
	if ev.mask&unix.IN_MODIFY != 0 {
		op |= fsnotify.Write
	}
	if ev.mask&(unix.IN_MOVED_FROM|unix.IN_MOVE_SELF) != 0 {
		op |= fsnotify.Rename
	}
	if ev.mask&unix.IN_ATTRIB != 0 {
		op |= fsnotify.Chmod
	}
	return fsnotify.Event{Name: name, Op: op}, true
}

// rawEvent is one struct inotify_event.
type rawEvent struct {
	wd     int32
	mask   uint32
	cookie uint32
	name   string
}

// errShortEvent is a read that ends inside an event: the kernel writes
// whole events only, so the bytes are not inotify's.
var errShortEvent = errors.New("inotify: event cut short")

// parseInotify decodes the events of one read (bounded by b: a length
// that runs past it is an error), calling each until it returns false,
// which ends the parse with errNotifierClosed.
func parseInotify(b []byte, each func(rawEvent) bool) error {
	for len(b) > 0 {
		if len(b) < unix.SizeofInotifyEvent {
			return errShortEvent
		}
		ev := rawEvent{
			wd:     int32(binary.NativeEndian.Uint32(b[0:4])),
			mask:   binary.NativeEndian.Uint32(b[4:8]),
			cookie: binary.NativeEndian.Uint32(b[8:12]),
		}
		nameLen := binary.NativeEndian.Uint32(b[12:16])
		b = b[unix.SizeofInotifyEvent:]
		if uint64(nameLen) > uint64(len(b)) {
			return errShortEvent
		}
		name := b[:nameLen]
		b = b[nameLen:]
		if i := strings.IndexByte(string(name), 0); i >= 0 {
			name = name[:i] // padded with NULs
		}
		ev.name = string(name)
		if !each(ev) {
			return errNotifierClosed
		}
	}
	return nil
}
