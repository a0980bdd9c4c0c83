//go:build linux

package guest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Versions of the images kubeadm v1.36.3 deploys (cmd/kubeadm/app/constants: the Kubernetes
// version, DefaultEtcdVersion, CoreDNSVersion, PauseVersion). The binaries are built at these
// versions (hack/envtest-assets.sh, hack/node-assets.sh).
const (
	KubernetesVersion = "v1.36.3"
	EtcdImageTag      = "3.6.8-0"
	CoreDNSImageTag   = "v1.14.2"
	PauseImageTag     = "3.10.2"
	imageRegistry     = "registry.k8s.io"
)

// iptablesPrograms are the iptables commands kube-proxy and flannel run (Debian's
// iptables-nft, as in the upstream images' debian-iptables base).
var iptablesPrograms = []string{
	"/usr/sbin/iptables", "/usr/sbin/iptables-save", "/usr/sbin/iptables-restore",
	"/usr/sbin/ip6tables", "/usr/sbin/ip6tables-save", "/usr/sbin/ip6tables-restore",
	"/usr/sbin/xtables-nft-multi", "/usr/sbin/conntrack",
}

// iptablesModules are iptables' extension modules, which it loads at run time.
const iptablesModules = "/usr/lib/x86_64-linux-gnu/xtables"

// KubeadmImages writes the images kubeadm's control plane and addons run into dir and returns
// their archives. bins finds a binary by name among the asset directories.
func KubeadmImages(dir string, bins func(string) (string, error)) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	type image struct {
		name string
		spec ImageSpec
	}
	need := func(names ...string) (map[string]string, error) {
		out := map[string]string{}
		for _, n := range names {
			p, err := bins(n)
			if err != nil {
				return nil, err
			}
			out[n] = p
		}
		return out, nil
	}
	b, err := need("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy", "etcd", "coredns", "pause")
	if err != nil {
		return nil, err
	}
	component := func(n string) image {
		return image{n, ImageSpec{
			Ref:   fmt.Sprintf("%s/%s:%s", imageRegistry, n, KubernetesVersion),
			Files: map[string]string{"/usr/local/bin/" + n: b[n]},
		}}
	}
	proxy := component("kube-proxy")
	proxy.spec.HostPrograms, proxy.spec.HostDirs = iptablesPrograms, []string{iptablesModules}
	images := []image{
		component("kube-apiserver"), component("kube-controller-manager"), component("kube-scheduler"), proxy,
		{"etcd", ImageSpec{Ref: imageRegistry + "/etcd:" + EtcdImageTag, Files: map[string]string{"/usr/local/bin/etcd": b["etcd"]}}},
		{"coredns", ImageSpec{Ref: imageRegistry + "/coredns/coredns:" + CoreDNSImageTag, Files: map[string]string{"/coredns": b["coredns"]}, Entrypoint: []string{"/coredns"}}},
		{"pause", ImageSpec{Ref: imageRegistry + "/pause:" + PauseImageTag, Files: map[string]string{"/pause": b["pause"]}, Entrypoint: []string{"/pause"}, User: "65535:65535"}},
	}
	var out []string
	for _, img := range images {
		p := filepath.Join(dir, strings.ReplaceAll(img.name, "/", "-")+".tar")
		if err := WriteImage(p, img.spec); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// FlannelVersion is the flannel release of the guests' CNI (hack/node-assets.sh).
const FlannelVersion = "v0.28.10"

// FlannelImage is flannel's image: flanneld, the flannel CNI plugin its DaemonSet installs into
// the node's /opt/cni/bin, cp for its init containers, and iptables for its masquerade rules.
func FlannelImage(dir string, bins func(string) (string, error)) (string, error) {
	flanneld, err := bins("flanneld")
	if err != nil {
		return "", err
	}
	plugin, err := bins("flannel")
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	p := filepath.Join(dir, "flannel.tar")
	err = WriteImage(p, ImageSpec{
		Ref:          "ghcr.io/flannel-io/flannel:" + FlannelVersion,
		Files:        map[string]string{"/opt/bin/flanneld": flanneld, "/flannel": plugin},
		HostPrograms: append([]string{"/usr/bin/cp"}, iptablesPrograms...),
		HostDirs:     []string{iptablesModules},
		Entrypoint:   []string{"/opt/bin/flanneld"},
	})
	return p, err
}
