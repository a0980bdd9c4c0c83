package charts

import (
	"strings"
	"testing"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	. "github.com/onsi/gomega"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/capov/capov/pkg/featuregates"
)

const (
	managerDeployment = "capov-controller-manager"
	webhookDeployment = "capov-webhook"
	defaultGates      = "--feature-gates=disk-add-vm-name=false,disk-clone=false,disk-keep-template-name=true"
	certDir           = "/tmp/k8s-webhook-server/serving-certs"
)

func managerOf(t *testing.T, r *rendered) (*appsv1.Deployment, *corev1.Container) {
	t.Helper()
	d := get[appsv1.Deployment](t, r, "Deployment", managerDeployment)
	return d, containerNamed(t, d, "manager")
}

func webhookOf(t *testing.T, r *rendered) (*appsv1.Deployment, *corev1.Container) {
	t.Helper()
	d := get[appsv1.Deployment](t, r, "Deployment", webhookDeployment)
	return d, containerNamed(t, d, "webhook")
}

func containerNamed(t *testing.T, d *appsv1.Deployment, name string) *corev1.Container {
	t.Helper()
	for i := range d.Spec.Template.Spec.Containers {
		if c := &d.Spec.Template.Spec.Containers[i]; c.Name == name {
			return c
		}
	}
	t.Fatalf("Deployment %s has no container %q", d.Name, name)
	return nil
}

func TestDefaultsRenderTheDocumentedObjects(t *testing.T) {
	g := NewWithT(t)
	r := mustRender(t, nil)

	g.Expect(r.kinds()).To(ConsistOf(
		"ClusterRole/capov-manager-role",
		"ClusterRole/capov-metrics-reader",
		"ClusterRole/capov-webhook-role",
		"ClusterRoleBinding/capov-manager-rolebinding",
		"ClusterRoleBinding/capov-webhook-rolebinding",
		"Role/capov-leader-election-role",
		"RoleBinding/capov-leader-election-rolebinding",
		"Role/capov-manager-role",
		"RoleBinding/capov-manager-rolebinding",
		"ServiceAccount/capov-manager",
		"ServiceAccount/capov-webhook",
		"Deployment/capov-controller-manager",
		"Deployment/capov-webhook",
		"PodDisruptionBudget/capov-webhook",
		"Service/capov-metrics-service",
		"Service/capov-webhook-service",
		"Issuer/capov-selfsigned-issuer",
		"Certificate/capov-serving-cert",
		"Certificate/capov-metrics-cert",
		"MutatingWebhookConfiguration/capov-mutating-webhook-configuration",
		"ValidatingWebhookConfiguration/capov-validating-webhook-configuration",
	), "no ServiceMonitor without the monitoring.coreos.com/v1 API")
	for _, o := range r.objs {
		g.Expect(o.GetLabels()).To(HaveKeyWithValue("cluster.x-k8s.io/provider", "infrastructure-ovirt"), o.GetKind()+"/"+o.GetName())
		if o.GetNamespace() != "" {
			g.Expect(o.GetNamespace()).To(Equal(namespace), o.GetKind()+"/"+o.GetName())
		}
	}
}

func TestManagerDeploymentMatchesTheProductDoc(t *testing.T) {
	g := NewWithT(t)
	r := mustRender(t, nil)
	d, c := managerOf(t, r)
	appVersion := loadChart(t, "capov").Metadata.AppVersion

	g.Expect(d.Spec.Replicas).To(HaveValue(BeEquivalentTo(1)))
	g.Expect(d.Spec.Template.Labels).To(HaveKeyWithValue("control-plane", "controller-manager"))
	g.Expect(d.Spec.Template.Spec.ServiceAccountName).To(Equal("capov-manager"))
	g.Expect(c.Image).To(Equal("ghcr.io/capov/capov-manager:" + appVersion))
	g.Expect(c.Command).To(Equal([]string{"/manager"}))
	g.Expect(c.Args).To(Equal([]string{"--metrics-bind-address=:8443", "--leader-elect", defaultGates,
		"--metrics-cert-dir=/tmp/k8s-metrics-server/metrics-certs"}))
	g.Expect(c.Env).To(ContainElement(corev1.EnvVar{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"},
	}}))
	g.Expect(c.Ports).To(ContainElements(
		corev1.ContainerPort{Name: "https-metrics", ContainerPort: 8443, Protocol: corev1.ProtocolTCP},
		corev1.ContainerPort{Name: "health", ContainerPort: 8081, Protocol: corev1.ProtocolTCP},
	))
	g.Expect(c.LivenessProbe.HTTPGet.Path).To(Equal("/healthz"))
	g.Expect(c.LivenessProbe.HTTPGet.Port).To(Equal(intstr.FromString("health")))
	g.Expect(c.ReadinessProbe.HTTPGet.Path).To(Equal("/readyz"))
	g.Expect(c.ReadinessProbe.HTTPGet.Port).To(Equal(intstr.FromString("health")))
	// Running reconciles get the manager's 30s graceful shutdown before the kubelet kills it.
	g.Expect(d.Spec.Template.Spec.TerminationGracePeriodSeconds).To(HaveValue(BeNumerically(">", 30)))

	svc := get[corev1.Service](t, r, "Service", "capov-metrics-service")
	g.Expect(svc.Spec.Ports).To(HaveLen(1))
	g.Expect(svc.Spec.Ports[0].Name).To(Equal("https"))
	g.Expect(svc.Spec.Ports[0].Port).To(BeEquivalentTo(8443))
	g.Expect(svc.Spec.Ports[0].TargetPort).To(Equal(intstr.FromString("https-metrics")))
	g.Expect(svc.Spec.Selector).To(HaveKeyWithValue("control-plane", "controller-manager"))
	g.Expect(labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels))).To(BeTrue())
	g.Expect(labels.SelectorFromSet(d.Spec.Selector.MatchLabels).Matches(labels.Set(d.Spec.Template.Labels))).To(BeTrue())

	web, _ := webhookOf(t, r)
	g.Expect(labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(web.Spec.Template.Labels))).To(BeFalse(),
		"the metrics Service must select only the manager")
}

