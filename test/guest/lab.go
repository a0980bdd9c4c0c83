//go:build linux

package guest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// LabOptions configure the lab network: the oVirt network the guests' NICs are on.
type LabOptions struct {
	// Dir holds dnsmasq's leases, log and pid file.
	Dir string
	// Bridge is the bridge's name (default "capov0").
	Bridge string
	// Prefix is the network's first three octets (default "10.77.0"): the bridge is .1, DHCP
	// gives .10 to .250.
	Prefix string
}

// Lab is the bridge of the guests' network with its DHCP and DNS server (dnsmasq), in the
// calling process's network namespace, which must be a private one (hack/e2e.sh).
type Lab struct {
	o       LabOptions
	dnsmasq *exec.Cmd
	exited  chan struct{}
}

// Address is the bridge's address: the guests' gateway and DNS server, and where a load
// balancer for their API servers listens.
func (l *Lab) Address() string { return l.o.Prefix + ".1" }

// Prefix is the lab network's first three octets ("10.77.0").
func (l *Lab) Prefix() string { return l.o.Prefix }

// Bridge is the bridge's name.
func (l *Lab) Bridge() string { return l.o.Bridge }

// NewLab creates the bridge and starts dnsmasq on it.
func NewLab(ctx context.Context, o LabOptions) (*Lab, error) {
	if o.Dir == "" {
		return nil, errors.New("lab: Dir is required")
	}
	if o.Bridge == "" {
		o.Bridge = "capov0"
	}
	if o.Prefix == "" {
		o.Prefix = "10.77.0"
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	l := &Lab{o: o}
	_ = exec.CommandContext(ctx, "ip", "link", "del", o.Bridge).Run() // a previous lab in this namespace
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"link", "add", o.Bridge, "type", "bridge"},
		{"addr", "add", l.Address() + "/24", "dev", o.Bridge},
		{"link", "set", o.Bridge, "up"},
		// The namespace's only way anywhere is the lab: programs that pick their address from
		// the default route (kube-apiserver's advertise address) find the bridge's.
		{"route", "replace", "default", "dev", o.Bridge},
	} {
		if out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("lab: ip %s: %w: %s", strings.Join(args, " "), err, out)
		}
	}
	leases := filepath.Join(o.Dir, "dnsmasq.leases")
	_ = os.Remove(leases)
	cmd := exec.Command("dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null", "--user=root",
		"--interface="+o.Bridge, "--bind-interfaces", "--listen-address="+l.Address(),
		fmt.Sprintf("--dhcp-range=%s.10,%s.250,255.255.255.0,12h", o.Prefix, o.Prefix),
		"--dhcp-authoritative", "--dhcp-leasefile="+leases,
		// DNS for the lab only: the guests' host names from their DHCP requests, nothing
		// forwarded (the lab has no way out).
		"--no-resolv", "--no-hosts", "--domain=lab", "--local=/lab/", "--expand-hosts",
		"--log-dhcp", "--log-facility="+filepath.Join(o.Dir, "dnsmasq.log"),
		"--pid-file="+filepath.Join(o.Dir, "dnsmasq.pid"))
	out, err := os.Create(filepath.Join(o.Dir, "dnsmasq.out"))
	if err != nil {
		return nil, err
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("lab: starting dnsmasq (Debian's dnsmasq-base): %w", err)
	}
	l.dnsmasq, l.exited = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); close(l.exited) }()
	return l, nil
}

// Leases returns the DHCP leases: IP by MAC address.
func (l *Lab) Leases() map[string]string {
	out := map[string]string{}
	f, err := os.Open(filepath.Join(l.o.Dir, "dnsmasq.leases"))
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) >= 3 {
			out[fields[1]] = fields[2]
		}
	}
	return out
}

// Close stops dnsmasq and deletes the bridge.
func (l *Lab) Close() {
	if l.dnsmasq != nil && l.dnsmasq.Process != nil {
		_ = l.dnsmasq.Process.Signal(syscall.SIGTERM)
		select {
		case <-l.exited:
		case <-time.After(5 * time.Second):
			_ = l.dnsmasq.Process.Kill()
			<-l.exited
		}
	}
	_ = exec.Command("ip", "link", "del", l.o.Bridge).Run()
}

// LoadBalancer is a TCP load balancer on the lab's address: the control-plane endpoint users
// put in front of their control-plane VMs. Its backends are every lab address holding a DHCP
// lease, on the backend port, that accepts a connection (its health check).
type LoadBalancer struct {
	lab         *Lab
	ln          net.Listener
	backendPort int
	mu          sync.Mutex
	next        int
	wg          sync.WaitGroup
}

// NewLoadBalancer listens on <lab address>:port and forwards to port on the guests.
func NewLoadBalancer(lab *Lab, port int) (*LoadBalancer, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(lab.Address(), fmt.Sprint(port)))
	if err != nil {
		return nil, fmt.Errorf("load balancer: %w", err)
	}
	lb := &LoadBalancer{lab: lab, ln: ln, backendPort: port}
	lb.wg.Add(1)
	go lb.serve()
	return lb, nil
}

// Addr is the load balancer's host:port.
func (lb *LoadBalancer) Addr() string { return lb.ln.Addr().String() }

// Close stops accepting; open connections end with their peers.
func (lb *LoadBalancer) Close() error {
	err := lb.ln.Close()
	lb.wg.Wait()
	return err
}

func (lb *LoadBalancer) serve() {
	defer lb.wg.Done()
	for {
		c, err := lb.ln.Accept()
		if err != nil {
			return
		}
		go lb.forward(c)
	}
}

// forward connects the client to the next backend that accepts, in turn.
func (lb *LoadBalancer) forward(c net.Conn) {
	defer c.Close()
	var ips []string
	for _, ip := range lb.lab.Leases() {
		ips = append(ips, ip)
	}
	sort.Strings(ips)
	if len(ips) == 0 {
		return
	}
	lb.mu.Lock()
	start := lb.next
	lb.next++
	lb.mu.Unlock()
	var b net.Conn
	for i := range ips {
		ip := ips[(start+i)%len(ips)]
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(ip, fmt.Sprint(lb.backendPort)), time.Second)
		if err == nil {
			b = conn
			break
		}
	}
	if b == nil {
		return
	}
	defer b.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(b, c); closeWrite(b); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, b); closeWrite(c); done <- struct{}{} }()
	<-done
	<-done
}

func closeWrite(c net.Conn) {
	if t, ok := c.(*net.TCPConn); ok {
		_ = t.CloseWrite()
	}
}
