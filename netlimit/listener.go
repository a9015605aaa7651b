// Package netlimit bounds what network peers can make skillreg hold:
// open connections (in total and per client address, with a small pool
// kept for health probes), body bytes in flight across every request, and
// how slowly a body may arrive. It knows nothing of skillreg's endpoints
// beyond the paths and policies it is given.
package netlimit

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Defaults of Options.
const (
	// DefaultReserved is how many connections the probe pool holds.
	DefaultReserved = 64
	// DefaultPeekTimeout bounds how long a connection over the caps may
	// take to send its first request line.
	DefaultPeekTimeout = time.Second
	// DefaultMaxConnsPerIP is the per-address cap a configuration starts from.
	DefaultMaxConnsPerIP = 256
	// FDHeadroom is the number of file descriptors DefaultMaxConns leaves
	// for everything else (the store, git object stores, the probe pool
	// and connections being looked at).
	FDHeadroom = 256
	// maxLine is how much of a connection over the caps is read to find
	// its request line.
	maxLine = 256
)

// DefaultMaxConns is the soft RLIMIT_NOFILE (which the Go runtime raises
// to the hard limit at start) minus FDHeadroom, at least 64.
func DefaultMaxConns() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 1024 - FDHeadroom
	}
	n := int64(rl.Cur) - FDHeadroom
	if rl.Cur > 1<<30 { // RLIM_INFINITY or absurdly large
		n = 1 << 20
	}
	return int(max(n, 64))
}

// Options configures a Listener. The zero value works: the default caps,
// no per-address cap, no probe paths.
type Options struct {
	// MaxConns caps the connections served at once, probes' pool aside
	// (default DefaultMaxConns).
	MaxConns int
	// MaxConnsPerIP caps the connections of one peer address; 0 turns
	// the cap off.
	MaxConnsPerIP int
	// Exempt reports peers the per-address cap does not apply to (trusted
	// proxies, whose clients are capped per request instead).
	Exempt func(netip.Addr) bool
	// ProbePaths are the paths a connection over the caps may still be
	// served for, from the reserved pool: "GET /healthz", say, in its
	// first request line.
	ProbePaths []string
	// Reserved is the size of the probe pool (default DefaultReserved;
	// negative means none).
	Reserved int
	// PeekTimeout bounds how long a connection over the caps may take to
	// send its request line (default DefaultPeekTimeout).
	PeekTimeout time.Duration
	// TLS, when set, makes the listener serve TLS itself: it hands the
	// server *tls.Conn values (serve them with http.Server.Serve, not
	// ServeTLS), and a connection over the caps completes its handshake
	// within PeekTimeout so that its request line can be read and a probe
	// still served from the pool (a probe connection reaches the server
	// decrypted, so its request has no TLS state).
	TLS *tls.Config
	// Logger receives accept errors; nil discards.
	Logger *slog.Logger
}

// Stats is what a Listener holds now and has refused so far.
type Stats struct {
	Open     int    // counted connections
	Probes   int    // connections served from the probe pool
	Peeking  int    // connections over the caps whose request line is awaited
	Refused  uint64 // connections closed at once, over the caps
	Accepted uint64 // connections handed to the server
}

// Listener is a net.Listener that closes connections over its caps at
// once, but for probes of ProbePaths, served from a reserved pool.
type Listener struct {
	inner net.Listener
	o     Options
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
	err   error // the inner listener's, once it failed

	mu       sync.Mutex
	open     int
	probes   int
	byIP     map[netip.Addr]int
	peeking  map[*peekConn]struct{}
	peekByIP map[netip.Addr][]*peekConn // oldest first
	refused  uint64
	accepted uint64
}

// NewListener wraps inner; it starts the goroutine that accepts from it.
func NewListener(inner net.Listener, o Options) *Listener {
	if o.MaxConns <= 0 {
		o.MaxConns = DefaultMaxConns()
	}
	if o.Reserved == 0 {
		o.Reserved = DefaultReserved
	}
	if o.Reserved < 0 || len(o.ProbePaths) == 0 {
		o.Reserved = 0
	}
	if o.PeekTimeout <= 0 {
		o.PeekTimeout = DefaultPeekTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	l := &Listener{
		inner:    inner,
		o:        o,
		conns:    make(chan net.Conn),
		done:     make(chan struct{}),
		byIP:     map[netip.Addr]int{},
		peeking:  map[*peekConn]struct{}{},
		peekByIP: map[netip.Addr][]*peekConn{},
	}
	go l.run()
	return l
}

// Accept returns the next admitted connection.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		if l.err != nil {
			return nil, l.err
		}
		return nil, net.ErrClosed
	}
}