func TestAffinityDefaultsToAPreferredInfraNodeTerm(t *testing.T) {
	want := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
			Weight: 100,
			Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key: "node-role.kubernetes.io/infra", Operator: corev1.NodeSelectorOpExists,
			}}},
		}},
	}}
	t.Run("both Deployments prefer infra nodes and require nothing", func(t *testing.T) {
		g := NewWithT(t)
		r := mustRender(t, nil)
		for _, name := range []string{managerDeployment, webhookDeployment} {
			d := get[appsv1.Deployment](t, r, "Deployment", name)
			g.Expect(d.Spec.Template.Spec.Affinity).To(Equal(want), name)
			g.Expect(d.Spec.Template.Spec.NodeSelector).To(BeEmpty(), name)
			g.Expect(d.Spec.Template.Spec.Tolerations).To(BeEmpty(), name)
		}
	})
	t.Run("webhook scheduling values replace the shared ones", func(t *testing.T) {
		g := NewWithT(t)
		r := mustRender(t, values(t, `
nodeSelector: {node-role.kubernetes.io/infra: ""}
tolerations: [{key: infra, operator: Exists, effect: NoSchedule}]
webhook:
  nodeSelector: {kubernetes.io/os: linux}
`))
		m, _ := managerOf(t, r)
		w, _ := webhookOf(t, r)
		g.Expect(m.Spec.Template.Spec.NodeSelector).To(Equal(map[string]string{"node-role.kubernetes.io/infra": ""}))
		g.Expect(w.Spec.Template.Spec.NodeSelector).To(Equal(map[string]string{"kubernetes.io/os": "linux"}))
		g.Expect(w.Spec.Template.Spec.Tolerations).To(Equal(m.Spec.Template.Spec.Tolerations))
		g.Expect(w.Spec.Template.Spec.Tolerations).To(HaveLen(1))
	})
}

func TestPodsMeetTheRestrictedPodSecurityStandard(t *testing.T) {
	r := mustRender(t, nil)
	for _, name := range []string{managerDeployment, webhookDeployment} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			d := get[appsv1.Deployment](t, r, "Deployment", name)
			pod := d.Spec.Template.Spec
			g.Expect(pod.SecurityContext.RunAsNonRoot).To(HaveValue(BeTrue()))
			g.Expect(pod.SecurityContext.SeccompProfile).To(Equal(&corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}))
			// The images' nonroot user, explicit, and its group owning the mounted Secrets
			// (TestEveryContainerCanReadTheSecretsItMounts checks the access itself).
			g.Expect(pod.SecurityContext.RunAsUser).To(HaveValue(BeEquivalentTo(65532)))
			g.Expect(pod.SecurityContext.RunAsGroup).To(HaveValue(BeEquivalentTo(65532)))
			g.Expect(pod.SecurityContext.FSGroup).To(HaveValue(BeEquivalentTo(65532)))
			g.Expect(pod.AutomountServiceAccountToken).To(HaveValue(BeTrue()), "both binaries call the API server")
			g.Expect(pod.HostNetwork || pod.HostPID || pod.HostIPC).To(BeFalse())
			for _, c := range append(pod.InitContainers, pod.Containers...) {
				sc := c.SecurityContext
				g.Expect(sc).NotTo(BeNil(), c.Name)
				g.Expect(sc.AllowPrivilegeEscalation).To(HaveValue(BeFalse()), c.Name)
				g.Expect(sc.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()), c.Name)
				g.Expect(sc.RunAsNonRoot).To(HaveValue(BeTrue()), c.Name)
				g.Expect(sc.Privileged).To(Or(BeNil(), HaveValue(BeFalse())), c.Name)
				g.Expect(sc.Capabilities.Drop).To(Equal([]corev1.Capability{"ALL"}), c.Name)
				g.Expect(sc.Capabilities.Add).To(BeEmpty(), c.Name)
				env := map[string]corev1.EnvVar{}
				for _, e := range c.Env {
					env[e.Name] = e
				}
				g.Expect(env).To(HaveKey("POD_NAMESPACE"), c.Name)
				g.Expect(env["POD_NAMESPACE"].ValueFrom.FieldRef.FieldPath).To(Equal("metadata.namespace"), c.Name)
			}
			for _, v := range pod.Volumes {
				g.Expect(v.HostPath).To(BeNil(), v.Name)
			}
		})
	}
}

