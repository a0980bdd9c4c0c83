// Command ovirtsim runs the oVirt Engine REST API simulator as a process,
// for the demo, manual testing and benchmarks:
//
//	go run ./test/ovirtsim/cmd/ovirtsim --listen 127.0.0.1:8443 --image-lock 5s --boot-delay 10s
//
// It prints OVIRT_URL, OVIRT_USERNAME, OVIRT_CA_FILE (unless no file could be written) and
// OVIRT_CA_URL lines on stdout and
// serves until SIGINT or SIGTERM. See docs/ovirtsim.md for all flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/capov/capov/test/ovirtsim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "ovirtsim:", err)
		os.Exit(1)
	}
}

// multiFlag collects a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string { return fmt.Sprint(*m) }

func (m *multiFlag) Set(v string) error {
	*m = append(*m, v)
	return nil
}

// run parses flags, starts the simulator and serves until ctx ends.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("ovirtsim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:8443", "TCP listen address")
	seedPath := fs.String("seed", "", "JSON seed file (default: the built-in demo seed)")
	username := fs.String("username", "", "SSO user name (default: from the seed, else admin@internal)")
	password := fs.String("password", "", "SSO password (default: from the seed, else secret)")
	tokenTTL := fs.Duration("token-ttl", 0, "SSO token lifetime (default: from the seed, else 1h)")
	latency := fs.String("latency", "", "latency of every endpoint: 20ms or 10ms-30ms")
	var faults, certHosts multiFlag
	fs.Var(&faults, "fault", "fault rule METHOD:PATH:STATUS[:RATE[:COUNT[:HANG[:MODE]]]], repeatable (e.g. POST:/vms:500:0.1, POST:/vms:503:1:1::after)")
	fs.Var(&certHosts, "cert-host", "extra host name or IP for the server certificate, repeatable")
	randomSeed := fs.Int64("random-seed", 0, "seed of ids, MACs, faults and latencies (default: from the seed, else 1)")
	caOut := fs.String("ca-out", "", "write the CA PEM to this path (default: a temporary file)")
	imageLock := fs.Duration("image-lock", 0, "how long new VMs stay image_locked")
	diskLock := fs.Duration("disk-lock", 0, "how long a disk stays locked after an update or creation")
	bootDelay := fs.Duration("boot-delay", 0, "time from start to up, split over wait_for_launch and powering_up")
	noGuestAgent := fs.Bool("no-guest-agent", false, "no VM has a guest agent: nothing is reported and powering_up lasts the seed's no_agent_powering_up")
	urlFile := fs.String("url-file", "", "write the API URL to this file once serving")
	var gf guestFlags
	fs.StringVar(&gf.dir, "guests-dir", "", "boot a real guest for every VM that powers on, its disk in this directory (root, private namespaces: docs/ovirtsim.md \"Real guests\")")
	fs.StringVar(&gf.template, "guest-template", "", "with --guests-dir: the base image (test/guest.BuildTemplate's directory)")
	fs.StringVar(&gf.guestInit, "guest-init", "", "with --guests-dir: the guest-init binary (test/guest/cmd/guest-init)")
	fs.StringVar(&gf.bridge, "guest-bridge", "capov0", "with --guests-dir: the bridge the guests' NICs are plugged into")
	fs.DurationVar(&gf.stopTimeout, "guest-stop-timeout", 20*time.Second, "with --guests-dir: how long each guest service may take to stop at a shutdown")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	seed := ovirtsim.DemoSeed()
	if *seedPath != "" {
		var err error
		if seed, err = ovirtsim.LoadSeed(*seedPath); err != nil {
			return err
		}
	}
	b := ovirtsim.NewBuilder().WithSeed(seed).WithListenAddress(*listen).WithCertHosts(certHosts...)
	if set["username"] || set["password"] {
		u, p := seed.Username, seed.Password
		if set["username"] {
			u = *username
		}
		if set["password"] {
			p = *password
		}
		b.WithCredentials(u, p)
	}
	if set["token-ttl"] {
		b.WithTokenTTL(*tokenTTL)
	}
	if set["random-seed"] {
		b.WithRandomSeed(*randomSeed)
	}
	if *latency != "" {
		l, err := ovirtsim.ParseLatency(*latency)
		if err != nil {
			return err
		}
		b.WithLatency(l)
	}
	for _, f := range faults {
		r, err := ovirtsim.ParseFaultRule(f)
		if err != nil {
			return err
		}
		b.WithFault(r)
	}
	tm := seed.Timings
	if set["image-lock"] {
		tm.ImageLock = *imageLock
	}
	if set["disk-lock"] {
		tm.DiskLock = *diskLock
	}
	if set["boot-delay"] {
		tm.WaitForLaunch = *bootDelay / 2
		tm.PoweringUp = *bootDelay - *bootDelay/2
	}
	b.WithTimings(tm)
	if *noGuestAgent {
		b.WithoutGuestAgent()
	}

	sim, err := b.Build()
	if err != nil {
		return err
	}
	defer sim.Close()
	if gf.dir != "" {
		if gf.template == "" || gf.guestInit == "" {
			return errors.New("--guests-dir needs --guest-template and --guest-init")
		}
		stopGuests, err := startGuests(sim, gf, stderr)
		if err != nil {
			return err
		}
		defer stopGuests()
	}

	caPath, removeCA, err := writeCA(*caOut, sim.CAPEM())
	switch {
	case err != nil && *caOut != "":
		return err
	case err != nil:
		// A read-only root (a pod with readOnlyRootFilesystem and no /tmp volume): the CA is
		// still served by the simulator itself, as the Engine serves its own.
		fmt.Fprintf(stderr, "ovirtsim: no CA file (%v); clients fetch the CA from %s\n", err, caURL(sim.URL()))
	case removeCA:
		defer os.Remove(caPath)
	}
	fmt.Fprintf(stdout, "OVIRT_URL=%s\nOVIRT_USERNAME=%s\n", sim.URL(), sim.Username())
	if caPath != "" {
		fmt.Fprintf(stdout, "OVIRT_CA_FILE=%s\n", caPath)
	}
	fmt.Fprintf(stdout, "OVIRT_CA_URL=%s\n", caURL(sim.URL()))
	if *urlFile != "" {
		// Written after stdout, so a script that waits for this file can read
		// the printed lines too; write then rename, so it never reads half a URL.
		tmp := filepath.Join(filepath.Dir(*urlFile), "."+filepath.Base(*urlFile)+".tmp")
		if err := os.WriteFile(tmp, []byte(sim.URL()+"\n"), 0o644); err != nil {
			return fmt.Errorf("writing URL file: %w", err)
		}
		if err := os.Rename(tmp, *urlFile); err != nil {
			return fmt.Errorf("writing URL file: %w", err)
		}
		defer os.Remove(*urlFile)
	}

	<-ctx.Done()
	fmt.Fprintln(stderr, "ovirtsim: shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := sim.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// writeCA writes the CA PEM to path, or, with path empty, to a new temporary file that the
// caller removes on exit (remove true). It returns the path written.
func writeCA(path string, pem []byte) (string, bool, error) {
	remove := false
	if path == "" {
		f, err := os.CreateTemp("", "ovirtsim-ca-*.pem")
		if err != nil {
			return "", false, fmt.Errorf("creating the CA file: %w", err)
		}
		path, remove = f.Name(), true
		if err := f.Close(); err != nil {
			return "", false, fmt.Errorf("closing the CA file: %w", err)
		}
	}
	if err := os.WriteFile(path, pem, 0o644); err != nil { //nolint:gosec // a CA certificate is public
		if remove {
			_ = os.Remove(path)
		}
		return "", false, fmt.Errorf("writing the CA file: %w", err)
	}
	return path, remove, nil
}

// caURL is where the simulator serves its CA without authentication, as the Engine does
// (pki-resource).
func caURL(apiURL string) string {
	return strings.TrimSuffix(strings.TrimSuffix(apiURL, "/"), "/api") +
		"/services/pki-resource?resource=ca-certificate&format=X509-PEM-CA"
}
