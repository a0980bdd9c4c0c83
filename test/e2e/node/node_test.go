//go:build linux

package node_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/capov/capov/test/e2e/node"
	"github.com/capov/capov/test/testpki"
)

// appImage is the smoke test's workload image, built from internal/e2eapp for linux/amd64
// and linux/arm64, in the OCI-layout shape of the product's image archives.
const (
	appImage   = "e2e.local/e2eapp:v1"
	appPackage = "github.com/capov/capov/test/e2e/node/internal/e2eapp"
	namespace  = "smoke"
)

// TestNode brings a node up, runs workloads shaped like the product's (nonroot 65532, a Secret
// mounted 0440 read through fsGroup, a TLS validating webhook behind a Service, a Service
// reached by its DNS name), tears the node down and checks nothing is left.
func TestNode(t *testing.T) {
	if os.Getenv("CAPOV_E2E") != "1" {
		t.Skip("the e2e node test builds a real cluster as root in private Linux namespaces; run it through make e2e or hack/e2e.sh ./test/e2e/node (which set CAPOV_E2E=1)")
	}
	g := NewWithT(t)
	g.Expect(node.CheckIsolation()).To(Succeed())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()

	var assets []string
	for _, env := range []string{"KUBEBUILDER_ASSETS", "NODE_ASSETS"} {
		g.Expect(os.Getenv(env)).NotTo(BeEmpty(), "%s must name the directory of the binaries (hack/e2e.sh sets it)", env)
		assets = append(assets, filepath.SplitList(os.Getenv(env))...)
	}
	work := os.Getenv("E2E_WORKDIR")
	if work == "" {
		work = t.TempDir()
	} else {
		g.Expect(os.MkdirAll(work, 0o755)).To(Succeed())
	}

	start := time.Now()
	archive := buildAppImage(ctx, t, t.TempDir())
	t.Logf("Built %s for linux/amd64 and linux/arm64 in %s", appImage, time.Since(start).Round(time.Millisecond))

	start = time.Now()
	c, err := node.Up(ctx, node.Options{WorkDir: work, Assets: assets, Out: testWriter{t}})
	g.Expect(err).NotTo(HaveOccurred())
	upTime := time.Since(start)
	t.Logf("Cluster up in %s (kubeconfig %s)", upTime.Round(time.Millisecond), c.Kubeconfig())
	downDone := false
	t.Cleanup(func() {
		if t.Failed() {
			var buf bytes.Buffer
			c.DumpLogs(&buf, 40)
			t.Log(buf.String())
		}
		if !downDone {
			_ = c.Down(context.Background())
		}
	})
	cs, err := kubernetes.NewForConfig(c.RestConfig())
	g.Expect(err).NotTo(HaveOccurred())

	t.Run("node is Ready with its InternalIP", func(t *testing.T) {
		g := NewWithT(t)
		n, err := cs.CoreV1().Nodes().Get(ctx, c.NodeName(), metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n.Status.Addresses).To(ContainElement(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: c.NodeIP()}))
		g.Expect(n.Status.Conditions).To(ContainElement(And(
			HaveField("Type", corev1.NodeReady), HaveField("Status", corev1.ConditionTrue))))
	})

	start = time.Now()
	g.Expect(c.ImportImage(ctx, archive)).To(Succeed())
	t.Logf("Imported %s in %s", appImage, time.Since(start).Round(time.Millisecond))

	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: namespace, Labels: map[string]string{"e2e.capov.io/smoke": "true"},
	}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	t.Run("a nonroot Deployment reads its 0440 Secret through fsGroup and is reached by DNS name", func(t *testing.T) {
		g := NewWithT(t)
		_, err := cs.CoreV1().Secrets(namespace).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "web-secret"},
			StringData: map[string]string{"key": "top-secret"},
		}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		deploy := appDeployment("web", 2, []string{"serve", "-addr", ":8080", "-secret", "/etc/secret/key"},
			"web-secret", "/etc/secret", 8080, corev1.URISchemeHTTP)
		_, err = cs.AppsV1().Deployments(namespace).Create(ctx, deploy, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		_, err = cs.CoreV1().Services(namespace).Create(ctx, appService("web", 80, 8080), metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		waitAvailable(ctx, g, cs, "web")

		client := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "client"},
			Spec: corev1.PodSpec{
				RestartPolicy:   corev1.RestartPolicyNever,
				SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](65532), RunAsNonRoot: ptr.To(true)},
				Containers: []corev1.Container{{
					Name: "get", Image: appImage, ImagePullPolicy: corev1.PullIfNotPresent,
					// The short name: resolv.conf's search path and CoreDNS.
					Args:            []string{"get", "http://web/"},
					SecurityContext: restricted(),
				}},
			},
		}
		_, err = cs.CoreV1().Pods(namespace).Create(ctx, client, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Eventually(func(g Gomega) {
			p, err := cs.CoreV1().Pods(namespace).Get(ctx, "client", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.Status.Phase).NotTo(Equal(corev1.PodFailed), "client pod failed: %s", podLogs(ctx, cs, "client"))
			g.Expect(p.Status.Phase).To(Equal(corev1.PodSucceeded))
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
		// The logs come from the kubelet through the API server (InternalIP addressing,
		// the kubelet's serving certificate signed by the cluster CA).
		out := podLogs(ctx, cs, "client")
		t.Logf("client pod: %s", out)
		g.Expect(out).To(ContainSubstring("uid=65532 gid=65532 groups=[65532]"))
		g.Expect(out).To(ContainSubstring(`secret="top-secret"`))
		g.Expect(out).To(MatchRegexp(`host=web-[a-z0-9]+-[a-z0-9]+`))
	})

	t.Run("a TLS validating webhook behind a Service denies an object", func(t *testing.T) {
		g := NewWithT(t)
		caPEM, certPEM, keyPEM := webhookCerts(t, "webhook."+namespace+".svc")
		_, err := cs.CoreV1().Secrets(namespace).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "webhook-tls"},
			Type:       corev1.SecretTypeTLS,
			Data:       map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM},
		}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		deploy := appDeployment("webhook", 1, []string{"webhook", "-addr", ":8443", "-cert-dir", "/certs"},
			"webhook-tls", "/certs", 8443, corev1.URISchemeHTTPS)
		_, err = cs.AppsV1().Deployments(namespace).Create(ctx, deploy, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		_, err = cs.CoreV1().Services(namespace).Create(ctx, appService("webhook", 443, 8443), metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		waitAvailable(ctx, g, cs, "webhook")

		_, err = cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: "capov-e2e-smoke"},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{
				Name: "deny.smoke.e2e.capov.io",
				ClientConfig: admissionregistrationv1.WebhookClientConfig{
					Service:  &admissionregistrationv1.ServiceReference{Namespace: namespace, Name: "webhook", Path: ptr.To("/validate"), Port: ptr.To[int32](443)},
					CABundle: caPEM,
				},
				Rules: []admissionregistrationv1.RuleWithOperations{{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
				}},
				NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"e2e.capov.io/smoke": "true"}},
				FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
				SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
				AdmissionReviewVersions: []string{"v1"},
				TimeoutSeconds:          ptr.To[int32](5),
			}},
		}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())

		// The first calls can fail while the configuration reaches the API server's cache.
		g.Eventually(func() error {
			_, err := cs.CoreV1().ConfigMaps(namespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "allowed"}}, metav1.CreateOptions{})
			return err
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
		g.Eventually(func() error {
			_, err := cs.CoreV1().ConfigMaps(namespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "deny-me"}}, metav1.CreateOptions{})
			return err
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(500 * time.Millisecond).Should(
			MatchError(ContainSubstring("e2eapp denies objects named deny-me")))
	})

	total, byName := c.Memory()
	t.Logf("Resident memory of the node's processes: %d MiB (%s)", total>>20, topMemory(byName, 10))
	// The cgroup v1 peak includes the page cache of the node's files (images, logs, tmpfs).
	if b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/memory", c.CgroupName(), "memory.max_usage_in_bytes")); err == nil {
		if peak, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil {
			t.Logf("Peak memory of the node's cgroup (with page cache): %d MiB", peak>>20)
		}
	}

	start = time.Now()
	cgroupName, work := c.CgroupName(), c.WorkDir()
	g.Expect(c.Down(ctx)).To(Succeed())
	downDone = true
	t.Logf("Cluster down in %s", time.Since(start).Round(time.Millisecond))

	t.Run("nothing is left after Down", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(cgroupName).To(HavePrefix("capov-e2e-"))
		dirs, err := filepath.Glob("/sys/fs/cgroup/*/" + cgroupName)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(dirs).To(BeEmpty(), "cgroup directories left")
		g.Expect(processesOf(t, cgroupName)).To(BeEmpty(), "processes left")
		mounts, err := os.ReadFile("/proc/self/mountinfo")
		g.Expect(err).NotTo(HaveOccurred())
		for _, l := range strings.Split(string(mounts), "\n") {
			f := strings.Fields(l)
			if len(f) > 4 {
				g.Expect(f[4]).NotTo(HavePrefix(work), "mount left below the work directory")
				g.Expect(f[4]).NotTo(BeElementOf("/run", "/var/lib/kubelet", "/var/lib/cni"), "tmpfs left")
			}
		}
	})
}

