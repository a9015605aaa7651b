package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
)

// certReloader holds the serving certificate and loads it again on SIGHUP
// and when its files change (a renewed certificate, a Kubernetes secret
// swapped in place). A pair that fails to load is refused and the running
// certificate stays.
type certReloader struct {
	certFile, keyFile string
	log               *slog.Logger
	cert              atomic.Pointer[tls.Certificate]
}

func newCertReloader(certFile, keyFile string, log *slog.Logger) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile, log: log}
	if err := r.load(); err != nil {
		return nil, err
	}
	return r, nil
}

// load reads the pair; on failure the running certificate stays.
func (r *certReloader) load() error {
	c, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("tls: load %s and %s: %w", r.certFile, r.keyFile, err)
	}
	if old := r.cert.Swap(&c); old != nil {
		r.log.Info("TLS certificate reloaded", "cert_file", r.certFile)
	}
	return nil
}

// reload loads the pair again and logs a failure.
func (r *certReloader) reload() {
	if err := r.load(); err != nil {
		r.log.Error("TLS certificate reload refused; the running certificate stays", "err", err)
	}
}

func (r *certReloader) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.cert.Load(), nil
}

// config is the server's TLS configuration: TLS 1.2 at least, HTTP/2 on.
func (r *certReloader) config() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: r.getCertificate,
		NextProtos:     []string{"h2", "http/1.1"},
	}
}

// watch reloads the pair when a file in their directories changes, until
// ctx ends. Directories, not files, are watched: renewals usually replace
// a file (or a symlink to it) rather than write into it. Bursts of events
// are coalesced.
func (r *certReloader) watch(ctx context.Context) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		r.log.Warn("cannot watch the TLS files; they are reloaded on SIGHUP only", "err", err)
		return
	}
	defer w.Close()
	for _, d := range uniqueDirs(r.certFile, r.keyFile) {
		if err := w.Add(d); err != nil {
			r.log.Warn("cannot watch a TLS file's directory; reload on SIGHUP", "dir", d, "err", err)
		}
	}
	var timer <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			if !r.relevant(ev) {
				continue
			}
			timer = time.After(200 * time.Millisecond)
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			r.log.Warn("watching the TLS files", "err", err)
		case <-timer:
			timer = nil
			r.reload()
		}
	}
}

// relevant reports whether an event may have changed the pair: one of the
// two files, or a Kubernetes secret's "..data" link swapped in their
// directory. Anything else there (a log file, say) is not.
func (r *certReloader) relevant(ev fsnotify.Event) bool {
	if ev.Op == fsnotify.Chmod {
		return false
	}
	name := filepath.Clean(ev.Name)
	return name == filepath.Clean(r.certFile) || name == filepath.Clean(r.keyFile) || strings.HasPrefix(filepath.Base(name), "..")
}

func uniqueDirs(paths ...string) []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range paths {
		d := filepath.Dir(p)
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out
}