func TestWebhookIsHighlyAvailableAndServesTheCertManagerCertificate(t *testing.T) {
	g := NewWithT(t)
	r := mustRender(t, nil)
	d, c := webhookOf(t, r)
	appVersion := loadChart(t, "capov").Metadata.AppVersion

	g.Expect(d.Spec.Replicas).To(HaveValue(BeEquivalentTo(2)))
	g.Expect(d.Spec.Template.Spec.ServiceAccountName).To(Equal("capov-webhook"))
	g.Expect(c.Image).To(Equal("ghcr.io/capov/capov-webhook:" + appVersion))
	g.Expect(c.Command).To(Equal([]string{"/webhook"}))
	g.Expect(c.Args).To(ConsistOf(
		"--webhook-port=9443", "--cert-dir="+certDir, "--metrics-bind-address=:8443",
		"--health-probe-bind-address=:8081", defaultGates, "--metrics-cert-dir=/tmp/k8s-metrics-server/metrics-certs"))
	g.Expect(c.LivenessProbe.HTTPGet.Path).To(Equal("/healthz"))
	g.Expect(c.ReadinessProbe.HTTPGet.Path).To(Equal("/readyz"))

	// The serving certificate: Certificate -> Secret -> volume mounted read-only at --cert-dir.
	cert := get[cmv1.Certificate](t, r, "Certificate", "capov-serving-cert")
	issuer := get[cmv1.Issuer](t, r, "Issuer", "capov-selfsigned-issuer")
	g.Expect(issuer.Spec.SelfSigned).NotTo(BeNil())
	g.Expect(cert.Spec.IssuerRef.Name).To(Equal(issuer.Name))
	g.Expect(cert.Spec.IssuerRef.Kind).To(Equal("Issuer"))
	g.Expect(cert.Spec.DNSNames).To(ContainElement("capov-webhook-service." + namespace + ".svc"))
	var mount *corev1.VolumeMount
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].MountPath == certDir {
			mount = &c.VolumeMounts[i]
		}
	}
	g.Expect(mount).NotTo(BeNil(), "the certificate must be mounted at --cert-dir")
	g.Expect(mount.ReadOnly).To(BeTrue())
	var secretName string
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == mount.Name && v.Secret != nil {
			secretName = v.Secret.SecretName
		}
	}
	g.Expect(secretName).To(Equal(cert.Spec.SecretName))

	// The Service reaches the webhook pods on the webhook port.
	svc := get[corev1.Service](t, r, "Service", "capov-webhook-service")
	g.Expect(labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels))).To(BeTrue())
	g.Expect(svc.Spec.Ports).To(ConsistOf(HaveField("TargetPort", intstr.FromString("webhook-server"))))
	g.Expect(c.Ports).To(ContainElement(corev1.ContainerPort{Name: "webhook-server", ContainerPort: 9443, Protocol: corev1.ProtocolTCP}))

	// Spread over nodes, and a PodDisruptionBudget that keeps one serving.
	g.Expect(d.Spec.Template.Spec.TopologySpreadConstraints).To(HaveLen(1))
	tsc := d.Spec.Template.Spec.TopologySpreadConstraints[0]
	g.Expect(tsc.TopologyKey).To(Equal("kubernetes.io/hostname"))
	g.Expect(tsc.WhenUnsatisfiable).To(Equal(corev1.ScheduleAnyway))
	sel, err := metav1.LabelSelectorAsSelector(tsc.LabelSelector)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sel.Matches(labels.Set(d.Spec.Template.Labels))).To(BeTrue())
	pdb := get[policyv1.PodDisruptionBudget](t, r, "PodDisruptionBudget", "capov-webhook")
	g.Expect(pdb.Spec.MinAvailable).To(HaveValue(Equal(intstr.FromInt32(1))))
	sel, err = metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sel.Matches(labels.Set(d.Spec.Template.Labels))).To(BeTrue())
	m, _ := managerOf(t, r)
	g.Expect(sel.Matches(labels.Set(m.Spec.Template.Labels))).To(BeFalse())

	// The webhook configurations call that Service and get their CA from that Certificate.
	mwc := get[admissionregistrationv1.MutatingWebhookConfiguration](t, r, "MutatingWebhookConfiguration", "capov-mutating-webhook-configuration")
	vwc := get[admissionregistrationv1.ValidatingWebhookConfiguration](t, r, "ValidatingWebhookConfiguration", "capov-validating-webhook-configuration")
	for _, o := range []metav1.Object{mwc, vwc} {
		g.Expect(o.GetAnnotations()).To(HaveKeyWithValue("cert-manager.io/inject-ca-from", namespace+"/"+cert.Name))
	}
	var refs []*admissionregistrationv1.ServiceReference
	for _, w := range mwc.Webhooks {
		g.Expect(w.ClientConfig.CABundle).To(BeEmpty(), "the CA injector owns caBundle")
		refs = append(refs, w.ClientConfig.Service)
	}
	for _, w := range vwc.Webhooks {
		g.Expect(w.ClientConfig.CABundle).To(BeEmpty(), "the CA injector owns caBundle")
		refs = append(refs, w.ClientConfig.Service)
	}
	g.Expect(refs).To(HaveLen(7))
	for _, ref := range refs {
		g.Expect(ref.Name).To(Equal(svc.Name))
		g.Expect(ref.Namespace).To(Equal(namespace))
	}
}

