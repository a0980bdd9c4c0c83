package sdk

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/pkg/ovirt"
)

// TestUserAgentNamesCAPOVToTheEngine puts a recording TLS front end before the simulator and
// reads the User-Agent of every request the SDK sends.
func TestUserAgentNamesCAPOVToTheEngine(t *testing.T) {
	sim := newSim(t)
	var mu sync.Mutex
	var seen []string // "<path> <user agent>"
	front := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.Path+" "+r.UserAgent())
		mu.Unlock()
		sim.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: front.Certificate().Raw})
	sdkAgent := "GoSDK/" + ovirtsdk.SDK_VERSION

	tests := []struct {
		name      string
		userAgent string
		wantAPI   string
	}{
		{"without one configured the SDK's own is sent", "", sdkAgent},
		{"a configured one is sent to the API, followed by the SDK's", "capov-manager/v9.9.9 (linux/amd64) capov/1a2b3c4",
			"capov-manager/v9.9.9 (linux/amd64) capov/1a2b3c4 " + sdkAgent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			mu.Lock()
			seen = nil
			mu.Unlock()
			e := newEnv(t, sim, Options{UserAgent: tt.userAgent})
			e.cfg.URL = front.URL + "/ovirt-engine/api"
			e.cfg.TLS = ovirt.TLS{CAPEM: caPEM}
			c, err := e.f.ForProvider(context.Background(), e.cfg)
			g.Expect(err).NotTo(HaveOccurred())
			_, err = c.Ping(context.Background())
			g.Expect(err).NotTo(HaveOccurred())
			_, err = c.FindCluster(context.Background(), "Default")
			g.Expect(err).NotTo(HaveOccurred())

			mu.Lock()
			defer mu.Unlock()
			var api, sso int
			for _, s := range seen {
				path, agent, _ := strings.Cut(s, " ")
				switch {
				case strings.HasPrefix(path, "/ovirt-engine/api"):
					api++
					g.Expect(agent).To(Equal(tt.wantAPI), path)
				case strings.HasPrefix(path, "/ovirt-engine/sso"):
					sso++
					// The SDK builds the token request without custom headers.
					g.Expect(agent).To(Equal(sdkAgent), path)
				}
			}
			g.Expect(api).To(BeNumerically(">=", 2), "the login test and the calls")
			g.Expect(sso).To(BeNumerically(">=", 1), "one login")
		})
	}
}
