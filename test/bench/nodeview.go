package bench

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/capov/capov/test/harness"
)

// nodeViews let many workload clusters share the stack's one workload API server: each Cluster's
// kubeconfig reaches it under its own path (/c/<name>), where lists and watches of Nodes only
// return that cluster's Nodes (a kubernetes.io/hostname selector with its machines' names, which
// the kubelet stand-in gives its Nodes). Without it, the manager's ClusterCache would hold every
// Node of the run once per Cluster: 50 × 5,000 Nodes where a real installation has 50 × 100.
type nodeViews struct {
	upstream *harness.APIFaultProxy
	srv      *http.Server
	url      string

	mu    sync.Mutex
	names map[string][]string
}

// startNodeViews starts the views in front of the API server of cfg.
func startNodeViews(cfg *rest.Config) (*nodeViews, error) {
	// The fault proxy (without rules) authenticates to the API server; the views only rewrite.
	up, err := harness.StartAPIFaultProxy(cfg, 1)
	if err != nil {
		return nil, err
	}
	target, err := url.Parse(up.URL)
	if err != nil {
		up.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		up.Close()
		return nil, fmt.Errorf("listening: %w", err)
	}
	v := &nodeViews{upstream: up, url: "http://" + ln.Addr().String(), names: map[string][]string{}}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			v.rewrite(r.Out)
		},
		// Watches stream: pass every chunk on at once.
		FlushInterval: -1,
	}
	v.srv = &http.Server{Handler: rp, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = v.srv.Serve(ln) }() // ErrServerClosed after close
	return v, nil
}

// rewrite strips the /c/<name> prefix and narrows Node lists and watches to that cluster's Nodes.
func (v *nodeViews) rewrite(out *http.Request) {
	tail, ok := strings.CutPrefix(out.URL.Path, "/c/")
	if !ok {
		return
	}
	name, path, _ := strings.Cut(tail, "/")
	out.URL.Path, out.URL.RawPath = "/"+path, ""
	if out.URL.Path != "/api/v1/nodes" {
		return
	}
	v.mu.Lock()
	names := v.names[name]
	v.mu.Unlock()
	q := out.URL.Query()
	sel := "kubernetes.io/hostname in (" + strings.Join(names, ",") + ")"
	if s := q.Get("labelSelector"); s != "" {
		sel = s + "," + sel
	}
	q.Set("labelSelector", sel)
	out.URL.RawQuery = q.Encode()
}

// kubeconfig registers a cluster's Node names and renders the kubeconfig of its view.
func (v *nodeViews) kubeconfig(cluster string, nodes []string) ([]byte, error) {
	v.mu.Lock()
	v.names[cluster] = nodes
	v.mu.Unlock()
	kc := clientcmdapi.NewConfig()
	kc.Clusters[cluster] = &clientcmdapi.Cluster{Server: v.url + "/c/" + cluster}
	kc.AuthInfos[cluster] = &clientcmdapi.AuthInfo{}
	kc.Contexts[cluster] = &clientcmdapi.Context{Cluster: cluster, AuthInfo: cluster}
	kc.CurrentContext = cluster
	return clientcmd.Write(*kc)
}

func (v *nodeViews) close() {
	_ = v.srv.Close() // only reports listener close errors
	v.upstream.Close()
}
