//go:build linux

package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/capov/capov/test/testpki"
)

// Options configure Up.
type Options struct {
	// WorkDir holds everything of the node that is not on a tmpfs: certificates, kubeconfigs,
	// configuration files, containerd's content store and snapshots, component and pod logs.
	// It must exist and be on a file system overlayfs accepts as an upper directory (ext4,
	// xfs). The caller removes it; after Down nothing is mounted below it.
	WorkDir string
	// Assets are directories searched, in order, for the binaries: etcd and kube-apiserver
	// (hack/envtest-assets.sh), kubelet, kube-controller-manager, kube-scheduler, kube-proxy,
	// coredns and pause (hack/node-assets.sh). containerd, ctr and runc are looked up in the
	// Assets, then in PATH (Debian's packages, hack/e2e-prereqs.sh).
	Assets []string
	// Out receives progress lines (one per step, with timings). Nil discards them.
	Out io.Writer
	// NodeName is the node's name; DefaultNodeName when empty.
	NodeName string
	// NodeIP is the node's InternalIP, a /24 host address; DefaultNodeIP when empty.
	NodeIP string
}

// Cluster is a running single-node cluster. Its methods are safe for concurrent use.
type Cluster struct {
	opts      Options
	log       logr.Logger
	paths     paths
	bins      map[string]string
	caPEM     []byte
	restCfg   *rest.Config
	clientset kubernetes.Interface
	cgroup    *cgroupTree
	mounts    *mountSet
	netReady  bool

	mu    sync.Mutex
	procs []*process

	downOnce sync.Once
	downErr  error
}

// paths are the files and directories of a node.
type paths struct {
	work, pki, etc, logs, podLogs, images, ipam, cniConf, containerd, etcdData, sysctls string
}

func newPaths(work string) paths {
	return paths{
		work:       work,
		pki:        filepath.Join(work, "pki"),
		etc:        filepath.Join(work, "etc"),
		logs:       filepath.Join(work, "logs"),
		podLogs:    filepath.Join(work, "logs", "pods"),
		images:     filepath.Join(work, "images"),
		ipam:       filepath.Join(work, "cni", "ipam"),
		cniConf:    filepath.Join(work, "cni", "net.d"),
		containerd: filepath.Join(work, "containerd"),
		// etcd on the tmpfs: nothing of it is worth keeping, and fsync on a busy disk is
		// the slowest part of an API write.
		etcdData: filepath.Join("/run", "capov-e2e", "etcd"),
		sysctls:  filepath.Join(work, "sysctl"),
	}
}

// nodeBinary is a binary a node runs, and whether PATH is searched after the Assets (the
// Debian ones).
type nodeBinary struct {
	name      string
	allowPATH bool
}

func nodeBinaries() []nodeBinary {
	return []nodeBinary{
		{"etcd", false}, {"kube-apiserver", false}, {"kubelet", false}, {"kube-controller-manager", false},
		{"kube-scheduler", false}, {"kube-proxy", false}, {"coredns", false}, {"pause", false},
		{"containerd", true}, {"ctr", true}, {"runc", true}, {"containerd-shim-runc-v2", true},
		{"iptables", true}, {"ip", true},
	}
}

// Up builds and starts a single-node cluster in the private namespaces of this process:
// etcd, kube-apiserver, containerd, kubelet, kube-controller-manager, kube-scheduler,
// kube-proxy and CoreDNS, and returns once the node is Ready, the default service account
// exists and CoreDNS answers. It refuses to run outside private namespaces (CheckIsolation).
// On failure it writes the tail of every component log to Out, tears down what it started
// and returns the error. One node per process at a time (the namespaces, the cgroup name and
// the fixed ports are the process's); after Down another Up works.
func Up(ctx context.Context, opts Options) (*Cluster, error) {
	if err := CheckIsolation(); err != nil {
		return nil, err
	}
	if opts.WorkDir == "" {
		return nil, errors.New("node.Up: Options.WorkDir is required")
	}
	if opts.NodeName == "" {
		opts.NodeName = DefaultNodeName
	}
	if opts.NodeIP == "" {
		opts.NodeIP = DefaultNodeIP
	}
	if ip := net.ParseIP(opts.NodeIP); ip == nil || ip.To4() == nil {
		return nil, fmt.Errorf("node.Up: NodeIP %q is no IPv4 address", opts.NodeIP)
	}
	out := io.Discard
	if opts.Out != nil {
		out = &syncWriter{w: opts.Out}
	}
	work, err := filepath.Abs(opts.WorkDir)
	if err != nil {
		return nil, fmt.Errorf("node.Up: %w", err)
	}
	c := &Cluster{
		opts:  opts,
		log:   funcr.New(func(prefix, args string) { fmt.Fprintln(out, prefix, args) }, funcr.Options{}).WithName("node"),
		paths: newPaths(work),
	}
	if err := c.up(ctx); err != nil {
		c.DumpLogs(out, 30)
		downCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if derr := c.Down(downCtx); derr != nil {
			err = errors.Join(err, fmt.Errorf("tearing down after the failure: %w", derr))
		}
		return nil, err
	}
	return c, nil
}

