package charts

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// The kubelet writes Secret volume files owned by root, group root, or group fsGroup when the pod
// sets one, with the volume's defaultMode (or an item's mode; 0644 when neither is set). A mode
// that is not world-readable (0440 for the certificates) is then readable by the container only
// through its group: fsGroup, or a runAsGroup equal to the file's group. The images run as
// distroless nonroot, USER 65532:65532, so without fsGroup the webhook cannot open its tls.key on
// a real node (measured: /work/shared/reference/real-node.md, step 5). envtest runs no pods,
// so these tests compute the access the kubelet would grant.

// defaultSecretMode is the API default of secret.defaultMode and projected.defaultMode.
const defaultSecretMode int32 = 0o644

// imageUser is the user and group a container image runs as (its USER uid:gid).
type imageUser struct{ uid, gid int64 }

// imageUserOf reads USER uid:gid from Dockerfile.<container>; the binaries' images are built from
// them, so the check uses the user the real pods start with.
func imageUserOf(t *testing.T, container string) imageUser {
	t.Helper()
	f := "Dockerfile." + container
	b, err := os.ReadFile(filepath.Join(root, f))
	if err != nil {
		t.Fatalf("container %s: no image user known (%v)", container, err)
	}
	m := regexp.MustCompile(`(?m)^USER\s+([0-9]+):([0-9]+)\s*$`).FindAllSubmatch(b, -1)
	if len(m) == 0 {
		t.Fatalf("%s must end with a numeric USER uid:gid (the group decides who reads the mounted Secrets)", f)
	}
	last := m[len(m)-1]
	uid, _ := strconv.ParseInt(string(last[1]), 10, 64)
	gid, _ := strconv.ParseInt(string(last[2]), 10, 64)
	return imageUser{uid: uid, gid: gid}
}

// process is the identity of a container's process as the runtime starts it.
type process struct {
	uid, gid int64
	groups   []int64
}

// processOf resolves a container's identity: the container's runAsUser/runAsGroup, else the
// pod's, else the image's USER. A runAsUser without a runAsGroup takes the primary group of that
// uid from the image's /etc/passwd (real-node.md case A); only the image user's own entry is
// known here, any other uid gets group 0 (case C). fsGroup and supplementalGroups are
// supplementary groups of every container.
func processOf(pod *corev1.PodSpec, c *corev1.Container, img imageUser) process {
	psc := pod.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	csc := c.SecurityContext
	if csc == nil {
		csc = &corev1.SecurityContext{}
	}
	uid, gid := img.uid, img.gid
	userSet := false
	for _, u := range []*int64{psc.RunAsUser, csc.RunAsUser} {
		if u != nil {
			uid, userSet = *u, true
		}
	}
	if userSet && uid != img.uid {
		gid = 0
	}
	for _, g := range []*int64{psc.RunAsGroup, csc.RunAsGroup} {
		if g != nil {
			gid = *g
		}
	}
	p := process{uid: uid, gid: gid, groups: append([]int64{}, psc.SupplementalGroups...)}
	if psc.FSGroup != nil {
		p.groups = append(p.groups, *psc.FSGroup)
	}
	return p
}

// secretFile is one file of a Secret volume as the kubelet writes it.
type secretFile struct {
	volume, key string
	mode        int32
}

// secretFiles lists the files of a Secret or projected-Secret volume with their modes ("*" for
// every key when the volume does not list items).
func secretFiles(v corev1.Volume) []secretFile {
	var out []secretFile
	add := func(defaultMode *int32, items []corev1.KeyToPath) {
		mode := ptr.Deref(defaultMode, defaultSecretMode)
		if len(items) == 0 {
			out = append(out, secretFile{volume: v.Name, key: "*", mode: mode})
		}
		for _, it := range items {
			out = append(out, secretFile{volume: v.Name, key: it.Key, mode: ptr.Deref(it.Mode, mode)})
		}
	}
	switch {
	case v.Secret != nil:
		add(v.Secret.DefaultMode, v.Secret.Items)
	case v.Projected != nil:
		for _, s := range v.Projected.Sources {
			if s.Secret != nil {
				add(v.Projected.DefaultMode, s.Secret.Items)
			}
		}
	}
	return out
}

// canRead reports whether p may read a file owned by root and group fileGroup with mode.
func canRead(p process, fileGroup int64, mode int32) bool {
	switch {
	case mode&0o004 != 0:
		return true
	case mode&0o040 != 0 && (p.gid == fileGroup || slices.Contains(p.groups, fileGroup)):
		return true
	default:
		return mode&0o400 != 0 && p.uid == 0
	}
}

// unreadableSecrets lists, for every container of a pod, the mounted Secret files its process
// cannot read, and counts the mounted files that are not world-readable (so a caller can tell
// that the check had something to check).
func unreadableSecrets(pod *corev1.PodSpec, userOf func(container string) imageUser) (problems []string, restricted int) {
	fileGroup := ptr.Deref(pod.SecurityContext, corev1.PodSecurityContext{}).FSGroup
	group := ptr.Deref(fileGroup, 0)
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	for _, c := range append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...) {
		p := processOf(pod, &c, userOf(c.Name))
		for _, m := range c.VolumeMounts {
			for _, f := range secretFiles(volumes[m.Name]) {
				if f.mode&0o004 != 0 {
					continue
				}
				restricted++
				if !canRead(p, group, f.mode) {
					problems = append(problems, fmt.Sprintf(
						"container %s (uid %d, gid %d, groups %v) cannot read %s/%s of volume %s: mode %#o, owner 0:%d; set the pod's fsGroup to the container's group",
						c.Name, p.uid, p.gid, p.groups, m.MountPath, f.key, f.volume, f.mode, group))
				}
			}
		}
	}
	return problems, restricted
}