// Close stops accepting and closes the connections being looked at.
func (l *Listener) Close() error {
	err := l.inner.Close()
	l.stop(nil)
	l.mu.Lock()
	for p := range l.peeking {
		p.Close()
	}
	clear(l.peeking)
	clear(l.peekByIP)
	l.mu.Unlock()
	return err
}

func (l *Listener) stop(err error) {
	l.once.Do(func() {
		l.err = err
		close(l.done)
	})
}

// Addr is the inner listener's address.
func (l *Listener) Addr() net.Addr { return l.inner.Addr() }

// Stats returns the current counts.
func (l *Listener) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Stats{Open: l.open, Probes: l.probes, Peeking: len(l.peeking), Refused: l.refused, Accepted: l.accepted}
}

// run is the accept loop: it never blocks on a connection, only on the
// inner Accept and on handing a connection to the server.
func (l *Listener) run() {
	var backoff time.Duration
	for {
		c, err := l.inner.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				l.stop(nil)
				return
			}
			// Out of file descriptors or a transient error: wait, as
			// http.Server does, rather than spin.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			l.o.Logger.Warn("accept failed; retrying", "err", err, "retry_in", backoff)
			select {
			case <-time.After(backoff):
				continue
			case <-l.done:
				return
			}
		}
		backoff = 0
		l.admit(c)
	}
}

func peerAddr(c net.Conn) netip.Addr {
	if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		if a, ok := netip.AddrFromSlice(ta.IP); ok {
			return a.Unmap()
		}
	}
	return netip.Addr{}
}

// capKey is what the per-address cap counts: the address, or for IPv6
// its /64, since one host is routinely given a whole /64 and could rotate
// through it to dodge a per-address cap.
func capKey(a netip.Addr) netip.Addr {
	if a.Is6() && !a.Is4In6() && !a.IsLoopback() {
		if p, err := a.Prefix(64); err == nil {
			return p.Addr()
		}
	}
	return a
}

// admit counts c in, hands it to peek, or closes it.
func (l *Listener) admit(c net.Conn) {
	peer := peerAddr(c)
	ip := capKey(peer)
	perIP := l.o.MaxConnsPerIP > 0 && (l.o.Exempt == nil || !l.o.Exempt(peer))
	l.mu.Lock()
	if l.open < l.o.MaxConns && (!perIP || l.byIP[ip] < l.o.MaxConnsPerIP) {
		l.open++
		if perIP {
			l.byIP[ip]++
		}
		l.accepted++
		l.mu.Unlock()
		cc := &countedConn{Conn: c, l: l, ip: ip, perIP: perIP}
		if l.o.TLS != nil {
			l.deliver(tls.Server(cc, l.o.TLS))
			return
		}
		l.deliver(cc)
		return
	}
	if l.o.Reserved == 0 {
		l.refused++
		l.mu.Unlock()
		c.Close()
		return
	}
	if len(l.peeking) >= l.o.Reserved {
		// Make room fairly: drop the oldest connection of the address
		// that has the most waiting, unless that is the newcomer's own.
		// A flood from some addresses then cannot starve the probes of
		// another (a kubelet's, a load balancer's).
		victim := ip
		for a, ps := range l.peekByIP {
			if len(ps) > len(l.peekByIP[victim]) {
				victim = a
			}
		}
		if victim == ip {
			l.refused++
			l.mu.Unlock()
			c.Close()
			return
		}
		oldest := l.peekByIP[victim][0]
		l.unpeekLocked(oldest)
		l.refused++
		oldest.Close()
	}
	p := &peekConn{Conn: c, ip: ip}
	l.peeking[p] = struct{}{}
	l.peekByIP[ip] = append(l.peekByIP[ip], p)
	l.mu.Unlock()
	go l.peek(p, ip)
}

