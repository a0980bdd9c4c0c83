package controllers

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capov/capov/pkg/ovirt"
)

// cabpkData is the start of what Cluster API's kubeadm bootstrap provider writes for a flavor
// whose nodeRegistration.name is "{{ local_hostname }}".
const cabpkData = `## template: jinja
#cloud-config

write_files:
-   path: /run/kubeadm/kubeadm-join-config.yaml
    owner: root:root
    permissions: '0640'
    content: |
      ---
      apiVersion: kubeadm.k8s.io/v1beta4
      kind: JoinConfiguration
      nodeRegistration:
        name: '{{ local_hostname }}'
        kubeletExtraArgs:
        - name: node-labels
          value: 'host={{ v1.local_hostname }},ds={{ds.meta_data.local_hostname}}'
runcmd:
  - kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml
`

func TestRenderCloudConfigTemplate(t *testing.T) {
	for _, tc := range []struct {
		name, data, want, wantErr string
	}{
		{
			name: "cloud-config without a Jinja header goes to the Engine unchanged",
			data: "#cloud-config\nruncmd:\n- echo '{{ not a template here }}'\n",
			want: "#cloud-config\nruncmd:\n- echo '{{ not a template here }}'\n",
		},
		{
			name: "the host-name expressions of a kubeadm bootstrap config are rendered and the header dropped",
			data: cabpkData,
			want: "#cloud-config\n\nwrite_files:\n-   path: /run/kubeadm/kubeadm-join-config.yaml\n    owner: root:root\n" +
				"    permissions: '0640'\n    content: |\n      ---\n      apiVersion: kubeadm.k8s.io/v1beta4\n" +
				"      kind: JoinConfiguration\n      nodeRegistration:\n        name: 'capov-worker-0'\n" +
				"        kubeletExtraArgs:\n        - name: node-labels\n" +
				"          value: 'host=capov-worker-0,ds=capov-worker-0'\nruncmd:\n" +
				"  - kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml\n",
		},
		{
			name: "the header is recognised in any case, as cloud-init does",
			data: "## Template: JINJA\n#cloud-config\nhostname: {{ local_hostname }}\n",
			want: "#cloud-config\nhostname: capov-worker-0\n",
		},
		{
			name:    "another expression cannot be rendered on oVirt: an error naming it",
			data:    "## template: jinja\n#cloud-config\nruncmd:\n- echo {{ v1.instance_id }}\n",
			wantErr: "{{ v1.instance_id }}",
		},
		{
			name:    "a Jinja statement is refused too",
			data:    "## template: jinja\n#cloud-config\n{% if true %}runcmd: []{% endif %}\n",
			wantErr: "{% if true %}",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := renderCloudConfigTemplate(tc.data, "capov-worker-0")
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				g.Expect(err.Error()).To(ContainSubstring("oVirt writes its own #cloud-config"))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

// TestAKubeadmBootstrapTemplateReachesTheEngineRendered: the kubeadm bootstrap provider's
// cloud-config is a Jinja template, and the Engine puts its own #cloud-config before it, so
// cloud-init on the guest never renders it; a node named "{{ local_hostname }}" would fail
// kubeadm (a real guest showed it). CAPOV sends the Engine the data with the host name it sets
// on the VM filled in.
func TestAKubeadmBootstrapTemplateReachesTheEngineRendered(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newMachineFixture(t)
	f.ov.AddTemplate(ovirt.Template{Name: "debian-12", Version: 1, ClusterID: mustCluster(t, f), OSType: "debian_12"})
	s := &corev1.Secret{}
	g.Expect(f.c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "w-1-bootstrap"}, s)).To(Succeed())
	s.Data = map[string][]byte{"value": []byte(cabpkData), "format": []byte("cloud-config")}
	g.Expect(f.c.Update(ctx, s)).To(Succeed())
	om := f.get(t)
	om.Spec.Template = "debian-12"
	g.Expect(f.c.Update(ctx, om)).To(Succeed())

	var sent *ovirt.VMSpec
	f.ov.CreateVMFunc = func(ctx context.Context, spec ovirt.VMSpec) (*ovirt.VM, error) {
		sent = &spec
		f.ov.CreateVMFunc = nil
		return f.ov.CreateVM(ctx, spec)
	}
	for i := 0; i < 5 && sent == nil; i++ {
		_, err := f.reconcile(t)
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(sent).NotTo(BeNil(), "the VM is created")
	g.Expect(sent.HostName).To(Equal("w-1"))
	g.Expect(sent.CustomScript).To(BeEmpty(), "the bootstrap data is not stored on the VM")
	script := firstRunScript(t, f)
	g.Expect(script).To(HavePrefix("#cloud-config\n"))
	g.Expect(script).To(ContainSubstring("name: 'w-1'"))
	g.Expect(script).NotTo(ContainSubstring("{{"))
}

// firstRunScript reconciles the fixture's machine until its VM was started and returns the
// custom script of that run (run once).
func firstRunScript(t *testing.T, f *machineFixture) string {
	t.Helper()
	for range 10 {
		if id := f.get(t).Status.VMID; id != "" {
			if script, ok := f.ov.RunOnceScript(id); ok {
				return script
			}
		}
		res, err := f.reconcile(t)
		if err != nil && !strings.Contains(err.Error(), errNoNodeStep) {
			t.Fatal(err)
		}
		f.now = f.now.Add(max(res.RequeueAfter, time.Minute))
	}
	t.Fatal("the VM was not started with run once")
	return ""
}

// mustCluster is the id of the fake's cluster Default.
func mustCluster(t *testing.T, f *machineFixture) string {
	t.Helper()
	cl, err := f.ov.FindCluster(context.Background(), "Default")
	if err != nil {
		t.Fatal(err)
	}
	return cl.ID
}

// TestAnIgnitionVMGetsItsHostName: CABPK's Ignition output names no host (kubeadm takes the
// guest's host name as the Node name); the Engine writes /etc/hostname into the Ignition config
// only when the VM's initialization has a host name. Without one every node of a cluster was
// "localhost" and the second kubeadm join failed (found by a real Ignition guest).
func TestAnIgnitionVMGetsItsHostName(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newMachineFixture(t)
	f.ov.AddTemplate(ovirt.Template{Name: "rhcos-4.14", Version: 1, ClusterID: mustCluster(t, f), OSType: "rhcos_x64"})
	s := &corev1.Secret{}
	g.Expect(f.c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "w-1-bootstrap"}, s)).To(Succeed())
	config := `{"ignition":{"version":"2.3.0"},"systemd":{"units":[{"name":"kubeadm.service","enabled":true}]}}`
	s.Data = map[string][]byte{"value": []byte(config), "format": []byte("ignition")}
	g.Expect(f.c.Update(ctx, s)).To(Succeed())
	om := f.get(t)
	om.Spec.Template = "rhcos-4.14"
	g.Expect(f.c.Update(ctx, om)).To(Succeed())

	var sent *ovirt.VMSpec
	f.ov.CreateVMFunc = func(ctx context.Context, spec ovirt.VMSpec) (*ovirt.VM, error) {
		sent = &spec
		f.ov.CreateVMFunc = nil
		return f.ov.CreateVM(ctx, spec)
	}
	for i := 0; i < 5 && sent == nil; i++ {
		_, err := f.reconcile(t)
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(sent).NotTo(BeNil(), "the VM is created")
	g.Expect(sent.OSType).To(Equal("rhcos_x64"))
	g.Expect(sent.HostName).To(Equal("w-1"))
	g.Expect(sent.CustomScript).To(BeEmpty(), "the bootstrap data is not stored on the VM")
	g.Expect(firstRunScript(t, f)).To(Equal(config), "the Ignition config goes to the Engine's first run as it is")
}