func TestWebhookWithOneReplicaHasNoPodDisruptionBudgetAndAWarning(t *testing.T) {
	g := NewWithT(t)
	r := mustRender(t, values(t, `webhook: {replicas: 1}`))
	g.Expect(r.find("PodDisruptionBudget", "capov-webhook")).To(BeNil(), "minAvailable 1 of 1 would block every drain")
	g.Expect(r.notes).To(ContainSubstring("WARNING: webhook.replicas is 1"))

	r = mustRender(t, nil)
	g.Expect(r.notes).NotTo(ContainSubstring("WARNING"))
}

func TestAnExistingIssuerReplacesTheSelfSignedOne(t *testing.T) {
	g := NewWithT(t)
	r := mustRender(t, values(t, `certManager: {issuerRef: {kind: ClusterIssuer, name: platform-ca}}`))
	g.Expect(r.find("Issuer", "capov-selfsigned-issuer")).To(BeNil())
	cert := get[cmv1.Certificate](t, r, "Certificate", "capov-serving-cert")
	g.Expect(cert.Spec.IssuerRef.Kind).To(Equal("ClusterIssuer"))
	g.Expect(cert.Spec.IssuerRef.Name).To(Equal("platform-ca"))
}

func TestFeatureGatesAreRenderedSortedFromValues(t *testing.T) {
	tests := []struct {
		name   string
		values string
		want   string
	}{
		{"defaults", ``, defaultGates},
		{
			"one gate changed keeps the defaults of the others",
			`featureGates: {disk-clone: true}`,
			"--feature-gates=disk-add-vm-name=false,disk-clone=true,disk-keep-template-name=true",
		},
		{
			"all gates flipped",
			`featureGates: {disk-keep-template-name: false, disk-add-vm-name: true, disk-clone: true}`,
			"--feature-gates=disk-add-vm-name=true,disk-clone=true,disk-keep-template-name=false",
		},
		{
			"a gate set to null is left to the binary's default",
			`featureGates: {disk-keep-template-name: null}`,
			"--feature-gates=disk-add-vm-name=false,disk-clone=false",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			r := mustRender(t, values(t, tt.values))
			_, m := managerOf(t, r)
			_, w := webhookOf(t, r)
			g.Expect(m.Args).To(ContainElement(tt.want))
			g.Expect(w.Args).To(ContainElement(tt.want), "the webhook defaults diskclone from the same gates")
			g.Expect(r.notes).To(ContainSubstring(tt.want))
		})
	}
}

