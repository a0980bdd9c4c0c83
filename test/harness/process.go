package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// BuildBinary builds ./cmd/<name> of the repository at root into dir and returns its path.
// The Go build cache makes a rebuild of unchanged sources take about a second.
func BuildBinary(ctx context.Context, root, dir, name string) (string, error) {
	return buildPackage(ctx, root, filepath.Join(dir, name), "./cmd/"+name)
}

// Process is a binary started by Start. Its output goes to a log file.
type Process struct {
	// Name labels the process in messages.
	Name string
	// LogPath is the file with its stdout and stderr.
	LogPath string

	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	err  error
}

// Start runs bin with args and extra environment variables, writing its output to logPath.
func Start(name, bin string, args, env []string, logPath string) (*Process, error) {
	return StartWith(name, bin, args, env, logPath)
}

// StartWith is Start with listeners handed over to the process (file descriptors 3 on, named in
// LISTEN_FDNAMES); the harness's listeners stay open, the process gets duplicates.
func StartWith(name, bin string, args, env []string, logPath string, handovers ...Handover) (*Process, error) {
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, err
	}
	files, handoverEnv, err := handoverFiles(handovers)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, f := range files {
			_ = f.Close() // the child has its own copies once started
		}
	}()
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// The test process's own LISTEN_* variables (none, normally) are never passed on.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LISTEN_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(append(cmd.Env, env...), handoverEnv...)
	cmd.ExtraFiles = files
	// Its own process group (Stop and Kill reach its children), and killed with the test or
	// demo process that started it, so that nothing outlives a crashed run.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &Process{Name: name, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		logFile.Close()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// Exited reports whether the process has ended, and its error.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return true, p.err
	default:
		return false, nil
	}
}

// PID returns the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Stop sends SIGTERM and waits up to timeout for a graceful exit, then kills the process.
// It returns the exit error of a graceful stop (nil when the process exited with 0).
func (p *Process) Stop(timeout time.Duration) error {
	if exited, err := p.Exited(); exited {
		return err
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		_, err := p.Exited()
		return err
	case <-time.After(timeout):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		return fmt.Errorf("%s did not stop within %s after SIGTERM; killed", p.Name, timeout)
	}
}

// Kill stops the process at once, like a crash.
func (p *Process) Kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// Logs returns the process output so far.
func (p *Process) Logs() string {
	b, err := os.ReadFile(p.LogPath)
	if err != nil {
		return ""
	}
	return string(b)
}

// LogContains reports whether the output contains s.
func (p *Process) LogContains(s string) bool { return strings.Contains(p.Logs(), s) }

// ErrGaveUp stops WaitForHTTP at once when the probe returns an error wrapping it.
var ErrGaveUp = errors.New("gave up waiting")

// WaitForHTTP polls get until it answers 200, ctx ends or get returns an error wrapping
// ErrGaveUp.
func WaitForHTTP(ctx context.Context, get func(context.Context) (int, error)) error {
	var last error
	for {
		code, err := get(ctx)
		if err == nil && code == 200 {
			return nil
		}
		if errors.Is(err, ErrGaveUp) {
			return err
		}
		if err != nil {
			last = err
		} else {
			last = fmt.Errorf("status %d", code)
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Tail returns the last n lines of s.
func Tail(s string, n int) string {
	lines := bytes.Split([]byte(strings.TrimRight(s, "\n")), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// TestBinariesEnv names a directory of binaries built once for a whole run of the suites (make
// builds CAPOV's manager and webhook, the simulator and capi-core there before it runs go
// test): buildPackage links a main package's binary from it, by the package's last path
// element, instead of building it again in every test package.
const TestBinariesEnv = "CAPOV_TEST_BINARIES"

// buildPackage builds a main package of the repository into out, or links the prebuilt binary
// of TestBinariesEnv there.
func buildPackage(ctx context.Context, root, out, pkg string) (string, error) {
	if dir := os.Getenv(TestBinariesEnv); dir != "" {
		prebuilt := filepath.Join(dir, filepath.Base(pkg))
		if _, err := os.Stat(prebuilt); err != nil {
			return "", fmt.Errorf("%s=%s has no %s: %w (make builds it; unset the variable to build here)", TestBinariesEnv, dir, filepath.Base(pkg), err)
		}
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return "", err
		}
		if err := os.Remove(out); err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		abs, err := filepath.Abs(prebuilt)
		if err != nil {
			return "", err
		}
		if err := os.Symlink(abs, out); err != nil {
			return "", fmt.Errorf("linking the prebuilt %s: %w", filepath.Base(pkg), err)
		}
		return out, nil
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return out, nil
}