func (c *Cluster) up(ctx context.Context) error {
	start := time.Now()
	step := func(msg string) { c.log.Info(msg, "elapsed", time.Since(start).Round(time.Millisecond).String()) }

	bins, err := findBinaries(c.opts.Assets)
	if err != nil {
		return err
	}
	c.bins = bins
	if removed, err := removeStaleCgroups(ctx); err != nil {
		return fmt.Errorf("removing the cgroups of earlier runs: %w", err)
	} else if len(removed) > 0 {
		c.log.Info("Removed the cgroups of earlier runs", "cgroups", removed)
	}
	// A work directory used before (E2E_WORKDIR) starts afresh: old IPAM leases, images and
	// logs would mislead. Nothing is mounted below it any more: its namespaces died with it.
	for _, d := range []string{c.paths.pki, c.paths.etc, c.paths.logs, filepath.Dir(c.paths.ipam), c.paths.images, c.paths.containerd, c.paths.sysctls, filepath.Join(c.paths.work, "overlay")} {
		if err := os.RemoveAll(d); err != nil {
			return fmt.Errorf("clearing %s of an earlier run: %w", d, err)
		}
	}
	for _, d := range []string{c.paths.pki, c.paths.etc, c.paths.logs, c.paths.podLogs, c.paths.images, c.paths.ipam, c.paths.cniConf, c.paths.containerd} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", d, err)
		}
	}
	if c.mounts, err = setupMounts(c.paths.work, c.paths.sysctls); err != nil {
		return err
	}
	if err := os.MkdirAll(c.paths.etcdData, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", c.paths.etcdData, err)
	}
	c.netReady = true
	if err := setupNetwork(ctx, c.opts.NodeIP); err != nil {
		return err
	}
	if c.cgroup, err = newCgroupTree(); err != nil {
		return err
	}
	files, err := c.writeFiles()
	if err != nil {
		return err
	}
	step("Prepared namespaces, cgroups, certificates and configuration")

	if err := c.start("etcd", "--data-dir="+c.paths.etcdData, "--listen-client-urls="+etcdClientURL,
		"--advertise-client-urls="+etcdClientURL, "--listen-peer-urls=http://127.0.0.1:2380",
		"--initial-advertise-peer-urls=http://127.0.0.1:2380", "--initial-cluster=default=http://127.0.0.1:2380",
		"--unsafe-no-fsync=true", "--log-level=warn"); err != nil {
		return err
	}
	if err := c.start("containerd", "--config="+files.containerd); err != nil {
		return err
	}
	if err := c.start("kube-apiserver", c.apiserverArgs(files)...); err != nil {
		return err
	}

	// The images go in while the API server starts. Up returns only after the import has
	// ended, whatever happens, so that nothing logs after it.
	images := make(chan error, 1)
	imagesCtx, cancelImages := context.WithCancel(ctx)
	go func() { images <- c.importNodeImages(imagesCtx) }()
	imported := false
	defer func() {
		cancelImages()
		if !imported {
			if err := <-images; err != nil {
				c.log.V(1).Info("Image import ended with the failure of Up", "error", err.Error())
			}
		}
	}()

	if err := c.waitFor(ctx, "the API server to be ready", 200*time.Millisecond, c.apiserverReady); err != nil {
		return err
	}
	step("API server ready")
	for _, s := range []struct {
		name string
		args []string
	}{
		{"kube-controller-manager", c.controllerManagerArgs(files)},
		{"kube-scheduler", []string{"--kubeconfig=" + files.schedulerKubeconfig, "--authentication-kubeconfig=" + files.schedulerKubeconfig,
			"--authorization-kubeconfig=" + files.schedulerKubeconfig, "--leader-elect=false", "--bind-address=127.0.0.1"}},
		{"kube-proxy", []string{"--config=" + files.kubeProxy}},
	} {
		if err := c.start(s.name, s.args...); err != nil {
			return err
		}
	}
	imported = true
	if err := <-images; err != nil {
		return err
	}
	step("Imported the pause and CoreDNS images")
	if err := c.start("kubelet", "--config="+files.kubelet, "--kubeconfig="+files.kubeletKubeconfig,
		"--root-dir="+kubeletRootDir, "--hostname-override="+c.opts.NodeName, "--node-ip="+c.opts.NodeIP); err != nil {
		return err
	}
	cs := c.clientset
	if err := applyCoreDNS(ctx, cs); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "the node to be Ready", 200*time.Millisecond, func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, c.opts.NodeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		return nodeReady(n), nil
	}); err != nil {
		return err
	}
	step("Node Ready")
	if err := c.waitFor(ctx, "the default service account", 200*time.Millisecond, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	}); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "CoreDNS to be available", 200*time.Millisecond, func(ctx context.Context) (bool, error) {
		d, err := cs.AppsV1().Deployments(metav1.NamespaceSystem).Get(ctx, "coredns", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return deploymentAvailable(d), nil
	}); err != nil {
		return err
	}
	step("Cluster up (CoreDNS available)")
	return nil
}