// TestUnknownFeatureGatesAndInvalidValuesAreIgnored: product doc §6 says unknown keys and invalid
// values are ignored. The chart passes them on (before, its schema refused them, and an SSC
// carrying a retired gate broke the whole release update), and the binaries' parser, fed the
// rendered flag, ignores each and names it in a warning, leaving the gates as they were.
func TestUnknownFeatureGatesAndInvalidValuesAreIgnored(t *testing.T) {
	tests := []struct {
		name, values, arg string
		warn              []string
		clone             bool
	}{
		{"a retired or future gate", `featureGates: {disk-magic: true}`,
			"disk-add-vm-name=false,disk-clone=false,disk-keep-template-name=true,disk-magic=true", []string{`unknown feature gate "disk-magic"`}, false},
		{"a typo in a value", `featureGates: {disk-clone: ture}`,
			"disk-add-vm-name=false,disk-clone=ture,disk-keep-template-name=true", []string{`feature gate "disk-clone": invalid value "ture"`}, false},
		{"a value as a string", `featureGates: {disk-clone: "true"}`,
			"disk-add-vm-name=false,disk-clone=true,disk-keep-template-name=true", nil, true},
		{"a value as a number", `featureGates: {disk-clone: 1}`,
			"disk-add-vm-name=false,disk-clone=1,disk-keep-template-name=true", nil, true},
		{"a key that would smuggle another gate", `featureGates: {"x,disk-clone": true}`,
			"disk-add-vm-name=false,disk-clone=false,disk-keep-template-name=true,x_disk-clone=true", []string{`unknown feature gate "x_disk-clone"`}, false},
		{"a value that would smuggle another gate", `featureGates: {disk-add-vm-name: "false,disk-clone=true"}`,
			"disk-add-vm-name=false_disk-clone_true,disk-clone=false,disk-keep-template-name=true", []string{`feature gate "disk-add-vm-name": invalid value`}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			r := mustRender(t, values(t, tt.values))
			_, m := managerOf(t, r)
			_, w := webhookOf(t, r)
			g.Expect(m.Args).To(ContainElement("--feature-gates=" + tt.arg))
			g.Expect(w.Args).To(ContainElement("--feature-gates=" + tt.arg))
			gates, warnings := featuregates.Parse(tt.arg)
			g.Expect(warnings).To(HaveLen(len(tt.warn)))
			for i, want := range tt.warn {
				g.Expect(warnings[i]).To(ContainSubstring(want))
			}
			g.Expect(gates.Enabled(featuregates.DiskClone)).To(Equal(tt.clone))
			g.Expect(gates.Enabled(featuregates.DiskAddVMName)).To(BeFalse())
			g.Expect(gates.Enabled(featuregates.DiskKeepTemplateName)).To(BeTrue())
		})
	}
}

func TestImagesAndArgumentsFollowValues(t *testing.T) {
	t.Run("manager.tag moves both images", func(t *testing.T) {
		g := NewWithT(t)
		r := mustRender(t, values(t, `manager: {tag: "2.14.0"}`))
		_, m := managerOf(t, r)
		_, w := webhookOf(t, r)
		g.Expect(m.Image).To(Equal("ghcr.io/capov/capov-manager:2.14.0"))
		g.Expect(w.Image).To(Equal("ghcr.io/capov/capov-webhook:2.14.0"))
	})
	t.Run("mirrored repositories, own webhook tag, digests, pull settings", func(t *testing.T) {
		g := NewWithT(t)
		digest := "@sha256:" + strings.Repeat("ab", 32)
		r := mustRender(t, values(t, `
manager: {tag: "2.14.0"}
image:
  repository: registry.local:5000/mirror/capov-manager`+digest+`
  pullPolicy: Always
  pullSecrets: [{name: regcred}]
webhook:
  image: {repository: registry.local:5000/mirror/capov-webhook, tag: "2.14.1"}
`))
		md, m := managerOf(t, r)
		wd, w := webhookOf(t, r)
		g.Expect(m.Image).To(Equal("registry.local:5000/mirror/capov-manager" + digest))
		g.Expect(w.Image).To(Equal("registry.local:5000/mirror/capov-webhook:2.14.1"))
		for _, d := range []*appsv1.Deployment{md, wd} {
			g.Expect(d.Spec.Template.Spec.ImagePullSecrets).To(Equal([]corev1.LocalObjectReference{{Name: "regcred"}}))
		}
		g.Expect(m.ImagePullPolicy).To(Equal(corev1.PullAlways))
		g.Expect(w.ImagePullPolicy).To(Equal(corev1.PullAlways))
	})
	t.Run("extra arguments are appended", func(t *testing.T) {
		g := NewWithT(t)
		r := mustRender(t, values(t, `
extraArgs: ["--debug=true", "--watch-filter=team-a"]
webhook: {extraArgs: ["--v=2"]}
`))
		_, m := managerOf(t, r)
		_, w := webhookOf(t, r)
		g.Expect(m.Args).To(Equal([]string{"--metrics-bind-address=:8443", "--leader-elect", defaultGates,
			"--metrics-cert-dir=/tmp/k8s-metrics-server/metrics-certs", "--debug=true", "--watch-filter=team-a"}))
		g.Expect(w.Args).To(ContainElement("--v=2"))
	})
	t.Run("replicas, priority class and resources", func(t *testing.T) {
		g := NewWithT(t)
		r := mustRender(t, values(t, `
replicas: 2
priorityClassName: system-cluster-critical
webhook: {replicas: 3, resources: {limits: {memory: 256Mi}}}
`))
		md, _ := managerOf(t, r)
		wd, w := webhookOf(t, r)
		g.Expect(md.Spec.Replicas).To(HaveValue(BeEquivalentTo(2)))
		g.Expect(wd.Spec.Replicas).To(HaveValue(BeEquivalentTo(3)))
		g.Expect(md.Spec.Template.Spec.PriorityClassName).To(Equal("system-cluster-critical"))
		g.Expect(wd.Spec.Template.Spec.PriorityClassName).To(Equal("system-cluster-critical"))
		g.Expect(w.Resources.Limits.Memory().String()).To(Equal("256Mi"))
	})
}

