package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// How the harness gives a process its addresses, so that no two processes ever race for a
// port (a probe that closes a listener and hands its port on lets another bind it in between):
//   - the admission and health endpoints of CAPOV's binaries are listeners the harness opens
//     (127.0.0.1:0) and holds until the process takes them over (Handover: the
//     socket-activation variables LISTEN_FDS and LISTEN_FDNAMES, file descriptors 3 on);
//   - every other endpoint is bound by the process itself on port 0 and read back: the metrics
//     endpoint from its "Serving" log line, the simulator's from its --url-file, a
//     controller-runtime server's (a binary not ours, pprof) from its "starting server" line.
//
// The one exception is a release that predates the handover (the upgrade test's previous
// release): its webhook must bind the port registered in the API server itself. That port is
// reserved (ReservePort): outside the kernel's ephemeral range, so no process binding port 0 or
// connecting out is ever given it, and locked for the stack's lifetime against every other
// harness of this machine.

// Listen opens a TCP listener on a port of 127.0.0.1 the kernel picks.
func Listen() (*net.TCPListener, error) {
	l, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, fmt.Errorf("listening on 127.0.0.1: %w", err)
	}
	return l, nil
}

// Handover is a listener passed to a process at start under a name its binary knows
// (options.ListenerWebhook, options.ListenerHealth).
type Handover struct {
	Name     string
	Listener *net.TCPListener
}

// handoverFiles returns the ExtraFiles and environment of hs: the files are duplicates of the
// listeners, which the caller closes once the process started.
func handoverFiles(hs []Handover) ([]*os.File, []string, error) {
	if len(hs) == 0 {
		return nil, nil, nil
	}
	files := make([]*os.File, 0, len(hs))
	names := make([]string, 0, len(hs))
	for _, h := range hs {
		f, err := h.Listener.File()
		if err != nil {
			for _, f := range files {
				_ = f.Close()
			}
			return nil, nil, fmt.Errorf("handing over the %s listener: %w", h.Name, err)
		}
		files = append(files, f)
		names = append(names, h.Name)
	}
	return files, []string{"LISTEN_FDS=" + strconv.Itoa(len(hs)), "LISTEN_FDNAMES=" + strings.Join(names, ":")}, nil
}

// CAPOV's "Serving" line (text or JSON logs) reports the address an endpoint bound.
var servingLine = regexp.MustCompile(`"Serving".*?"?endpoint"?[=:]"([a-z]+)".*?"?address"?[=:]"([^"]+)"`)

// ReportedAddress waits (at most 90 s, failing at once if the process exits) until p's log
// reports the address of its endpoint ("metrics", "health", "webhook") and returns it.
func ReportedAddress(ctx context.Context, p *Process, endpoint string) (string, error) {
	return waitLogAddress(ctx, p, endpoint, func(logs string) string {
		for _, m := range servingLine.FindAllStringSubmatch(logs, -1) {
			if m[1] == endpoint {
				return m[2]
			}
		}
		return ""
	})
}

// ReportedServerAddress is ReportedAddress for a server of controller-runtime's manager (a
// binary that is not ours, or CAPOV's pprof endpoint): the address its "starting server" line
// reports for the server of that name ("health probe", "pprof").
func ReportedServerAddress(ctx context.Context, p *Process, server string) (string, error) {
	line := regexp.MustCompile(`"starting server".*?"?name"?[=:]"` + regexp.QuoteMeta(server) + `".*?"?addr"?[=:]"([^"]+)"`)
	return waitLogAddress(ctx, p, server, func(logs string) string {
		if m := line.FindStringSubmatch(logs); m != nil {
			return m[1]
		}
		return ""
	})
}