// buildAppImage compiles internal/e2eapp for both platforms and writes its image archive.
func buildAppImage(ctx context.Context, t *testing.T, dir string) string {
	t.Helper()
	binaries := map[string]string{}
	for _, arch := range []string{"amd64", "arm64"} {
		out := filepath.Join(dir, "e2eapp-"+arch)
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, appPackage)
		// Offline inside the namespaces: everything comes from the module cache.
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch, "GOPROXY=off", "GOFLAGS=-buildvcs=false")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("building %s for %s: %v\n%s", appPackage, arch, err, b)
		}
		binaries["linux/"+arch] = out
	}
	archive := filepath.Join(dir, "e2eapp.tar")
	if err := node.WriteImageArchive(archive, node.Image{Ref: appImage, Binaries: binaries}); err != nil {
		t.Fatal(err)
	}
	return archive
}

// appDeployment runs e2eapp like the product's pods run: nonroot 65532 (runAsGroup unset, so
// the group comes from the image), fsGroup 65532 so that the Secret mounted 0440 is readable
// (real-node.md step 5, case B), restricted container security.
func appDeployment(name string, replicas int32, args []string, secret, mountPath string, port int32, scheme corev1.URIScheme) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr.To(true),
						RunAsUser:      ptr.To[int64](65532),
						FSGroup:        ptr.To[int64](65532),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name: name, Image: appImage, ImagePullPolicy: corev1.PullIfNotPresent,
						Args:  args,
						Ports: []corev1.ContainerPort{{ContainerPort: port}},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(port), Scheme: scheme}},
							PeriodSeconds: 1,
						},
						SecurityContext: restricted(),
						VolumeMounts:    []corev1.VolumeMount{{Name: "secret", MountPath: mountPath, ReadOnly: true}},
					}},
					Volumes: []corev1.Volume{{
						Name:         "secret",
						VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret, DefaultMode: ptr.To[int32](0o440)}},
					}},
				},
			},
		},
	}
}