func TestSecretAccessFollowsTheKubeletsOwnershipRules(t *testing.T) {
	nonroot := imageUser{uid: 65532, gid: 65532}
	mode := func(m int32) *int32 { return &m }
	pod := func(psc *corev1.PodSecurityContext, volMode *int32, items ...corev1.KeyToPath) *corev1.PodSpec {
		return &corev1.PodSpec{
			SecurityContext: psc,
			Containers: []corev1.Container{{
				Name:         "app",
				VolumeMounts: []corev1.VolumeMount{{Name: "cert", MountPath: "/certs", ReadOnly: true}},
			}},
			Volumes: []corev1.Volume{{Name: "cert", VolumeSource: corev1.VolumeSource{
				Secret: &corev1.SecretVolumeSource{SecretName: "s", DefaultMode: volMode, Items: items},
			}}},
		}
	}
	tests := []struct {
		name       string
		pod        *corev1.PodSpec
		img        imageUser
		readable   bool
		restricted int
	}{
		{"runAsUser without fsGroup cannot read 0440 (real node, case A)",
			pod(&corev1.PodSecurityContext{RunAsUser: ptr.To[int64](65532)}, mode(0o440)), nonroot, false, 1},
		{"runAsUser with fsGroup reads 0440 (real node, case B)",
			pod(&corev1.PodSecurityContext{RunAsUser: ptr.To[int64](65532), FSGroup: ptr.To[int64](65532)}, mode(0o440)), nonroot, true, 1},
		{"another uid without a passwd entry runs with gid 0 and reads root's group (real node, case C)",
			pod(&corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000)}, mode(0o440)), nonroot, true, 1},
		{"no security context cannot read 0440 (real node, case D)",
			pod(nil, mode(0o440)), nonroot, false, 1},
		{"runAsNonRoot alone, like the old chart, cannot read 0440 (real node, case E)",
			pod(&corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}, mode(0o440)), nonroot, false, 1},
		{"fsGroup other than the process group still reads: it is a supplementary group",
			pod(&corev1.PodSecurityContext{FSGroup: ptr.To[int64](2000)}, mode(0o440)), nonroot, true, 1},
		{"runAsGroup 0 reads a root-group file without fsGroup",
			pod(&corev1.PodSecurityContext{RunAsGroup: ptr.To[int64](0)}, mode(0o440)), nonroot, true, 1},
		{"owner-only 0400 is unreadable for a non-root user even with fsGroup",
			pod(&corev1.PodSecurityContext{FSGroup: ptr.To[int64](65532)}, mode(0o400)), nonroot, false, 1},
		{"the API default 0644 is world-readable and not counted",
			pod(nil, nil), nonroot, true, 0},
		{"an item mode overrides a world-readable defaultMode",
			pod(nil, mode(0o644), corev1.KeyToPath{Key: "tls.key", Path: "tls.key", Mode: mode(0o440)}), nonroot, false, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			problems, restricted := unreadableSecrets(tt.pod, func(string) imageUser { return tt.img })
			g.Expect(restricted).To(Equal(tt.restricted))
			if tt.readable {
				g.Expect(problems).To(BeEmpty())
			} else {
				g.Expect(problems).To(HaveLen(1))
			}
		})
	}
}

func TestEveryContainerCanReadTheSecretsItMounts(t *testing.T) {
	userOf := func(container string) imageUser { return imageUserOf(t, container) }
	secretMode := secretModeValues(t)
	expectReadable := func(t *testing.T, d *appsv1.Deployment) {
		t.Helper()
		g := NewWithT(t)
		problems, restricted := unreadableSecrets(&d.Spec.Template.Spec, userOf)
		g.Expect(problems).To(BeEmpty(), "Deployment %s", d.Name)
		if d.Name == webhookDeployment {
			g.Expect(restricted).To(BeNumerically(">", 0), "the webhook mounts its serving certificate 0440")
		}
	}
	variants := []struct{ name, values string }{
		{"defaults (metrics certificate on)", ``},
		{"metrics certificate off", `metrics: {certificate: {enabled: false}}`},
		{"webhook metrics on", `metrics: {webhook: {enabled: true}}`},
		{"an own issuer", `certManager: {issuerRef: {kind: ClusterIssuer, name: platform-ca}}`},
		{"certificates from a Secret", secretMode},
		{"certificates from a Secret, metrics certificate off", secretMode + `metrics: {certificate: {enabled: false}}`},
		{"certificates from Secrets of other names", secretMode + `  secretName: my-webhook-tls
metrics: {certificate: {secretName: my-metrics-tls}}`},
		{"another user and group", `podSecurityContext: {runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000}`},
	}
	for _, v := range variants {
		t.Run("chart: "+v.name, func(t *testing.T) {
			r := mustRender(t, values(t, v.values))
			var n int
			for _, o := range r.objs {
				if o.GetKind() != "Deployment" {
					continue
				}
				n++
				d := &appsv1.Deployment{}
				decodeStrict(t, o, d)
				expectReadable(t, d)
			}
			NewWithT(t).Expect(n).To(Equal(2))
		})
	}
	t.Run("clusterctl components (config/default)", func(t *testing.T) {
		objs, err := parseYAMLDocs([]byte(envsubst(t, string(kustomize(t)), nil)))
		if err != nil {
			t.Fatal(err)
		}
		var n int
		for _, o := range objs {
			if o.GetKind() != "Deployment" {
				continue
			}
			n++
			d := &appsv1.Deployment{}
			decodeStrict(t, o, d)
			expectReadable(t, d)
		}
		NewWithT(t).Expect(n).To(Equal(2))
	})
}
