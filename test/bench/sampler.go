package bench

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/capov/capov/test/harness"
)

// sampler scrapes the manager's /metrics (HTTPS, service-account token) and /proc every two
// seconds and keeps the peaks.
type sampler struct {
	r       *Runner
	proc    *harness.Process
	addr    string
	mu      sync.Mutex
	rss     float64
	heap    float64
	kubeReq float64
	cancel  context.CancelFunc
	done    chan struct{}
}

func newSampler(r *Runner, p *harness.Process, addr string) *sampler {
	return &sampler{r: r, proc: p, addr: addr, done: make(chan struct{})}
}

func (s *sampler) start() {
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() {
		defer close(s.done)
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		for {
			s.sample(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

func (s *sampler) stop() {
	s.cancel()
	<-s.done
}

func (s *sampler) sample(ctx context.Context) {
	rss := readVMHWM(s.proc.PID())
	families, err := scrape(ctx, s.addr, s.r.token)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rss = max(s.rss, rss)
	if err != nil {
		return
	}
	if f, ok := families["go_memstats_heap_alloc_bytes"]; ok && len(f.Metric) > 0 {
		s.heap = max(s.heap, f.Metric[0].GetGauge().GetValue())
	}
	if f, ok := families["rest_client_requests_total"]; ok {
		total := 0.0
		for _, m := range f.Metric {
			total += m.GetCounter().GetValue()
		}
		s.kubeReq = total
	}
}

// kubeRequests returns the manager's API-server requests at the last sample, sampling now.
func (s *sampler) kubeRequests() float64 {
	s.sample(context.Background())
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kubeReq
}

func (s *sampler) peaks() (rss, heap float64) {
	s.sample(context.Background())
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rss, s.heap
}

// scrape reads a Prometheus endpoint served over HTTPS with a self-signed certificate.
func scrape(ctx context.Context, addr, token string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		// The manager's metrics certificate is self-signed (controller-runtime generates it).
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback test scrape
	}}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scraping %s: %s", addr, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}