// syncWriter serialises writes: the node logs from more than one goroutine.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// findBinaries locates every binary a node runs.
func findBinaries(assets []string) (map[string]string, error) {
	found := map[string]string{}
	var missing []string
	for _, b := range nodeBinaries() {
		for _, dir := range assets {
			p := filepath.Join(dir, b.name)
			if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
				found[b.name] = p
				break
			}
		}
		if _, ok := found[b.name]; !ok && b.allowPATH {
			if p, err := exec.LookPath(b.name); err == nil {
				found[b.name] = p
			}
		}
		if _, ok := found[b.name]; !ok {
			missing = append(missing, b.name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("node binaries not found: %s (searched %v, then PATH for the Debian ones); build them with hack/envtest-assets.sh and hack/node-assets.sh, install the others with hack/e2e-prereqs.sh",
			strings.Join(missing, ", "), assets)
	}
	if _, err := os.Stat(filepath.Join(cniBinDir, "bridge")); err != nil {
		return nil, fmt.Errorf("the CNI plugins are missing in %s (Debian's containernetworking-plugins; hack/e2e-prereqs.sh): %w", cniBinDir, err)
	}
	return found, nil
}

// nodeFiles are the paths writeFiles produced.
type nodeFiles struct {
	ca, caKey, saPub, saKey                    string
	apiserverCert, apiserverKey                string
	kubeletClientCert, kubeletClientKey        string
	admin, controllerManagerKubeconfig         string
	schedulerKubeconfig, kubeletKubeconfig     string
	kubeProxyKubeconfig                        string
	containerd, kubelet, kubeProxy, resolvConf string
}

// writeFiles generates the PKI, the kubeconfigs and the configuration files.
func (c *Cluster) writeFiles() (nodeFiles, error) {
	var f nodeFiles
	ca, err := testpki.NewAuthority("capov-e2e-ca")
	if err != nil {
		return f, err
	}
	c.caPEM = ca.CertPEM
	f.ca, f.caKey = filepath.Join(c.paths.pki, "ca.crt"), filepath.Join(c.paths.pki, "ca.key")
	if err := os.WriteFile(f.ca, ca.CertPEM, 0o644); err != nil {
		return f, fmt.Errorf("writing %s: %w", f.ca, err)
	}
	if err := os.WriteFile(f.caKey, ca.KeyPEM, 0o600); err != nil {
		return f, fmt.Errorf("writing %s: %w", f.caKey, err)
	}
	if f.saPub, f.saKey, err = writeServiceAccountKeys(c.paths.pki); err != nil {
		return f, err
	}
	nodeIP := net.ParseIP(c.opts.NodeIP)
	serving, err := ca.Issue(testpki.Request{
		CommonName: "kube-apiserver",
		DNSNames: []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc." + ClusterDomain, "localhost", c.opts.NodeName},
		IPs: []net.IP{net.ParseIP(KubernetesServiceIP), nodeIP, net.IPv4(127, 0, 0, 1)},
	})
	if err != nil {
		return f, err
	}
	if f.apiserverCert, f.apiserverKey, err = writePair(serving, c.paths.pki, "apiserver"); err != nil {
		return f, err
	}
	kubeletClient, err := ca.Issue(testpki.Request{CommonName: "kube-apiserver-kubelet-client", Organizations: []string{"system:masters"}, Client: true})
	if err != nil {
		return f, err
	}
	if f.kubeletClientCert, f.kubeletClientKey, err = writePair(kubeletClient, c.paths.pki, "apiserver-kubelet-client"); err != nil {
		return f, err
	}
	kubeletServing, err := ca.Issue(testpki.Request{CommonName: c.opts.NodeName, DNSNames: []string{c.opts.NodeName}, IPs: []net.IP{nodeIP}})
	if err != nil {
		return f, err
	}
	kubeletCert, kubeletKey, err := writePair(kubeletServing, c.paths.pki, "kubelet")
	if err != nil {
		return f, err
	}

	server := "https://" + net.JoinHostPort(c.opts.NodeIP, strconv.Itoa(apiserverPort))
	for _, k := range []struct {
		path *string
		file string
		cn   string
		orgs []string
	}{
		{&f.admin, "admin.kubeconfig", "capov-e2e-admin", []string{"system:masters"}},
		{&f.controllerManagerKubeconfig, "controller-manager.kubeconfig", "system:kube-controller-manager", nil},
		{&f.schedulerKubeconfig, "scheduler.kubeconfig", "system:kube-scheduler", nil},
		{&f.kubeletKubeconfig, "kubelet.kubeconfig", "system:node:" + c.opts.NodeName, []string{"system:nodes"}},
		{&f.kubeProxyKubeconfig, "kube-proxy.kubeconfig", "system:kube-proxy", nil},
	} {
		pair, err := ca.Issue(testpki.Request{CommonName: k.cn, Organizations: k.orgs, Client: true})
		if err != nil {
			return f, err
		}
		*k.path = filepath.Join(c.paths.pki, k.file)
		if err := writeKubeconfig(*k.path, server, ca.CertPEM, k.cn, pair); err != nil {
			return f, err
		}
	}
	if c.restCfg, err = clientcmd.BuildConfigFromFlags("", f.admin); err != nil {
		return f, fmt.Errorf("reading the admin kubeconfig: %w", err)
	}
	c.restCfg.QPS, c.restCfg.Burst = 50, 100
	if c.clientset, err = kubernetes.NewForConfig(c.restCfg); err != nil {
		return f, fmt.Errorf("making a client: %w", err)
	}

	f.containerd = filepath.Join(c.paths.etc, "containerd.toml")
	if err := writeTemplate(f.containerd, containerdConfig, map[string]string{
		"Root": filepath.Join(c.paths.containerd, "root"), "CNIConfDir": c.paths.cniConf,
	}); err != nil {
		return f, err
	}
	if err := writeTemplate(filepath.Join(c.paths.cniConf, "10-capov-e2e.conflist"), cniConfig, map[string]string{"IPAMDir": c.paths.ipam}); err != nil {
		return f, err
	}
	// Pods with dnsPolicy Default (CoreDNS) get this; nothing outside the node answers.
	f.resolvConf = filepath.Join(c.paths.etc, "resolv.conf")
	if err := os.WriteFile(f.resolvConf, []byte("nameserver 127.0.0.1\n"), 0o644); err != nil {
		return f, fmt.Errorf("writing %s: %w", f.resolvConf, err)
	}
	f.kubelet = filepath.Join(c.paths.etc, "kubelet.yaml")
	if err := writeTemplate(f.kubelet, kubeletConfig, map[string]string{
		"CgroupRoot": c.cgroup.name, "ResolvConf": f.resolvConf, "PodLogsDir": c.paths.podLogs, "NodeIP": c.opts.NodeIP,
		"TLSCert": kubeletCert, "TLSKey": kubeletKey, "CA": f.ca,
	}); err != nil {
		return f, err
	}
	f.kubeProxy = filepath.Join(c.paths.etc, "kube-proxy.yaml")
	if err := writeTemplate(f.kubeProxy, kubeProxyConfig, map[string]string{
		"Kubeconfig": f.kubeProxyKubeconfig, "NodeName": c.opts.NodeName, "NodeIP": c.opts.NodeIP,
	}); err != nil {
		return f, err
	}
	return f, nil
}

func (c *Cluster) apiserverArgs(f nodeFiles) []string {
	return []string{
		"--etcd-servers=" + etcdClientURL,
		"--bind-address=0.0.0.0",
		"--secure-port=" + strconv.Itoa(apiserverPort),
		"--advertise-address=" + c.opts.NodeIP,
		"--cert-dir=" + filepath.Join(c.paths.pki, "apiserver-generated"),
		"--tls-cert-file=" + f.apiserverCert,
		"--tls-private-key-file=" + f.apiserverKey,
		"--client-ca-file=" + f.ca,
		"--service-account-issuer=https://kubernetes.default.svc." + ClusterDomain,
		"--service-account-key-file=" + f.saPub,
		"--service-account-signing-key-file=" + f.saKey,
		"--service-cluster-ip-range=" + ServiceCIDR,
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true",
		"--kubelet-client-certificate=" + f.kubeletClientCert,
		"--kubelet-client-key=" + f.kubeletClientKey,
		"--kubelet-certificate-authority=" + f.ca,
		// Without it logs, exec and port-forward try to resolve the node name by DNS.
		"--kubelet-preferred-address-types=InternalIP,Hostname",
		// The API server reaches webhook and aggregated-API Services through their endpoints
		// (pod IPs on the bridge) rather than through ClusterIPs.
		"--enable-aggregator-routing=true",
		"--profiling=false",
	}
}

func (c *Cluster) controllerManagerArgs(f nodeFiles) []string {
	return []string{
		"--kubeconfig=" + f.controllerManagerKubeconfig,
		"--authentication-kubeconfig=" + f.controllerManagerKubeconfig,
		"--authorization-kubeconfig=" + f.controllerManagerKubeconfig,
		"--client-ca-file=" + f.ca,
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + f.saKey,
		"--root-ca-file=" + f.ca,
		"--cluster-signing-cert-file=" + f.ca,
		"--cluster-signing-key-file=" + f.caKey,
		"--cluster-name=capov-e2e",
		"--controllers=*",
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
	}
}

// importNodeImages waits for containerd, then builds and imports the pause and CoreDNS
// images from the node assets.
func (c *Cluster) importNodeImages(ctx context.Context) error {
	if err := c.waitFor(ctx, "containerd", 100*time.Millisecond, func(ctx context.Context) (bool, error) {
		return exec.CommandContext(ctx, c.bins["ctr"], "--address", containerdSocket, "version").Run() == nil, nil
	}); err != nil {
		return err
	}
	platform := "linux/" + runtime.GOARCH
	for _, img := range []Image{
		{Ref: PauseImage, Path: "/pause", Binaries: map[string]string{platform: c.bins["pause"]}},
		{Ref: CoreDNSImage, Path: "/coredns", Binaries: map[string]string{platform: c.bins["coredns"]}},
	} {
		archive := filepath.Join(c.paths.images, strings.NewReplacer("/", "_", ":", "_").Replace(img.Ref)+".tar")
		if err := WriteImageArchive(archive, img); err != nil {
			return err
		}
		if err := c.ImportImage(ctx, archive); err != nil {
			return err
		}
	}
	return nil
}

// ImportImage imports an image archive into the node's containerd, where the kubelet finds it
// (`ctr -n k8s.io images import --all-platforms`). Docker archives and OCI image layouts in a
// tar work, single- or multi-platform; the names come from index.json's
// io.containerd.image.name or org.opencontainers.image.ref.name annotations (a full
// reference), or from a docker archive's RepoTags. An OCI image is also recorded by digest
// (repo@sha256:..., as a pull records it), so that a pod may pin it. Pods must use those names
// with imagePullPolicy IfNotPresent or Never: nothing can be pulled.
func (c *Cluster) ImportImage(ctx context.Context, archive string) error {
	imported, err := archiveImages(archive)
	if err != nil {
		return fmt.Errorf("importing %s: %w", archive, err)
	}
	var names []string
	for _, i := range imported {
		if !strings.ContainsAny(i.name, "/:@") {
			return fmt.Errorf("importing %s: the image is named %q, no full reference: set the org.opencontainers.image.ref.name annotation of index.json to the whole reference (e.g. example.com/app:v1)", archive, i.name)
		}
		names = append(names, i.name)
	}
	start := time.Now()
	ctr := func(args ...string) error {
		cmd := exec.CommandContext(ctx, c.bins["ctr"], append([]string{"--address", containerdSocket, "-n", containerdNamespace}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	if err := ctr("images", "import", "--all-platforms", archive); err != nil {
		return fmt.Errorf("importing %s: %w", archive, err)
	}
	// A pull records the image under its reference by digest too (repo@sha256:...), which is how
	// a pod that pins its image by digest finds it; an import records only the name.
	for _, i := range imported {
		if ref := i.digestRef(); ref != "" {
			if err := ctr("images", "tag", "--force", i.name, ref); err != nil {
				return fmt.Errorf("importing %s: %w", archive, err)
			}
			names = append(names, ref)
		}
	}
	listed, err := exec.CommandContext(ctx, c.bins["ctr"], "--address", containerdSocket, "-n", containerdNamespace, "images", "ls", "-q").Output()
	if err != nil {
		return fmt.Errorf("listing images after importing %s: %w", archive, err)
	}
	have := map[string]bool{}
	for _, l := range strings.Fields(string(listed)) {
		have[l] = true
	}
	for _, n := range names {
		if !have[n] {
			return fmt.Errorf("importing %s: containerd has no image %q afterwards (it has %v)", archive, n, strings.Fields(string(listed)))
		}
	}
	c.log.Info("Imported image", "archive", filepath.Base(archive), "images", names, "elapsed", time.Since(start).Round(time.Millisecond).String())
	return nil
}

// apiserverReady reports whether /readyz answers ok.
func (c *Cluster) apiserverReady(ctx context.Context) (bool, error) {
	body, err := c.clientset.Discovery().RESTClient().Get().AbsPath("/readyz").Timeout(2 * time.Second).DoRaw(ctx)
	return err == nil && strings.TrimSpace(string(body)) == "ok", nil
}

// waitFor polls check until it reports true, ctx ends, or a component exits (then the error
// names it and quotes its log).
func (c *Cluster) waitFor(ctx context.Context, what string, every time.Duration, check func(context.Context) (bool, error)) error {
	var last error
	for {
		if p := c.exited(); p != nil {
			exit := p.err
			if exit == nil {
				exit = errors.New("exit status 0")
			}
			return fmt.Errorf("waiting for %s: %s exited (%w); its log ends with:\n%s", what, p.name, exit, tail(p.logPath, 20))
		}
		ok, err := check(ctx)
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("waiting for %s: %w (last error: %w)", what, ctx.Err(), last)
			}
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(every):
		}
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

func deploymentAvailable(d *appsv1.Deployment) bool {
	return d.Status.ObservedGeneration >= d.Generation && d.Status.AvailableReplicas >= ptrValue(d.Spec.Replicas, 1)
}

func ptrValue[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// Kubeconfig is the path of a kubeconfig with cluster-admin rights (O=system:masters). It
// reaches the API server on the node IP, so only from inside the namespaces.
func (c *Cluster) Kubeconfig() string { return filepath.Join(c.paths.pki, "admin.kubeconfig") }

// RestConfig is a copy of the admin client configuration.
func (c *Cluster) RestConfig() *rest.Config { return rest.CopyConfig(c.restCfg) }

// CACert is the PEM certificate of the cluster CA (it signs the API server's serving certificate).
func (c *Cluster) CACert() []byte { return append([]byte(nil), c.caPEM...) }

// NodeIP is the node's InternalIP (also the API server's address).
func (c *Cluster) NodeIP() string { return c.opts.NodeIP }

// NodeName is the name of the node.
func (c *Cluster) NodeName() string { return c.opts.NodeName }

// WorkDir is the node's work directory (Options.WorkDir, absolute).
func (c *Cluster) WorkDir() string { return c.paths.work }

// LogDir holds one log file per component (<name>.log) and, under pods/, the pods' logs.
func (c *Cluster) LogDir() string { return c.paths.logs }

// CgroupName is the name of the node's cgroup subtree, the same in every hierarchy
// (/sys/fs/cgroup/<controller>/<name>); Down removes it.
func (c *Cluster) CgroupName() string {
	if c.cgroup == nil {
		return ""
	}
	return c.cgroup.name
}
