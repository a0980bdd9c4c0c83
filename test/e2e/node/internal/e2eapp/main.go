// Command e2eapp is the workload of the node smoke test (test/e2e/node), one static binary
// for every role, run as uid 65532 like the product images:
//
//	e2eapp serve -addr :8080 -secret /etc/secret/key     HTTP; /healthz is 200 once the secret is readable
//	e2eapp get URL                                       GET with retries; prints the body, exit 0 on 200
//	e2eapp webhook -addr :8443 -cert-dir /certs          TLS validating webhook: denies objects named deny-me
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: e2eapp serve|get|webhook [flags]")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(ctx, os.Args[2:])
	case "get":
		err = get(ctx, os.Args[2:])
	case "webhook":
		err = webhook(ctx, os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2eapp:", err)
		os.Exit(1)
	}
}

// identity is who the process runs as, for the test to compare with the pod's securityContext.
func identity() string {
	groups, _ := os.Getgroups()
	return fmt.Sprintf("uid=%d gid=%d groups=%v", os.Getuid(), os.Getgid(), groups)
}

func serve(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	addr := fs.String("addr", ":8080", "listen address")
	secret := fs.String("secret", "", "file to read on every request")
	if err := fs.Parse(args); err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if _, err := os.ReadFile(*secret); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		b, err := os.ReadFile(*secret)
		if err != nil {
			http.Error(w, fmt.Sprintf("%s: %v", identity(), err), http.StatusInternalServerError)
			return
		}
		host, _ := os.Hostname()
		fmt.Fprintf(w, "%s host=%s secret=%q\n", identity(), host, b)
	})
	fmt.Println("serving on", *addr, "as", identity())
	return run(ctx, &http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}, nil)
}

func get(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return errors.New("usage: e2eapp get URL")
	}
	client := &http.Client{Timeout: 3 * time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for attempt := 1; ; attempt++ {
		body, err := getOnce(ctx, client, args[0])
		if err == nil {
			fmt.Print(body)
			return nil
		}
		// A Service can refuse connections for about a second after its pod is Ready, while
		// kube-proxy catches up; DNS can lag the same way.
		fmt.Fprintf(os.Stderr, "attempt %d: %v\n", attempt, err)
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func getOnce(ctx context.Context, client *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s: %s", url, resp.Status, b)
	}
	return string(b), nil
}

// admissionReview is the part of admission.k8s.io/v1 AdmissionReview the webhook reads and writes.
type admissionReview struct {
	APIVersion string             `json:"apiVersion"`
	Kind       string             `json:"kind"`
	Request    *admissionRequest  `json:"request,omitempty"`
	Response   *admissionResponse `json:"response,omitempty"`
}

type admissionRequest struct {
	UID  string `json:"uid"`
	Name string `json:"name"`
}

type admissionResponse struct {
	UID     string  `json:"uid"`
	Allowed bool    `json:"allowed"`
	Status  *status `json:"status,omitempty"`
}

type status struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func webhook(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("webhook", flag.ContinueOnError)
	addr := fs.String("addr", ":8443", "listen address")
	certDir := fs.String("cert-dir", "/certs", "directory with tls.crt and tls.key")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(*certDir, "tls.crt"), filepath.Join(*certDir, "tls.key"))
	if err != nil {
		return fmt.Errorf("loading the serving certificate as %s: %w", identity(), err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/validate", func(w http.ResponseWriter, r *http.Request) {
		var review admissionReview
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "no AdmissionReview", http.StatusBadRequest)
			return
		}
		resp := &admissionResponse{UID: review.Request.UID, Allowed: review.Request.Name != "deny-me"}
		if !resp.Allowed {
			resp.Status = &status{Code: http.StatusForbidden, Message: "e2eapp denies objects named deny-me"}
		}
		fmt.Printf("validated %q: allowed=%v\n", review.Request.Name, resp.Allowed)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(admissionReview{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview", Response: resp})
	})
	srv := &http.Server{
		Addr:              *addr,
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
	}
	fmt.Println("webhook serving on", *addr, "as", identity())
	return run(ctx, srv, srv.TLSConfig)
}

// run serves until ctx ends (SIGTERM), then shuts down.
func run(ctx context.Context, srv *http.Server, tlsConfig *tls.Config) error {
	errc := make(chan error, 1)
	go func() {
		if tlsConfig != nil {
			errc <- srv.ListenAndServeTLS("", "")
		} else {
			errc <- srv.ListenAndServe()
		}
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(shutdown)
	}
}