// peek reads c's first request line, with a short deadline, and serves it
// from the probe pool if it asks for a probe path and the pool has room.
func (l *Listener) peek(p *peekConn, ip netip.Addr) {
	deadline := time.Now().Add(l.o.PeekTimeout)
	_ = p.SetReadDeadline(deadline)
	var src net.Conn = p.Conn
	if l.o.TLS != nil {
		// The request line is inside TLS: the handshake shares the
		// deadline. (Concurrent handshakes are bounded by Reserved.)
		tc := tls.Server(p.Conn, l.o.TLS)
		_ = tc.SetDeadline(deadline)
		src = tc
	}
	buf := make([]byte, 0, maxLine)
	probe := false
	for len(buf) < maxLine {
		n, err := src.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if ok, decided := isProbe(buf, l.o.ProbePaths); decided {
			probe = ok
			break
		}
		if err != nil {
			break
		}
	}
	l.mu.Lock()
	_, mine := l.peeking[p]
	l.unpeekLocked(p)
	if !mine { // evicted: already closed and counted
		l.mu.Unlock()
		return
	}
	if !probe || l.probes >= l.o.Reserved {
		l.refused++
		l.mu.Unlock()
		p.Close()
		return
	}
	l.probes++
	l.accepted++
	l.mu.Unlock()
	_ = src.SetDeadline(time.Time{})
	l.deliver(&countedConn{Conn: src, l: l, ip: ip, probe: true, prefix: buf})
}

func (l *Listener) deliver(c net.Conn) {
	select {
	case l.conns <- c:
	case <-l.done:
		c.Close()
	}
}

// isProbe decides, from the start of a request line, whether it is a GET
// or HEAD of one of paths (decided is false while more bytes could still
// change the answer).
func isProbe(line []byte, paths []string) (probe, decided bool) {
	if i := bytes.IndexAny(line, "\r\n"); i >= 0 {
		line = line[:i]
		decided = true
	}
	method, rest, ok := bytes.Cut(line, []byte(" "))
	if !ok {
		return false, decided || len(line) > len("HEAD")
	}
	if string(method) != http.MethodGet && string(method) != http.MethodHead {
		return false, true
	}
	end := bytes.IndexAny(rest, " ?")
	if end < 0 {
		// The path may go on; it can only still be a probe if it is a
		// prefix of one.
		for _, p := range paths {
			if strings.HasPrefix(p, string(rest)) {
				return false, decided
			}
		}
		return false, true
	}
	target := string(rest[:end])
	for _, p := range paths {
		if target == p {
			return true, true
		}
	}
	return false, true
}

// peekConn is a connection over the caps whose request line is awaited.
type peekConn struct {
	net.Conn
	ip netip.Addr
}

// unpeekLocked forgets p (if it is still waiting); l.mu is held.
func (l *Listener) unpeekLocked(p *peekConn) {
	if _, ok := l.peeking[p]; !ok {
		return
	}
	delete(l.peeking, p)
	ps := l.peekByIP[p.ip]
	for i, q := range ps {
		if q == p {
			ps = append(ps[:i], ps[i+1:]...)
			break
		}
	}
	if len(ps) == 0 {
		delete(l.peekByIP, p.ip)
	} else {
		l.peekByIP[p.ip] = ps
	}
}

// countedConn is an admitted connection; closing it frees its place.
type countedConn struct {
	net.Conn
	l      *Listener
	ip     netip.Addr
	perIP  bool
	probe  bool
	prefix []byte // bytes read while peeking, replayed first
	once   sync.Once
}

func (c *countedConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		l := c.l
		l.mu.Lock()
		defer l.mu.Unlock()
		if c.probe {
			l.probes--
			return
		}
		l.open--
		if c.perIP {
			if l.byIP[c.ip]--; l.byIP[c.ip] <= 0 {
				delete(l.byIP, c.ip)
			}
		}
	})
	return err
}

type connKey struct{}

// ConnContext is the http.Server ConnContext hook that lets ProbeOnly see
// which connections came from the probe pool.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if cc, ok := c.(*countedConn); ok && cc.probe {
		return context.WithValue(ctx, connKey{}, true)
	}
	return ctx
}

// FromProbePool reports whether r arrived on a connection of the probe pool.
func FromProbePool(r *http.Request) bool {
	v, _ := r.Context().Value(connKey{}).(bool)
	return v
}

// ProbeOnly keeps connections of the probe pool to the probe paths: one
// request each, then the connection closes; anything else on them is
// answered 503.
func ProbeOnly(paths []string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !FromProbePool(r) {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Connection", "close")
		for _, p := range paths {
			if r.URL.Path == p && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
				next.ServeHTTP(w, r)
				return
			}
		}
		w.Header().Set("Retry-After", "1")
		http.Error(w, "too many connections", http.StatusServiceUnavailable)
	})
}
