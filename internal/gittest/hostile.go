package gittest

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// EchoServer is a hostile git remote on loopback: it answers every request
// with one status whose reason phrase and body repeat the request's
// Authorization header, as sent (base64) and decoded (the plain
// "user:token"), with control characters around them. It speaks raw HTTP/1.1
// over TCP, so that the reason phrase is whatever it likes.
type EchoServer struct {
	ln       net.Listener
	status   int
	requests atomic.Int64
	wg       sync.WaitGroup
	mu       sync.Mutex
	shown    []string // the passwords of the Basic credentials it was sent
}

// NewEchoServer starts an EchoServer answering status (401, 403, 500, ...);
// it stops when the test ends.
func NewEchoServer(tb testing.TB, status int) *EchoServer {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := &EchoServer{ln: ln, status: status}
	s.wg.Add(1)
	go s.accept()
	tb.Cleanup(s.Close)
	return s
}

// URL is the base URL; any path answers the same.
func (s *EchoServer) URL() string { return "http://" + s.ln.Addr().String() }

// Requests is how many requests it answered.
func (s *EchoServer) Requests() int { return int(s.requests.Load()) }

// Passwords returns the passwords of the Basic credentials it was sent,
// in order (a test looks for each of them where they must not be).
func (s *EchoServer) Passwords() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.shown...)
}

// Close stops it.
func (s *EchoServer) Close() {
	s.ln.Close()
	s.wg.Wait()
}

func (s *EchoServer) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer c.Close()
			s.serve(c)
		}()
	}
}

// serve answers one request, then closes the connection (so Close never
// waits for a client's idle connection).
func (s *EchoServer) serve(c net.Conn) {
	br := bufio.NewReader(c)
	{
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_, _ = br.Discard(int(max(req.ContentLength, 0)))
		s.requests.Add(1)
		auth := req.Header.Get("Authorization")
		plain := ""
		if b64, ok := strings.CutPrefix(auth, "Basic "); ok {
			if dec, err := base64.StdEncoding.DecodeString(b64); err == nil {
				plain = string(dec)
				if _, pw, ok := strings.Cut(plain, ":"); ok {
					s.mu.Lock()
					s.shown = append(s.shown, pw)
					s.mu.Unlock()
				}
			}
		}
		body := fmt.Sprintf("Bad credentials\r\nyou sent: %s\n\x1b[31mdecoded: %s\x00\n<script>alert(1)</script>\n", auth, plain)
		fmt.Fprintf(c, "HTTP/1.1 %d Denied %s %s\r\nContent-Type: text/plain\r\nConnection: close\r\nWWW-Authenticate: Basic realm=\"%s\"\r\nContent-Length: %d\r\n\r\n%s",
			s.status, auth, plain, auth, len(body), body)
	}
}

// HungServer is a remote that accepts connections and never answers: a
// dead backend behind a load balancer, a firewall that drops packets after
// the handshake.
type HungServer struct {
	ln       net.Listener
	mu       sync.Mutex
	conns    []net.Conn
	accepted chan struct{}
	wg       sync.WaitGroup
}

// NewHungServer starts a HungServer; it stops when the test ends.
func NewHungServer(tb testing.TB) *HungServer {
	tb.Helper()
	s, err := StartHung()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	return s
}

// StartHung starts a HungServer outside a test (benchmarks); Close stops it.
func StartHung() (*HungServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &HungServer{ln: ln, accepted: make(chan struct{}, 1024)}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			select {
			case s.accepted <- struct{}{}:
			default:
			}
		}
	}()
	return s, nil
}

// URL is the URL of a repository on it.
func (s *HungServer) URL() string { return "http://" + s.ln.Addr().String() + "/hung.git" }

// Accepted receives once per accepted connection.
func (s *HungServer) Accepted() <-chan struct{} { return s.accepted }

// Close stops it and drops the connections it holds.
func (s *HungServer) Close() {
	s.ln.Close()
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		c.Close()
	}
	s.conns = nil
}
