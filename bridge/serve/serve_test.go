package serve

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func ok(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }

func start(t *testing.T, l Limits) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	addr, err := Start(ctx, "127.0.0.1:0", http.HandlerFunc(ok), l, func(err error) { t.Errorf("server stopped: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	return addr.String()
}

// get sends one request on conn and reads the status line, or fails after wait.
func get(conn net.Conn, wait time.Duration) (string, error) {
	_ = conn.SetDeadline(time.Now().Add(wait))
	if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return "", err
	}
	return bufio.NewReader(conn).ReadString('\n')
}

// A client that sends its headers a byte at a time (slowloris) is cut off at
// ReadHeaderTimeout, however long it keeps trickling.
func TestSlowlorisConnectionIsClosed(t *testing.T) {
	l := DefaultLimits()
	l.ReadHeaderTimeout = 300 * time.Millisecond
	addr := start(t, l)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	var writeErr error
	for _, b := range []byte("GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ") {
		if _, writeErr = conn.Write([]byte{b}); writeErr != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
		if time.Since(start) > 3*time.Second {
			break
		}
	}
	// The server has closed: a read ends (EOF or reset, perhaps after a 408) at once.
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	data, err := io.ReadAll(conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection still open %s after a slow start (read %q)", time.Since(start).Round(time.Millisecond), data)
	}
	if took := time.Since(start); took > 2500*time.Millisecond {
		t.Fatalf("connection closed only after %s, want about ReadHeaderTimeout", took)
	}
}

// The listener holds MaxConns connections; the next waits until one closes, then is served.
func TestConnectionBeyondTheCapWaitsForAFreeSlot(t *testing.T) {
	l := DefaultLimits()
	l.MaxConns = 2
	addr := start(t, l)
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if line, err := get(c, 2*time.Second); err != nil || !strings.Contains(line, "200") {
			t.Fatalf("connection within the cap: %q, %v", line, err)
		}
		held = append(held, c)
	}
	extra, err := net.Dial("tcp", addr) // the kernel's backlog takes it; the server does not
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	if _, err := io.WriteString(extra, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(extra)
	_ = extra.SetReadDeadline(time.Now().Add(400 * time.Millisecond))
	if line, err := r.ReadString('\n'); err == nil {
		t.Fatalf("the third connection was served (%q) while two were held", line)
	}
	held[0].Close()
	_ = extra.SetReadDeadline(time.Now().Add(3 * time.Second))
	if line, err := r.ReadString('\n'); err != nil || !strings.Contains(line, "200") {
		t.Fatalf("after a slot freed: %q, %v", line, err)
	}
}

func TestServerHasEveryTimeout(t *testing.T) {
	l := DefaultLimits()
	srv := Server(http.HandlerFunc(ok), l)
	for name, d := range map[string]time.Duration{"ReadHeaderTimeout": srv.ReadHeaderTimeout, "ReadTimeout": srv.ReadTimeout,
		"WriteTimeout": srv.WriteTimeout, "IdleTimeout": srv.IdleTimeout} {
		if d <= 0 {
			t.Errorf("%s unset", name)
		}
	}
	if srv.MaxHeaderBytes != l.MaxHeaderBytes || l.MaxHeaderBytes <= 0 || l.MaxConns <= 0 {
		t.Errorf("limits %+v, server MaxHeaderBytes %d", l, srv.MaxHeaderBytes)
	}
}

// A closed listener ends an Accept that waits for a slot.
func TestClosedLimitListenerEndsAWaitingAccept(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ll := LimitListener(ln, 1)
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	first, err := ll.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	done := make(chan error, 1)
	go func() { _, err := ll.Accept(); done <- err }()
	time.Sleep(50 * time.Millisecond)
	ll.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Accept after Close: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Accept still waits after Close")
	}
}

// A daemon's server: Prometheus reads /metrics, the API answers under its pattern, and nothing
// else is served.
func TestMetricsAndAPIServesBoth(t *testing.T) {
	reg := prometheus.NewRegistry()
	cycles := prometheus.NewCounter(prometheus.CounterOpts{Name: "test_cycles_total", Help: "cycles"})
	reg.MustRegister(cycles)
	cycles.Add(3)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	addr, err := MetricsAndAPI(ctx, "127.0.0.1:0", reg, "/v1/", http.HandlerFunc(ok), func(err error) { t.Errorf("server stopped: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{"/metrics": "test_cycles_total 3", "/v1/status": "ok", "/other": "404 page not found"} {
		resp, err := http.Get("http://" + addr.String() + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), want) {
			t.Errorf("GET %s: %s %q, want %q", path, resp.Status, body, want)
		}
	}
}