func restricted() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

func appService(name string, port, target int32) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Port: port, TargetPort: intstr.FromInt32(target)}},
		},
	}
}

func waitAvailable(ctx context.Context, g *WithT, cs kubernetes.Interface, name string) {
	g.Eventually(func(g Gomega) {
		d, err := cs.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(d.Status.ObservedGeneration).To(BeNumerically(">=", d.Generation))
		g.Expect(d.Status.AvailableReplicas).To(Equal(*d.Spec.Replicas), "deployment %s: %+v", name, d.Status.Conditions)
	}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(250 * time.Millisecond).Should(Succeed())
}

func podLogs(ctx context.Context, cs kubernetes.Interface, pod string) string {
	b, err := cs.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		return fmt.Sprintf("(no logs: %v)", err)
	}
	return strings.TrimSpace(string(b))
}

// webhookCerts makes a CA and a serving certificate for a Service DNS name.
func webhookCerts(t *testing.T, dnsName string) (caPEM, certPEM, keyPEM []byte) {
	t.Helper()
	s, err := testpki.New("smoke-webhook-ca", dnsName, dnsName+".cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	return s.CAPEM, s.CertPEM, s.KeyPEM
}

// processesOf lists the live processes that are in the node's cgroup subtree, or in this
// process's network namespace, other than this process and its ancestors (the wrapper and
// unshare).
func processesOf(t *testing.T, cgroupName string) []string {
	t.Helper()
	self, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	ancestors := map[int]bool{}
	for pid := os.Getpid(); pid > 1; {
		ancestors[pid] = true
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			break
		}
		f := statFields(b)
		if len(f) < 2 {
			break
		}
		pid, _ = strconv.Atoi(f[1])
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || ancestors[pid] {
			continue
		}
		// A zombie holds no namespace, cgroup or mount any more (those go at exit); killed
		// shims and container processes are orphans that init reaps in its own time.
		if stat, err := os.ReadFile("/proc/" + e.Name() + "/stat"); err != nil || processState(stat) == "Z" {
			continue
		}
		comm, _ := os.ReadFile("/proc/" + e.Name() + "/comm")
		cg, _ := os.ReadFile("/proc/" + e.Name() + "/cgroup")
		ns, _ := os.Readlink("/proc/" + e.Name() + "/ns/net")
		if bytes.Contains(cg, []byte("/"+cgroupName)) || ns == self {
			left = append(left, fmt.Sprintf("%d (%s)", pid, strings.TrimSpace(string(comm))))
		}
	}
	return left
}

// statFields are the fields of /proc/<pid>/stat after "pid (comm)": state, ppid, ...
func statFields(stat []byte) []string {
	return strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
}

func processState(stat []byte) string {
	if f := statFields(stat); len(f) > 0 {
		return f[0]
	}
	return ""
}

func topMemory(byName map[string]uint64, n int) string {
	names := make([]string, 0, len(byName))
	for k := range byName {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool { return byName[names[i]] > byName[names[j]] })
	if len(names) > n {
		names = names[:n]
	}
	parts := make([]string, 0, len(names))
	for _, k := range names {
		parts = append(parts, fmt.Sprintf("%s %d MiB", k, byName[k]>>20))
	}
	return strings.Join(parts, ", ")
}

// testWriter sends node progress lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
