//go:build linux

package guest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/capov/capov/test/e2e/node"
	"github.com/capov/capov/test/guest"
)

// env is what every test of the package needs: assets, the template, the lab and a host.
type env struct {
	work string
	lab  *guest.Lab
	host *guest.Host
}

// shared is the env of the package's tests: built by the first test that needs it (the
// images and template take a while), closed by TestMain.
var shared struct {
	once sync.Once
	env  *env
	err  error
	done []func()
}

func TestMain(m *testing.M) {
	code := m.Run()
	for i := len(shared.done) - 1; i >= 0; i-- {
		shared.done[i]()
	}
	os.Exit(code)
}

func setup(t *testing.T) *env {
	t.Helper()
	if os.Getenv("CAPOV_E2E") == "" {
		t.Skip("boots real guests: run through hack/e2e.sh (make e2e-workload), as root")
	}
	shared.once.Do(func() { shared.env, shared.err = newEnv(t) })
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			dumpGuests(t, filepath.Join(shared.env.work, "vms"))
		}
	})
	return shared.env
}

func newEnv(t *testing.T) (*env, error) {
	if err := node.CheckIsolation(); err != nil {
		return nil, err
	}
	ctx := context.Background()
	work, err := os.MkdirTemp("", "capov-guest-test-")
	if err != nil {
		return nil, err
	}
	shared.done = append(shared.done, func() { _ = os.RemoveAll(work) })
	find := assetFinder(os.Getenv("NODE_ASSETS"), os.Getenv("KUBEBUILDER_ASSETS"))
	initBin := filepath.Join(work, "guest-init")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", initBin, "./cmd/guest-init").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building guest-init: %w: %s", err, out)
	}
	start := time.Now()
	images, err := guest.KubeadmImages(filepath.Join(work, "images"), find)
	if err != nil {
		return nil, err
	}
	kubelet, err := find("kubelet")
	if err != nil {
		return nil, err
	}
	kubeadm, err := find("kubeadm")
	if err != nil {
		return nil, err
	}
	lab, err := guest.NewLab(ctx, guest.LabOptions{Dir: filepath.Join(work, "lab")})
	if err != nil {
		return nil, err
	}
	shared.done = append(shared.done, lab.Close)
	// The control-plane endpoint users put in front of their API servers.
	lb, err := guest.NewLoadBalancer(lab, 6443)
	if err != nil {
		return nil, err
	}
	shared.done = append(shared.done, func() { _ = lb.Close() })
	tpl, err := guest.BuildTemplate(ctx, guest.TemplateOptions{
		Dir: filepath.Join(work, "template"), Kubelet: kubelet, Kubeadm: kubeadm, GuestInit: initBin,
		Images: images, Nameserver: lab.Address(),
	})
	if err != nil {
		return nil, err
	}
	t.Logf("images and template built in %s", time.Since(start).Round(time.Millisecond))
	host, err := guest.NewHost(guest.HostOptions{Dir: filepath.Join(work, "vms"), Template: tpl, GuestInit: initBin, Bridge: lab.Bridge()})
	if err != nil {
		return nil, err
	}
	shared.done = append(shared.done, host.Close)
	return &env{work: work, lab: lab, host: host}, nil
}

func assetFinder(dirs ...string) func(string) (string, error) {
	return func(name string) (string, error) {
		for _, d := range dirs {
			if d == "" {
				continue
			}
			p := filepath.Join(d, name)
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
		}
		return "", fmt.Errorf("%s is in none of %v (hack/node-assets.sh, hack/envtest-assets.sh)", name, dirs)
	}
}

// dumpGuests prints each guest's console and the tail of its service logs.
func dumpGuests(t *testing.T, dir string) {
	vms, _ := os.ReadDir(dir)
	for _, vm := range vms {
		b, _ := os.ReadFile(filepath.Join(dir, vm.Name(), "console.log"))
		t.Logf("=== console of %s\n%s", vm.Name(), b)
		logs, _ := filepath.Glob(filepath.Join(dir, vm.Name(), "disk/root-upper/var/log/guest-init/*.log"))
		logs = append(logs, filepath.Join(dir, vm.Name(), "disk/root-upper/var/log/cloud-init-output.log"))
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			lines := strings.Split(string(b), "\n")
			if len(lines) > 40 {
				lines = lines[len(lines)-40:]
			}
			t.Logf("=== %s\n%s", l, strings.Join(lines, "\n"))
		}
	}
}

// engineUserData is the user data the Engine writes for a custom script: its own cloud-config
// map first, the script after it (CloudInitHandler).
func engineUserData(script string) string {
	return "#cloud-config\noutput:\n  all: '>> /var/log/cloud-init-output.log'\ndisable_root: 0\nruncmd:\n" +
		"- 'sed -i ''/^datasource_list: /d'' /etc/cloud/cloud.cfg; echo ''datasource_list: [\"NoCloud\", \"ConfigDrive\"]'' >> /etc/cloud/cloud.cfg'\n" +
		"ssh_pwauth: true\nchpasswd:\n  expire: false\n" + script
}