func TestServiceMonitorIsRenderedOnlyWhenTheAPIIsServed(t *testing.T) {
	t.Run("absent without the API, with a note", func(t *testing.T) {
		g := NewWithT(t)
		r := mustRender(t, nil)
		g.Expect(r.find("ServiceMonitor", "capov-metrics-monitor")).To(BeNil())
		g.Expect(r.notes).To(ContainSubstring("no ServiceMonitor was created"))
	})
	t.Run("present with the API: /metrics over HTTPS with a service-account token from a Secret", func(t *testing.T) {
		g := NewWithT(t)
		r := mustRender(t, nil, apiServiceMonitor)
		sm := get[monitoringv1.ServiceMonitor](t, r, "ServiceMonitor", "capov-metrics-monitor")
		g.Expect(r.notes).NotTo(ContainSubstring("no ServiceMonitor"))
		g.Expect(sm.Namespace).To(Equal(namespace))
		g.Expect(sm.Labels).To(HaveKeyWithValue("release", "shturval-metrics"))
		g.Expect(sm.Spec.Endpoints).To(HaveLen(1))
		ep := sm.Spec.Endpoints[0]
		g.Expect(ep.Port).To(Equal("https"))
		g.Expect(ep.Path).To(Equal("/metrics"))
		g.Expect(ep.Scheme).To(HaveValue(BeEquivalentTo("https")))
		//nolint:staticcheck // the deprecated field is what must be gone
		g.Expect(ep.BearerTokenFile).To(BeEmpty(), "bearerTokenFile is deprecated by the Prometheus Operator")
		g.Expect(ep.Authorization).NotTo(BeNil())
		g.Expect(ep.Authorization.Type).To(Equal("Bearer"))
		g.Expect(ep.Authorization.Credentials).NotTo(BeNil())
		g.Expect(ep.Authorization.Credentials.Name).To(Equal("capov-metrics-scraper-token"))
		g.Expect(ep.Authorization.Credentials.Key).To(Equal("token"))
		g.Expect(ep.TLSConfig).NotTo(BeNil())
		g.Expect(ep.TLSConfig.InsecureSkipVerify == nil || !*ep.TLSConfig.InsecureSkipVerify).To(BeTrue(), "verified against the metrics certificate's CA by default")
		g.Expect(ep.TLSConfig.ServerName).To(HaveValue(Equal("capov-metrics-service." + namespace + ".svc")))

		// The token is that of a ServiceAccount allowed to get /metrics, in a Secret the token
		// controller fills, in the ServiceMonitor's namespace.
		tok := get[corev1.Secret](t, r, "Secret", "capov-metrics-scraper-token")
		g.Expect(tok.Namespace).To(Equal(namespace))
		g.Expect(tok.Type).To(Equal(corev1.SecretTypeServiceAccountToken))
		g.Expect(tok.Annotations).To(HaveKeyWithValue(corev1.ServiceAccountNameKey, "capov-metrics-scraper"))
		sa := get[corev1.ServiceAccount](t, r, "ServiceAccount", "capov-metrics-scraper")
		g.Expect(sa.AutomountServiceAccountToken).To(HaveValue(BeFalse()))
		b := get[rbacv1.ClusterRoleBinding](t, r, "ClusterRoleBinding", "capov-metrics-scraper")
		g.Expect(b.RoleRef.Name).To(Equal("capov-metrics-reader"))
		g.Expect(b.Subjects).To(Equal([]rbacv1.Subject{{Kind: "ServiceAccount", Name: "capov-metrics-scraper", Namespace: namespace}}))

		// It selects the metrics Service, by that Service's port name, in the release namespace.
		svc := get[corev1.Service](t, r, "Service", "capov-metrics-service")
		g.Expect(labels.SelectorFromSet(sm.Spec.Selector.MatchLabels).Matches(labels.Set(svc.Labels))).To(BeTrue())
		g.Expect(svc.Spec.Ports[0].Name).To(Equal("https"))
		g.Expect(sm.Spec.NamespaceSelector.MatchNames).To(Equal([]string{namespace}))
		g.Expect(r.find("ServiceMonitor", "capov-webhook-metrics-monitor")).To(BeNil(), "the webhook's metrics are opt-in")
	})
	t.Run("the release label is overridable", func(t *testing.T) {
		g := NewWithT(t)
		r := mustRender(t, values(t, `metrics: {serviceMonitor: {labels: {release: kube-prometheus-stack}}}`), apiServiceMonitor)
		g.Expect(r.find("ServiceMonitor", "capov-metrics-monitor").GetLabels()).To(HaveKeyWithValue("release", "kube-prometheus-stack"))
	})
	t.Run("an existing token Secret replaces the chart's scraper identity", func(t *testing.T) {
		g := NewWithT(t)
		r := mustRender(t, values(t, `metrics: {serviceMonitor: {authorization: {credentials: {name: prometheus-token, key: token}}}}`), apiServiceMonitor)
		sm := get[monitoringv1.ServiceMonitor](t, r, "ServiceMonitor", "capov-metrics-monitor")
		g.Expect(sm.Spec.Endpoints[0].Authorization.Credentials.Name).To(Equal("prometheus-token"))
		g.Expect(r.find("Secret", "capov-metrics-scraper-token")).To(BeNil())
		g.Expect(r.find("ServiceAccount", "capov-metrics-scraper")).To(BeNil())
		g.Expect(r.find("ClusterRoleBinding", "capov-metrics-scraper")).To(BeNil())
	})
	t.Run("the deprecated bearerTokenFile still works when set", func(t *testing.T) {
		g := NewWithT(t)
		r := mustRender(t, values(t, `metrics: {serviceMonitor: {bearerTokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token}}`), apiServiceMonitor)
		sm := get[monitoringv1.ServiceMonitor](t, r, "ServiceMonitor", "capov-metrics-monitor")
		ep := sm.Spec.Endpoints[0]
		//nolint:staticcheck // the deprecated field, on request
		g.Expect(ep.BearerTokenFile).To(Equal("/var/run/secrets/kubernetes.io/serviceaccount/token"))
		g.Expect(ep.Authorization).To(BeNil(), "the Prometheus Operator refuses both at once")
		g.Expect(r.find("Secret", "capov-metrics-scraper-token")).To(BeNil())
	})
	t.Run("disabled by value even with the API", func(t *testing.T) {
		g := NewWithT(t)
		r := mustRender(t, values(t, `metrics: {serviceMonitor: {enabled: false}}`), apiServiceMonitor)
		g.Expect(r.find("ServiceMonitor", "capov-metrics-monitor")).To(BeNil())
	})
	t.Run("a group version without the ServiceMonitor kind is not enough", func(t *testing.T) {
		g := NewWithT(t)
		r := mustRender(t, nil, "monitoring.coreos.com/v1/PodMonitor")
		g.Expect(r.find("ServiceMonitor", "capov-metrics-monitor")).To(BeNil())
	})
	t.Run("metrics readers can be bound", func(t *testing.T) {
		g := NewWithT(t)
		r := mustRender(t, values(t, `metrics: {readerSubjects: [{kind: ServiceAccount, name: prometheus, namespace: monitoring}]}`))
		b := get[rbacv1.ClusterRoleBinding](t, r, "ClusterRoleBinding", "capov-metrics-reader")
		g.Expect(b.RoleRef.Name).To(Equal("capov-metrics-reader"))
		g.Expect(b.Subjects).To(Equal([]rbacv1.Subject{{Kind: "ServiceAccount", Name: "prometheus", Namespace: "monitoring"}}))
	})
}

