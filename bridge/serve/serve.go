// Package serve is the HTTP server setup every slurmbridge daemon shares (quotad's API and
// metrics, elasticd's API and metrics; both start theirs with MetricsAndAPI): timeouts that close a connection which sends its
// request too slowly (slowloris) or never reads its answer, a bound on header size, and a
// listener that holds at most a fixed number of connections at once, so that a flood of
// connections queues in the kernel instead of costing the daemon a goroutine and a buffer each.
package serve

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Limits bound what one client may hold of a server.
type Limits struct {
	// MaxConns is how many connections the server holds at once; more wait in the kernel's
	// accept queue until one closes.
	MaxConns int
	// ReadHeaderTimeout closes a connection whose request headers have not arrived in time.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included.
	ReadTimeout time.Duration
	// WriteTimeout bounds a request's handling and answer, from the end of its headers.
	WriteTimeout time.Duration
	// IdleTimeout closes a kept-alive connection that sends no next request.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's headers (a MUNGE credential is about 200 bytes).
	MaxHeaderBytes int
}

// DefaultLimits suit a daemon's API and metrics: a Prometheus scrape, a node agent's report and
// a person's status each take well under a second; the write timeout leaves room for a MUNGE
// decode that waits its turn and a slurmdbd lookup.
func DefaultLimits() Limits {
	return Limits{
		MaxConns:          256,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
	}
}

// Server is an http.Server for handler with the limits' timeouts.
func Server(handler http.Handler, l Limits) *http.Server {
	return &http.Server{Handler: handler, ReadHeaderTimeout: l.ReadHeaderTimeout, ReadTimeout: l.ReadTimeout,
		WriteTimeout: l.WriteTimeout, IdleTimeout: l.IdleTimeout, MaxHeaderBytes: l.MaxHeaderBytes}
}

// Listen listens on addr (TCP) and admits at most l.MaxConns connections at once.
func Listen(addr string, l Limits) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return LimitListener(ln, l.MaxConns), nil
}

// Start listens on addr and serves handler with the limits until ctx ends, then shuts the
// server down (giving requests in flight shutdownWait). It returns the bound address; onError
// hears a server that stops on its own.
func Start(ctx context.Context, addr string, handler http.Handler, l Limits, onError func(error)) (net.Addr, error) {
	ln, err := Listen(addr, l)
	if err != nil {
		return nil, err
	}
	srv := Server(handler, l)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && onError != nil {
			onError(err)
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), shutdownWait)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	return ln.Addr(), nil
}

// shutdownWait is how long a stopping daemon lets requests in flight finish.
const shutdownWait = 5 * time.Second

// LimitListener admits at most n connections at once (n < 1: one): Accept waits for a
// closed connection before it takes the next from the kernel.
func LimitListener(ln net.Listener, n int) net.Listener {
	return &limitListener{Listener: ln, slots: make(chan struct{}, max(n, 1)), done: make(chan struct{})}
}

type limitListener struct {
	net.Listener
	slots     chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.slots }}, nil
}

func (l *limitListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.done) })
	return err
}

// limitConn gives its slot back once, however often it is closed.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// MetricsAndAPI is a daemon's HTTP server on addr until ctx ends, with DefaultLimits (the port
// is reachable from every node): metrics at /metrics, open to Prometheus, and api at
// apiPattern (nil: none). It returns the bound address; onError hears a server that stops on
// its own.
func MetricsAndAPI(ctx context.Context, addr string, metrics prometheus.Gatherer, apiPattern string, api http.Handler, onError func(error)) (net.Addr, error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(metrics, promhttp.HandlerOpts{}))
	if api != nil {
		mux.Handle(apiPattern, api)
	}
	return Start(ctx, addr, mux, DefaultLimits(), onError)
}