func metaData(name, uuid string) string {
	b, _ := json.Marshal(map[string]any{
		"availability_zone": "nova", "hostname": name, "name": name, "launch_index": "0", "uuid": uuid,
		"meta": map[string]string{"essential": "false", "role": "server", "dsmode": "local"},
	})
	return string(b)
}

// TestAGuestRunsKubeadmInitFromItsConfigDrive boots one guest whose config drive carries a
// kubeadm init, as CABPK would write it: the control plane comes up, the kubelet registers the
// Node under the host name cloud-init set, with the VM id as its system UUID.
func TestAGuestRunsKubeadmInitFromItsConfigDrive(t *testing.T) {
	e := setup(t)
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const vmID = "0f5a6c2e-6b1d-4d55-9a63-5f0d2b1c9e01"
	kubeadmConfig := `apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
nodeRegistration:
  name: cp-0
  criSocket: unix:///run/containerd/containerd.sock
  ignorePreflightErrors: [SystemVerification]
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: ` + guest.KubernetesVersion + `
controlPlaneEndpoint: ` + e.lab.Address() + `:6443
networking:
  podSubnet: 192.168.0.0/16
`
	script := "## template: jinja\n#cloud-config\nwrite_files:\n- path: /run/kubeadm/kubeadm.yaml\n  owner: root:root\n  permissions: '0640'\n  content: |\n" +
		indent(kubeadmConfig, "    ") + "runcmd:\n  - 'kubeadm init --config /run/kubeadm/kubeadm.yaml && echo success > /run/cluster-api/bootstrap-success.complete'\n"
	g.Expect(e.host.Boot(ctx, guest.BootRequest{
		VMID: vmID, NICs: []guest.NIC{{MAC: "56:6f:00:00:00:01"}},
		ConfigDrive: map[string]string{
			"openstack/latest/meta_data.json": metaData("cp-0", "6b0d0c5c-1f7e-4f0e-9e4e-1f1f1f1f1f1f"),
			"openstack/latest/user_data":      engineUserData(script),
		},
	})).To(Succeed())

	admin := filepath.Join(e.host.Disk(vmID), "root-upper/etc/kubernetes/admin.conf")
	g.Eventually(func() error { _, err := os.Stat(admin); return err }).WithContext(ctx).WithTimeout(8 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
	cfg, err := clientcmd.BuildConfigFromFlags("", admin)
	g.Expect(err).NotTo(HaveOccurred())
	cs, err := kubernetes.NewForConfig(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	var n *corev1.Node
	g.Eventually(func() error {
		n, err = cs.CoreV1().Nodes().Get(ctx, "cp-0", metav1.GetOptions{})
		return err
	}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
	g.Expect(n.Status.NodeInfo.SystemUUID).To(Equal(vmID))
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	return prefix + strings.Join(lines, "\n"+prefix) + "\n"
}

// waitForLines waits until a file of the guest's disk has the wanted number of lines.
func waitForLines(ctx context.Context, g Gomega, path string, n int) {
	g.Eventually(func() (int, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return 0, err
		}
		return strings.Count(string(b), "\n"), nil
	}).WithContext(ctx).WithTimeout(2*time.Minute).WithPolling(500*time.Millisecond).Should(Equal(n), path)
}

// TestAnIgnitionGuestAppliesItsConfigOnce boots a guest of an Ignition template (rhcos_x64)
// with the config the Engine hands it: Ignition writes the files and enables the units on the
// disk's first boot, the host name comes from the Engine's /etc/hostname entry, cloud-init does
// not run; after a shutdown the same disk boots without a config drive, Ignition does not run
// again, and a unit guarded as CABPK guards kubeadm.service does not run twice.
func TestAnIgnitionGuestAppliesItsConfigOnce(t *testing.T) {
	e := setup(t)
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const vmID = "0f5a6c2e-6b1d-4d55-9a63-5f0d2b1c9e02"
	once := "[Unit]\nConditionPathExists=/etc/run-once\nAfter=network.target\n[Service]\nType=oneshot\n" +
		"ExecStart=/bin/sh -c 'hostname > /var/lib/ign-test/hostname; echo ran >> /var/lib/ign-test/once; mv /etc/run-once /tmp/'\n" +
		"[Install]\nWantedBy=multi-user.target\n"
	every := "[Service]\nType=oneshot\nExecStart=/bin/sh -c 'echo boot >> /var/lib/ign-test/boots'\n[Install]\nWantedBy=multi-user.target\n"
	cfg, err := json.Marshal(map[string]any{
		"ignition": map[string]any{"version": "2.3.0"},
		"storage": map[string]any{
			"directories": []any{map[string]any{"filesystem": "root", "path": "/var/lib/ign-test", "mode": 493}},
			"files": []any{
				map[string]any{"filesystem": "root", "path": "/etc/run-once", "mode": 384, "contents": map[string]any{"source": "data:,once"}},
				// What the Engine merges in for the VM's host name.
				map[string]any{"filesystem": "root", "path": "/etc/hostname", "mode": 420, "contents": map[string]any{"source": "data:,ign-0"}},
			},
		},
		"systemd": map[string]any{"units": []any{
			map[string]any{"name": "once.service", "enabled": true, "contents": once},
			map[string]any{"name": "every-boot.service", "enabled": true, "contents": every},
		}},
	})
	g.Expect(err).NotTo(HaveOccurred())
	req := guest.BootRequest{VMID: vmID, NICs: []guest.NIC{{MAC: "56:6f:00:00:00:02"}}, Ignition: true,
		ConfigDrive: map[string]string{
			"openstack/latest/meta_data.json": metaData("ign-0", "6b0d0c5c-1f7e-4f0e-9e4e-1f1f1f1f1f20"),
			"openstack/latest/user_data":      string(cfg),
		}}
	g.Expect(e.host.Boot(ctx, req)).To(Succeed())
	upper := filepath.Join(e.host.Disk(vmID), "root-upper")
	waitForLines(ctx, g, filepath.Join(upper, "var/lib/ign-test/boots"), 1)
	// once.service is ordered after the network, every-boot.service after nothing: the first
	// boot's "boots" line may come before once.service has run (seen in a cold CI run).
	waitForLines(ctx, g, filepath.Join(upper, "var/lib/ign-test/once"), 1)
	g.Expect(os.ReadFile(filepath.Join(upper, "var/lib/ign-test/hostname"))).To(BeEquivalentTo("ign-0\n"))
	g.Expect(filepath.Join(upper, "etc/.ignition-result.json")).To(BeAnExistingFile())
	g.Expect(filepath.Join(upper, "var/lib/cloud/instance")).NotTo(BeAnExistingFile(), "cloud-init ran on an Ignition guest")
	g.Eventually(func() ([]guest.Interface, error) { return e.host.Interfaces(vmID) }).WithContext(ctx).WithTimeout(time.Minute).
		Should(ContainElement(And(HaveField("Name", "eth0"), HaveField("IPs", Not(BeEmpty())))), "the NIC got no address (NetworkManager's default DHCP)")

	e.host.Shutdown(vmID, time.Minute)
	req.ConfigDrive = nil // the Engine attaches the payload on the first run only
	g.Expect(e.host.Boot(ctx, req)).To(Succeed())
	waitForLines(ctx, g, filepath.Join(upper, "var/lib/ign-test/boots"), 2)
	g.Expect(os.ReadFile(filepath.Join(upper, "var/lib/ign-test/once"))).To(BeEquivalentTo("ran\n"), "the run-once unit ran again")
	console, err := os.ReadFile(e.host.ConsoleLog(vmID))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(strings.Count(string(console), "Ignition: config applied")).To(Equal(1), string(console))
	g.Expect(string(console)).To(ContainSubstring("Ignition: not the first boot"))
}

// TestAnIgnitionGuestStopsOnADirectiveItCannotApply: a config asking for something the lab's
// Ignition cannot do stops the boot with a message naming it; nothing of the image starts.
func TestAnIgnitionGuestStopsOnADirectiveItCannotApply(t *testing.T) {
	e := setup(t)
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const vmID = "0f5a6c2e-6b1d-4d55-9a63-5f0d2b1c9e03"
	cfg := `{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/etc/remote","contents":{"source":"https://config.example.com/remote"}}]}}`
	g.Expect(e.host.Boot(ctx, guest.BootRequest{VMID: vmID, NICs: []guest.NIC{{MAC: "56:6f:00:00:00:03"}}, Ignition: true,
		ConfigDrive: map[string]string{"openstack/latest/user_data": cfg}})).To(Succeed())
	g.Eventually(func() (string, error) {
		b, err := os.ReadFile(e.host.ConsoleLog(vmID))
		return string(b), err
	}).WithContext(ctx).WithTimeout(time.Minute).Should(And(
		ContainSubstring("Ignition failed: storage.files[0] (/etc/remote) contents: source https://"),
		ContainSubstring("Boot stopped")))
	upper := filepath.Join(e.host.Disk(vmID), "root-upper")
	g.Expect(filepath.Join(upper, "etc/.ignition-result.json")).NotTo(BeAnExistingFile())
	g.Expect(filepath.Glob(filepath.Join(upper, "var/log/guest-init/*"))).To(BeEmpty(), "a service of the image started")
}
