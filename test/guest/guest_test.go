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

func setup(t *testing.T) *env {
	t.Helper()
	if os.Getenv("CAPOV_E2E") == "" {
		t.Skip("boots real guests: run through hack/e2e.sh (make e2e-workload), as root")
	}
	if err := node.CheckIsolation(); err != nil {
		t.Fatal(err)
	}
	g := NewWithT(t)
	ctx := context.Background()
	work := t.TempDir()
	find := assetFinder(os.Getenv("NODE_ASSETS"), os.Getenv("KUBEBUILDER_ASSETS"))
	initBin := filepath.Join(work, "guest-init")
	out, err := exec.CommandContext(ctx, "go", "build", "-o", initBin, "./cmd/guest-init").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	start := time.Now()
	images, err := guest.KubeadmImages(filepath.Join(work, "images"), find)
	g.Expect(err).NotTo(HaveOccurred())
	kubelet, err := find("kubelet")
	g.Expect(err).NotTo(HaveOccurred())
	kubeadm, err := find("kubeadm")
	g.Expect(err).NotTo(HaveOccurred())
	lab, err := guest.NewLab(ctx, guest.LabOptions{Dir: filepath.Join(work, "lab")})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(lab.Close)
	// The control-plane endpoint users put in front of their API servers.
	lb, err := guest.NewLoadBalancer(lab, 6443)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = lb.Close() })
	tpl, err := guest.BuildTemplate(ctx, guest.TemplateOptions{
		Dir: filepath.Join(work, "template"), Kubelet: kubelet, Kubeadm: kubeadm, GuestInit: initBin,
		Images: images, Nameserver: lab.Address(),
	})
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("images and template built in %s", time.Since(start).Round(time.Millisecond))
	host, err := guest.NewHost(guest.HostOptions{Dir: filepath.Join(work, "vms"), Template: tpl, GuestInit: initBin, Bridge: lab.Bridge()})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		host.Close()
		if t.Failed() {
			dumpGuests(t, filepath.Join(work, "vms"))
		}
	})
	return &env{work: work, lab: lab, host: host}
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
