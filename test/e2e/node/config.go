package node

import (
	"bytes"
	"fmt"
	"os"
	"text/template"
)

// Cluster-wide addresses. The node lives in a network namespace of its own, so fixed values
// never clash with the host or with another run.
const (
	// DefaultNodeIP is the node's InternalIP, on a veth in the private network namespace.
	DefaultNodeIP = "10.10.0.10"
	// DefaultNodeName is the node's name (and the kubelet's hostname override).
	DefaultNodeName = "e2e-node"
	// ServiceCIDR is the range of ClusterIPs.
	ServiceCIDR = "10.96.0.0/16"
	// KubernetesServiceIP is the ClusterIP of the default/kubernetes Service.
	KubernetesServiceIP = "10.96.0.1"
	// DNSServiceIP is the ClusterIP of kube-system/kube-dns (CoreDNS).
	DNSServiceIP = "10.96.0.10"
	// PodCIDR is the range the CNI bridge hands pod IPs from.
	PodCIDR = "10.244.0.0/24"
	// ClusterDomain is the DNS domain of Services.
	ClusterDomain = "cluster.local"
	// PauseImage is the sandbox image containerd runs (built here, never pulled).
	PauseImage = "registry.k8s.io/pause:3.10"
	// CoreDNSImage is the image of the CoreDNS Deployment (built here from the node assets).
	CoreDNSImage = "e2e.local/coredns:v1.14.2"

	apiserverPort       = 6443
	etcdClientURL       = "http://127.0.0.1:2379"
	containerdSocket    = "/run/containerd/containerd.sock"
	containerdState     = "/run/containerd"
	kubeletRootDir      = "/var/lib/kubelet"
	cniBinDir           = "/usr/lib/cni"
	containerdNamespace = "k8s.io"
)

// containerdConfig: restrict_oom_score_adj because the machines' bounding set lacks
// CAP_SYS_RESOURCE, so the -998 containerd gives pause fails every sandbox ("can't get final
// child's PID from pipe: EOF"); the state under /run (tmpfs of the mount namespace), the root
// under the work directory (overlayfs needs a real file system for its upper directories); the
// opt plugin's directory moved off /opt; the snapshotters that probe host devices disabled.
const containerdConfig = `version = 2
root = "{{.Root}}"
state = "` + containerdState + `"
oom_score = 0
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing",
]

[grpc]
  address = "` + containerdSocket + `"

[plugins."io.containerd.internal.v1.opt"]
  path = "{{.Root}}/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "` + PauseImage + `"
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "` + cniBinDir + `"
    conf_dir = "{{.CNIConfDir}}"
`

// kubeletConfig: failCgroupV1 false (1.36 runs on cgroup v1 with a deprecation warning);
// cgroupfs inside the run's subtree; protectKernelDefaults so that the kubelet never writes a
// global sysctl (it checks the stand-ins of setupMounts instead); image GC off, because an
// image removed here can never be pulled again.
const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /{{.CgroupRoot}}
cgroupsPerQOS: true
containerRuntimeEndpoint: unix://` + containerdSocket + `
protectKernelDefaults: true
failSwapOn: false
clusterDomain: ` + ClusterDomain + `
clusterDNS: [` + DNSServiceIP + `]
resolvConf: {{.ResolvConf}}
podLogsDir: {{.PodLogsDir}}
address: {{.NodeIP}}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
tlsCertFile: {{.TLSCert}}
tlsPrivateKeyFile: {{.TLSKey}}
rotateCertificates: false
serverTLSBootstrap: false
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: {{.CA}}}
authorization:
  mode: Webhook
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 2%
  imagefs.available: 2%
  nodefs.inodesFree: 2%
serializeImagePulls: false
`

// kubeProxyConfig: iptables mode (iptables-nft) in the private network namespace; conntrack
// values of 0 leave the global nf_conntrack sysctls alone; oomScoreAdj 0 because lowering it
// needs CAP_SYS_RESOURCE.
const kubeProxyConfig = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection:
  kubeconfig: {{.Kubeconfig}}
hostnameOverride: {{.NodeName}}
bindAddress: {{.NodeIP}}
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
clusterCIDR: ` + PodCIDR + `
oomScoreAdj: 0
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`

// cniConfig: one bridge with the gateway on the node side, no masquerade (nothing leaves the
// namespace), hairpin so that a pod reaches itself through its Service.
const cniConfig = `{
  "cniVersion": "0.4.0",
  "name": "capov-e2e",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "` + cniLink + `",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "{{.IPAMDir}}",
        "ranges": [[{"subnet": "` + PodCIDR + `"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`

// writeTemplate renders text with data into path.
func writeTemplate(path, text string, data any) error {
	t, err := template.New(path).Option("missingkey=error").Parse(text)
	if err != nil {
		return fmt.Errorf("parsing template of %s: %w", path, err)
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		return fmt.Errorf("rendering %s: %w", path, err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