func waitLogAddress(ctx context.Context, p *Process, what string, find func(string) string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	for {
		if a := find(p.Logs()); a != "" {
			if _, _, err := net.SplitHostPort(a); err != nil {
				return "", fmt.Errorf("%s reported %q as its %s address: %w", p.Name, a, what, err)
			}
			return a, nil
		}
		if exited, err := p.Exited(); exited {
			return "", fmt.Errorf("%s exited before it reported its %s address: %w\n%s", p.Name, what, err, Tail(p.Logs(), 30))
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("%s did not report its %s address: %w\n%s", p.Name, what, ctx.Err(), Tail(p.Logs(), 30))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// heldPort is the registered admission port of a stack: a listener the harness holds for the
// stack's lifetime and hands to each webhook process it starts. While no webhook runs, the
// harness answers its connections by closing them, as a port nobody listens on would be
// refused, instead of leaving them queued until the API server's call times out.
type heldPort struct {
	ln *net.TCPListener
	// reservation is set instead of ln for a webhook binary that cannot take a listener over.
	reservation *Reservation

	mu      sync.Mutex
	current *Process      // the webhook started last on the port
	refuser chan struct{} // closed when the refusing loop has stopped; nil when none runs
}

func (h *heldPort) port() int {
	if h.reservation != nil {
		return h.reservation.Port
	}
	return h.ln.Addr().(*net.TCPAddr).Port
}

// serving records p as the webhook on the port: once it exits, and unless another webhook
// was started since, the port refuses connections until the next start (stopRefusing).
func (h *heldPort) serving(p *Process) {
	if h.ln == nil {
		return
	}
	h.mu.Lock()
	h.current = p
	h.mu.Unlock()
	go func() {
		<-p.done
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.current == p {
			h.refuseLocked()
		}
	}()
}

func (h *heldPort) refuseLocked() {
	if h.refuser != nil {
		return
	}
	done := make(chan struct{})
	h.refuser = done
	go func() {
		defer close(done)
		for {
			c, err := h.ln.Accept()
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					return // stopRefusing
				}
				if errors.Is(err, net.ErrClosed) {
					return
				}
				time.Sleep(10 * time.Millisecond)
				continue
			}
			_ = c.Close() // a refused connection
		}
	}()
}

// stopRefusing ends the refusals before a webhook starts; a webhook that exits after this
// call no longer starts them.
func (h *heldPort) stopRefusing() error {
	if h.ln == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.current = nil
	if h.refuser == nil {
		return nil
	}
	if err := h.ln.SetDeadline(time.Now()); err != nil {
		return fmt.Errorf("stopping the admission port's refusals: %w", err)
	}
	<-h.refuser
	h.refuser = nil
	if err := h.ln.SetDeadline(time.Time{}); err != nil {
		return fmt.Errorf("stopping the admission port's refusals: %w", err)
	}
	return nil
}

func (h *heldPort) close() {
	if h.ln != nil {
		_ = h.ln.Close() // ends the refusing loop too
		h.mu.Lock()
		r := h.refuser
		h.mu.Unlock()
		if r != nil {
			<-r
		}
	}
	h.reservation.Release()
}

// Reservation is a port of 127.0.0.1 reserved for one process that binds it itself.
type Reservation struct {
	Port int
	lock *os.File
}

// The reserved ports lie below the kernel's ephemeral range (ip_local_port_range), which is
// read at run time; reservedLow is the lowest one.
const reservedLow = 20000

// ReservePort reserves a port that no other harness of this machine uses and that the kernel
// never gives to a process binding port 0 or connecting out: it lies below the ephemeral range,
// and a lock file (flock) held until Release keeps every other harness off it. For binaries
// that cannot take a listener over; every other endpoint uses Listen or port 0.
func ReservePort() (*Reservation, error) {
	low, err := ephemeralLow()
	if err != nil {
		return nil, err
	}
	if low-reservedLow < 100 {
		return nil, fmt.Errorf("the ephemeral port range starts at %d: no room below it for reserved ports (from %d)", low, reservedLow)
	}
	dir := filepath.Join(os.TempDir(), "capov-harness-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, fmt.Errorf("reserving a port: %w", err)
	}
	start := reservedLow + os.Getpid()%(low-reservedLow)
	for i := range low - reservedLow {
		port := reservedLow + (start-reservedLow+i)%(low-reservedLow)
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			return nil, fmt.Errorf("reserving a port: %w", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			_ = f.Close()
			continue // another harness holds it
		}
		// Nothing else may listen there either (a service with a fixed port).
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			_ = f.Close()
			continue
		}
		if err := l.Close(); err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("reserving port %d: %w", port, err)
		}
		return &Reservation{Port: port, lock: f}, nil
	}
	return nil, fmt.Errorf("no free port between %d and %d to reserve", reservedLow, low)
}

// Release gives the port back.
func (r *Reservation) Release() {
	if r != nil && r.lock != nil {
		_ = r.lock.Close() // drops the flock
		r.lock = nil
	}
}

func ephemeralLow() (int, error) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, fmt.Errorf("reading the ephemeral port range: %w", err)
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, fmt.Errorf("the ephemeral port range %q is not two numbers", b)
	}
	low, err := strconv.Atoi(f[0])
	if err != nil {
		return 0, fmt.Errorf("the ephemeral port range %q: %w", b, err)
	}
	return low, nil
}