func TestInstallingBeforeTheCRDChartFailsWithInstructions(t *testing.T) {
	t.Run("no CAPOV CRDs", func(t *testing.T) {
		g := NewWithT(t)
		_, err := render(t, "capov", nil, apiCertificate, apiServiceMonitor)
		g.Expect(err).To(MatchError(ContainSubstring("CAPOV CRDs are not installed")))
		g.Expect(err).To(MatchError(ContainSubstring("switch shturval-capov-crds to auto (or install the capov-crds chart) first, then shturval-capov")))
	})
	t.Run("CAPOV CRDs of the v1beta1-only series", func(t *testing.T) {
		g := NewWithT(t)
		_, err := render(t, "capov", nil, "infrastructure.cluster.x-k8s.io/v1beta1/OVirtMachine", apiCertificate)
		g.Expect(err).To(MatchError(ContainSubstring("The installed CAPOV CRDs are older than this chart")))
		g.Expect(err).To(MatchError(ContainSubstring("upgrade shturval-capov-crds (the capov-crds chart) to 0.2.0 first, then shturval-capov")))
	})
	t.Run("no cert-manager", func(t *testing.T) {
		g := NewWithT(t)
		_, err := render(t, "capov", nil, apiOVirtMachine)
		g.Expect(err).To(MatchError(ContainSubstring("cert-manager is not installed")))
	})
	t.Run("offline rendering can skip the check", func(t *testing.T) {
		g := NewWithT(t)
		r, err := render(t, "capov", values(t, `preflight: {enabled: false}`))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.find("Deployment", managerDeployment)).NotTo(BeNil())
		g.Expect(r.notes).To(ContainSubstring("preflight.enabled is false"))
	})
}

