package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/skillreg/skillreg/store"
)

// adminSocket is the unix socket in the data directory through which
// `skillreg store backup` and `store check` reach a running daemon (which
// holds the store's lock). Only users who can enter the data directory can
// connect; the socket itself is 0600.
const adminSocket = "admin.sock"

func cmdStore(ctx context.Context, e *env, args []string) int {
	usage := func() {
		fmt.Fprintln(e.stderr, "Usage: skillreg store check|rebuild|backup FILE [--config FILE] [--data DIR]")
		fmt.Fprintln(e.stderr, "\n  check          verify the store file (bbolt's consistency check; every value decodes and matches its checksum; the digest map recounted)")
		fmt.Fprintln(e.stderr, "  rebuild        move a damaged store aside and start afresh (the daemon resyncs from its sources); the daemon must be stopped")
		fmt.Fprintln(e.stderr, "  backup FILE    write a consistent copy of the store to FILE, also while the daemon runs")
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		usage()
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	sub := args[0]
	fs := newFlags(e, "store "+sub, "[--config FILE] [--data DIR]", "Maintain the store file skillreg.db in the data directory")
	cfgPath := fs.String("config", "", "configuration file (for its data_dir)")
	data := fs.String("data", "", "data directory, overriding the configuration")
	rest, code, ok := parseFlags(fs, args[1:])
	if !ok {
		return code
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		fmt.Fprintf(e.stderr, "skillreg store: %v\n", err)
		return exitUsage
	}
	dir := dataDir(cfg)
	if *data != "" {
		dir = *data
	}
	path := filepath.Join(dir, store.FileName)
	switch {
	case sub == "check" && len(rest) == 0:
		err := store.Check(path)
		if errors.Is(err, store.ErrLocked) {
			err = viaDaemon(ctx, dir, "/check", io.Discard)
		}
		if err != nil {
			fmt.Fprintf(e.stderr, "skillreg store check: %s: %v\n", path, err)
			return exitProblems
		}
		fmt.Fprintf(e.stdout, "%s: ok\n", path)
		return exitOK
	case sub == "rebuild" && len(rest) == 0:
		aside, err := store.Rebuild(path)
		if errors.Is(err, store.ErrLocked) {
			fmt.Fprintf(e.stderr, "skillreg store rebuild: %s is in use: stop the daemon first\n", path)
			return exitProblems
		}
		if err != nil {
			fmt.Fprintf(e.stderr, "skillreg store rebuild: %v\n", err)
			return exitProblems
		}
		if aside != "" {
			fmt.Fprintf(e.stdout, "moved %s to %s; the next start resyncs every source\n", path, aside)
		} else {
			fmt.Fprintf(e.stdout, "%s did not exist; the next start syncs every source\n", path)
		}
		return exitOK
	case sub == "backup" && len(rest) == 1:
		if err := backup(ctx, dir, path, rest[0]); err != nil {
			fmt.Fprintf(e.stderr, "skillreg store backup: %v\n", err)
			return exitProblems
		}
		fmt.Fprintf(e.stdout, "wrote %s\n", rest[0])
		return exitOK
	}
	usage()
	return exitUsage
}

// backup writes a consistent copy of the store to dst (through a temporary
// file renamed into place): directly when no daemon runs, else through the
// running daemon's admin socket, which copies within a read transaction.
func backup(ctx context.Context, dir, path, dst string) error {
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".skillreg-backup-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	write := func() error {
		s, err := store.Open(path, store.Options{ReadOnly: true, Timeout: 200 * time.Millisecond})
		if errors.Is(err, store.ErrLocked) {
			return viaDaemon(ctx, dir, "/backup", tmp)
		}
		if err != nil {
			return err
		}
		defer s.Close()
		return s.Backup(tmp)
	}
	if err := write(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}

// viaDaemon asks the daemon running on dir for path over its admin socket.
func viaDaemon(ctx context.Context, dir, path string, w io.Writer) error {
	sock := filepath.Join(dir, adminSocket)
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://skillreg"+path, nil)
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("the store is in use and the running daemon's admin socket %s does not answer: %w", sock, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("daemon: %s", b)
	}
	_, err = io.Copy(w, resp.Body)
	return err
}

// serveAdmin serves the admin socket until ctx ends: GET /backup streams a
// consistent copy of the store, GET /check checks it.
func (d *Daemon) serveAdmin(ctx context.Context) error {
	if d.store == nil {
		return nil
	}
	sock := filepath.Join(filepath.Dir(d.store.Path()), adminSocket)
	// We hold the store's lock, so a socket left here is a dead daemon's.
	_ = os.Remove(sock)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		d.log.Warn("admin socket unavailable: store backup and check need the daemon stopped", "path", sock, "err", err)
		return nil
	}
	if err := os.Chmod(sock, 0o600); err != nil {
		ln.Close()
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /backup", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		if err := d.store.Backup(w); err != nil {
			d.log.Error("store backup", "err", err)
		}
	})
	mux.HandleFunc("GET /check", func(w http.ResponseWriter, r *http.Request) {
		if err := d.store.Check(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
		os.Remove(sock)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
