//go:build linux

package workload_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capov/capov/test/e2e/node"
	"github.com/capov/capov/test/envtest"
	"github.com/capov/capov/test/guest"
	"github.com/capov/capov/test/harness"
	"github.com/capov/capov/test/ovirtsim"
)

// world is what every scenario shares: the lab network, the control-plane endpoint's load
// balancer, the guests' template, and the CAPOV stack whose simulator boots the guests.
type world struct {
	work     string
	root     string
	lab      *guest.Lab
	lb       *guest.LoadBalancer
	stack    *harness.Stack
	mgmt     client.Client
	vmsDir   string
	clusterc string // clusterctl configuration of the local repository
	version  string // the provider version in it
	log      logr.Logger
}

var w *world

const (
	providerName  = "ovirt-lab"
	ovirtTemplate = "debian-12-kubeadm"
	// ignitionTemplate is an Ignition image's template (OS type rhcos_x64): the same disk,
	// booted the way RHCOS boots (Ignition on the first boot, no cloud-init).
	ignitionTemplate = "rhcos-kubeadm"
	credentialsName  = "lab-credentials"
)

func TestMain(m *testing.M) {
	if os.Getenv("CAPOV_E2E") == "" {
		fmt.Println("test/e2e/workload: skipped; it boots real guests: run make e2e-workload (root, private namespaces)")
		os.Exit(0)
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	if err := node.CheckIsolation(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var err error
	code := 1
	w, err = setupWorld(ctx)
	if w != nil {
		defer func() { w.teardown(code != 0) }()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "test/e2e/workload:", err)
		return code
	}
	code = m.Run()
	return code
}

func logf(format string, args ...any) {
	fmt.Printf("%s workload: %s\n", time.Now().UTC().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

func setupWorld(ctx context.Context) (*world, error) {
	start := time.Now()
	root, err := envtest.RepoRoot()
	if err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp("", "capov-workload-")
	if err != nil {
		return nil, err
	}
	wd := &world{work: work, root: root, vmsDir: filepath.Join(work, "vms"),
		log: funcr.New(func(p, a string) { fmt.Println(p, a) }, funcr.Options{Verbosity: 0})}
	find := assetFinder(os.Getenv("NODE_ASSETS"), os.Getenv("KUBEBUILDER_ASSETS"))
	initBin := filepath.Join(work, "bin", "guest-init")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", initBin, "./test/guest/cmd/guest-init")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return wd, fmt.Errorf("building guest-init: %w: %s", err, out)
	}
	images, err := guest.KubeadmImages(filepath.Join(work, "images"), find)
	if err != nil {
		return wd, err
	}
	app, err := appImage(ctx, root, filepath.Join(work, "images"))
	if err != nil {
		return wd, err
	}
	kubeVIP, err := find("kube-vip")
	if err != nil {
		return wd, err
	}
	vip := filepath.Join(work, "images", "kube-vip.tar")
	if err := guest.WriteImage(vip, guest.ImageSpec{Ref: kubeVIPImageRef, Files: map[string]string{"/kube-vip": kubeVIP},
		Entrypoint: []string{"/kube-vip"}}); err != nil {
		return wd, err
	}
	flannel, err := guest.FlannelImage(filepath.Join(work, "images"), find)
	if err != nil {
		return wd, err
	}
	kubelet, err := find("kubelet")
	if err != nil {
		return wd, err
	}
	kubeadm, err := find("kubeadm")
	if err != nil {
		return wd, err
	}
	if wd.lab, err = guest.NewLab(ctx, guest.LabOptions{Dir: filepath.Join(work, "lab")}); err != nil {
		return wd, err
	}
	if wd.lb, err = guest.NewLoadBalancer(wd.lab, 6443); err != nil {
		return wd, err
	}
	tplDir := filepath.Join(work, "template")
	if _, err := guest.BuildTemplate(ctx, guest.TemplateOptions{
		Dir: tplDir, Kubelet: kubelet, Kubeadm: kubeadm, GuestInit: initBin,
		Images: append(images, flannel, app, vip), Nameserver: wd.lab.Address(),
	}); err != nil {
		return wd, err
	}
	logf("guest images and template built in %s", time.Since(start).Round(time.Second))

	var out io.Writer = os.Stdout
	if os.Getenv("DEMO_REAL_NODES") != "" {
		// The demo prints its own progress; the processes' logs go to a file.
		f, err := os.Create(filepath.Join(work, "processes.log"))
		if err != nil {
			return wd, err
		}
		logf("the processes' logs: %s", f.Name())
		out = f
	}
	wd.stack, err = harness.StartStack(ctx, harness.StackOptions{
		WorkDir: filepath.Join(work, "stack"), Out: out, Seed: labSeed(), Log: wd.log,
		SimulatorAsProcess: true, RealGuests: true, KubeadmProviders: true,
		SimulatorArgs: []string{"--guests-dir=" + wd.vmsDir, "--guest-template=" + tplDir,
			"--guest-init=" + initBin, "--guest-bridge=" + wd.lab.Bridge()},
		ManagerArgs: []string{"--vm-poll-interval=2s", "--node-poll-interval=2s", "--retry-interval=5s"},
	})
	if err != nil {
		return wd, err
	}
	wd.mgmt = wd.stack.Mgmt.Client
	if err := wd.mgmt.Create(ctx, harness.Namespace("capov-system")); err != nil && !apierrors.IsAlreadyExists(err) {
		return wd, err
	}
	if err := wd.mgmt.Create(ctx, harness.CredentialsSecret("capov-system", credentialsName, wd.stack.SimUsername, wd.stack.SimPassword)); err != nil {
		return wd, err
	}
	if err := wd.mgmt.Create(ctx, harness.Provider(providerName, wd.stack.SimURL, credentialsName, wd.stack.SimCAPEM)); err != nil {
		return wd, err
	}
	if wd.clusterc, wd.version, err = clusterctlRepo(root, filepath.Join(work, "clusterctl")); err != nil {
		return wd, err
	}
	logf("world ready in %s", time.Since(start).Round(time.Second))
	return wd, nil
}

// appImageRef is the workload the scenarios run in the clusters: e2eapp (test/e2e/node's
// smoke-test program: an HTTP server and a client with retries), preloaded like kubeadm's images.
const appImageRef = "e2e.local/e2eapp:v1"

// kubeVIPImageRef is the image the kube-vip flavors run by default (KUBE_VIP_IMAGE,
// KUBE_VIP_VERSION), built from kube-vip's module (hack/node-assets.sh).
const kubeVIPImageRef = "ghcr.io/kube-vip/kube-vip:v0.9.2"

// appImage builds e2eapp for this machine and writes its image archive into dir.
func appImage(ctx context.Context, root, dir string) (string, error) {
	bin := filepath.Join(dir, "e2eapp")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./test/e2e/node/internal/e2eapp")
	cmd.Dir, cmd.Env = root, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building e2eapp: %w: %s", err, out)
	}
	archive := filepath.Join(dir, "e2eapp.tar")
	return archive, guest.WriteImage(archive, guest.ImageSpec{Ref: appImageRef, Files: map[string]string{"/e2eapp": bin},
		Entrypoint: []string{"/e2eapp"}, User: "65532:65532"})
}

// labSeed is the oVirt inventory of the lab: one cluster of three hosts on the lab network, the
// Debian template the guests boot (a guest agent reports their addresses) and the same disk as
// an Ignition template.
func labSeed() *ovirtsim.Seed {
	return &ovirtsim.Seed{
		Clusters: []ovirtsim.Cluster{{Name: "Default", DataCenter: "Default", Networks: []string{"ovirtmgmt"}, Hosts: []ovirtsim.Host{
			{Name: "host1", MemoryGB: 256, Status: "up"}, {Name: "host2", MemoryGB: 256, Status: "up"}, {Name: "host3", MemoryGB: 256, Status: "up"},
		}}},
		StorageDomains: []ovirtsim.StorageDomain{{Name: "data", DataCenter: "Default", FreeGB: 1000, Type: "data", Status: "active"}},
		Templates:      []ovirtsim.Template{labTemplate(ovirtTemplate, "other_linux"), labTemplate(ignitionTemplate, "rhcos_x64")},
		VnicProfiles:   []ovirtsim.VnicProfile{{Name: "ovirtmgmt", Network: "ovirtmgmt", DataCenter: "Default"}},
		Username:       "admin@internal",
		Password:       "secret",
		Timings: ovirtsim.Timings{ImageLock: time.Second, DiskLock: 500 * time.Millisecond,
			WaitForLaunch: 500 * time.Millisecond, PoweringUp: time.Second, PoweringDown: time.Second},
		RandomSeed: 1,
	}
}

// labTemplate is a template of the lab's guest disk with the given OS type.
func labTemplate(name, osType string) ovirtsim.Template {
	return ovirtsim.Template{
		Name: name, Cluster: "Default", Version: 1, OSType: osType,
		Sockets: 1, Cores: 2, Threads: 1, MemoryMB: 4096, Status: "ok",
		Disks: []ovirtsim.TemplateDisk{{Alias: name + "_Disk1", SizeGB: 20, Format: "cow",
			StorageDomain: "data", Bootable: true, Interface: "virtio_scsi"}},
	}
}

// teardown stops the lab; its logs (the guests' consoles and units, the simulator's, the
// manager's) are removed unless a test failed or CAPOV_KEEP_LOGS is set.
func (wd *world) teardown(failed bool) {
	if wd.stack != nil {
		wd.stack.Stop()
	}
	if wd.lb != nil {
		_ = wd.lb.Close()
	}
	if wd.lab != nil {
		wd.lab.Close()
	}
	if !failed && os.Getenv("CAPOV_KEEP_LOGS") == "" {
		_ = os.RemoveAll(wd.work)
	} else {
		logf("logs kept in %s", wd.work)
	}
}

func assetFinder(dirs ...string) func(string) (string, error) {
	return func(name string) (string, error) {
		for _, d := range dirs {
			if d == "" {
				continue
			}
			if p := filepath.Join(d, name); fileExists(p) {
				return p, nil
			}
		}
		return "", fmt.Errorf("%s is in none of %v (hack/node-assets.sh, hack/envtest-assets.sh)", name, dirs)
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// clusterctlRepo lays out a local clusterctl repository with this tree's provider
// components, metadata and cluster templates, as a release would publish them.
func clusterctlRepo(root, dir string) (config, version string, err error) {
	version = "v0.0.0-e2e"
	rel := filepath.Join(dir, "infrastructure-ovirt", version)
	if err := os.MkdirAll(rel, 0o755); err != nil {
		return "", "", err
	}
	out, err := exec.Command("kubectl", "kustomize", filepath.Join(root, "config", "default")).Output()
	if err != nil {
		return "", "", fmt.Errorf("kubectl kustomize config/default: %w", err)
	}
	if err := os.WriteFile(filepath.Join(rel, "infrastructure-components.yaml"), out, 0o644); err != nil {
		return "", "", err
	}
	files, _ := filepath.Glob(filepath.Join(root, "templates", "cluster-template*.yaml"))
	files = append(files, filepath.Join(root, "metadata.yaml"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", "", err
		}
		if err := os.WriteFile(filepath.Join(rel, filepath.Base(f)), b, 0o644); err != nil {
			return "", "", err
		}
	}
	config = filepath.Join(dir, "clusterctl.yaml")
	return config, version, os.WriteFile(config, []byte("providers:\n  - name: ovirt\n    url: "+
		filepath.Join(rel, "infrastructure-components.yaml")+"\n    type: InfrastructureProvider\n"), 0o644)
}

// generateCluster renders a flavor with the real clusterctl, as users do.
func (wd *world) generateCluster(ctx context.Context, name, ns, flavor string, cp, workers int, vars map[string]string) ([]byte, error) {
	bin := os.Getenv("CLUSTERCTL")
	if bin == "" {
		return nil, fmt.Errorf("CLUSTERCTL is not set (hack/clusterctl.sh)")
	}
	args := []string{"generate", "cluster", name, "--infrastructure", "ovirt:" + wd.version, "--config", wd.clusterc,
		"--target-namespace", ns, "--kubernetes-version", guest.KubernetesVersion,
		"--control-plane-machine-count", fmt.Sprint(cp), "--worker-machine-count", fmt.Sprint(workers)}
	if flavor != "" {
		args = append(args, "--flavor", flavor)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "CLUSTERCTL_DISABLE_VERSIONCHECK=true", "HOME="+filepath.Join(wd.work, "clusterctl-home"))
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("clusterctl %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}

// namespace creates a namespace for a scenario.
func (wd *world) namespace(ctx context.Context, name string) error {
	return wd.mgmt.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
}