func TestSchemaRejectsInvalidValues(t *testing.T) {
	tests := []struct {
		name   string
		values string
		path   string
	}{
		{"an unknown top-level key", `featuregates: {disk-clone: true}`, ""},
		{"a gate value that is a list", `featureGates: {disk-clone: [true]}`, "/featureGates/disk-clone"},
		{"an unknown manager key", `manager: {image: x}`, "/manager"},
		{"zero replicas", `replicas: 0`, "/replicas"},
		{"zero webhook replicas", `webhook: {replicas: 0}`, "/webhook/replicas"},
		{"a bad pull policy", `image: {pullPolicy: Sometimes}`, "/image/pullPolicy"},
		{"a pull secret as a string", `image: {pullSecrets: [regcred]}`, "/image/pullSecrets/0"},
		{"an extra argument without dashes", `extraArgs: [debug]`, "/extraArgs/0"},
		{"a tag with a colon", `manager: {tag: "capov:2.14.0"}`, "/manager/tag"},
		{"a nodeSelector value that is not a string", `nodeSelector: {node-role.kubernetes.io/infra: true}`, "/nodeSelector/node-role.kubernetes.io~1infra"},
		{"a resource quantity that is not one", `resources: {limits: {memory: lots}}`, "/resources/limits/memory"},
		{"an unknown resources key", `resources: {limit: {memory: 1Gi}}`, "/resources"},
		{"a webhook timeout above the API server's maximum", `webhook: {timeoutSeconds: 31}`, "/webhook/timeoutSeconds"},
		{"a bad scrape interval", `metrics: {serviceMonitor: {interval: 30}}`, "/metrics/serviceMonitor/interval"},
		{"a token Secret without a key", `metrics: {serviceMonitor: {authorization: {credentials: {name: prometheus-token}}}}`, "/metrics/serviceMonitor/authorization/credentials"},
		{"an unknown monitoring option", `metrics: {prometheusRules: {enabled: true}}`, "/metrics"},
		{"an error ratio above 1", `metrics: {prometheusRule: {engineErrorRatio: 5}}`, "/metrics/prometheusRule/engineErrorRatio"},
		{"a network policy toggle as a string", `networkPolicy: {enabled: "yes"}`, "/networkPolicy/enabled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := render(t, "capov", values(t, tt.values), prerequisites...)
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring("values don't meet the specifications of the schema"))
			g.Expect(err.Error()).To(ContainSubstring("'" + tt.path))
		})
	}

	t.Run("the CRD chart takes no values", func(t *testing.T) {
		g := NewWithT(t)
		_, err := render(t, "capov-crds", values(t, `keep: false`))
		g.Expect(err).To(MatchError(ContainSubstring("values don't meet the specifications of the schema")))
	})
}

func TestTopologySpreadConstraintsGetTheWebhookSelectorUnlessTheyHaveOne(t *testing.T) {
	g := NewWithT(t)
	r := mustRender(t, values(t, `
webhook:
  topologySpreadConstraints:
    - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}
    - maxSkew: 1
      topologyKey: kubernetes.io/hostname
      whenUnsatisfiable: ScheduleAnyway
      labelSelector: {matchLabels: {team: infra}}
`))
	d, _ := webhookOf(t, r)
	tscs := d.Spec.Template.Spec.TopologySpreadConstraints
	g.Expect(tscs).To(HaveLen(2))
	g.Expect(tscs[0].TopologyKey).To(Equal("topology.kubernetes.io/zone"))
	g.Expect(tscs[0].LabelSelector.MatchLabels).To(Equal(map[string]string{
		"app.kubernetes.io/name": "capov", "app.kubernetes.io/component": "webhook",
	}))
	g.Expect(tscs[1].LabelSelector.MatchLabels).To(Equal(map[string]string{"team": "infra"}))
}
