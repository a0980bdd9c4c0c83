// Package clusterctl runs clusterctl offline for the tests, as an operator runs it: a local
// repository holding Cluster API's core and kubeadm components (built with kustomize from the
// module go.mod pins, their images named as Cluster API's release names them), CAPOV releases
// and the cert-manager manifest of the tests' stand-in (test/certmanager); clusterctl itself is
// built by hack/clusterctl.sh. test/e2e/operator installs and upgrades CAPOV with it on a real
// node.
package clusterctl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capov/capov/test/certmanager"
	"github.com/capov/capov/test/envtest"
	"github.com/capov/capov/test/harness"
)

// Release is one CAPOV release in the repository: its version and the files clusterctl reads.
type Release struct {
	Version string
	// Components is infrastructure-components.yaml, Metadata metadata.yaml; Templates are the
	// cluster-template*.yaml files by name.
	Components, Metadata []byte
	Templates            map[string][]byte
}

// TreeRelease is the release a CAPOV source tree makes without `make release`: config/default
// through kustomize (images by the tag config/ names), metadata.yaml and the default template.
func TreeRelease(ctx context.Context, version, tree string) (Release, error) {
	components, err := Kustomize(ctx, filepath.Join(tree, "config", "default"))
	if err != nil {
		return Release{}, err
	}
	metadata, err := os.ReadFile(filepath.Join(tree, "metadata.yaml"))
	if err != nil {
		return Release{}, err
	}
	template, err := os.ReadFile(filepath.Join(tree, "templates", "cluster-template.yaml"))
	if err != nil {
		return Release{}, err
	}
	return Release{Version: version, Components: components, Metadata: metadata, Templates: map[string][]byte{"cluster-template.yaml": template}}, nil
}

// DirRelease is a release `make release` wrote (out/release/<version>).
func DirRelease(version, dir string) (Release, error) {
	r := Release{Version: version, Templates: map[string][]byte{}}
	var err error
	if r.Components, err = os.ReadFile(filepath.Join(dir, "infrastructure-components.yaml")); err != nil {
		return r, err
	}
	if r.Metadata, err = os.ReadFile(filepath.Join(dir, "metadata.yaml")); err != nil {
		return r, err
	}
	templates, err := filepath.Glob(filepath.Join(dir, "cluster-template*.yaml"))
	if err != nil {
		return r, err
	}
	for _, p := range templates {
		b, err := os.ReadFile(p)
		if err != nil {
			return r, err
		}
		r.Templates[filepath.Base(p)] = b
	}
	return r, nil
}

// CAPIImage is a Cluster API controller image the repository's components name, and the main
// package of the module that builds it.
type CAPIImage struct {
	Ref     string // registry.k8s.io/cluster-api/<name>:<version>
	Package string // sigs.k8s.io/cluster-api/core, ...
}

// Repository is a local clusterctl repository.
type Repository struct {
	// Config is the clusterctl configuration naming the repository's providers (--config).
	Config string
	// CAPIImages are the images Cluster API's components run.
	CAPIImages []CAPIImage
	// CAPIVersion is the version of Cluster API's providers (the go.mod pin).
	CAPIVersion string
}

// capiProviders are the Cluster API providers a repository holds: clusterctl's name and type,
// the provider label, the components file, the directory of the module's config and the main
// package of its manager.
var capiProviders = []struct{ name, typ, label, file, config, pkg string }{
	{"cluster-api", "CoreProvider", "cluster-api", "core-components.yaml", "core", "sigs.k8s.io/cluster-api/core"},
	{"kubeadm", "BootstrapProvider", "bootstrap-kubeadm", "bootstrap-components.yaml", "bootstrap/kubeadm", "sigs.k8s.io/cluster-api/bootstrap/kubeadm"},
	{"kubeadm", "ControlPlaneProvider", "control-plane-kubeadm", "control-plane-components.yaml", "controlplane/kubeadm", "sigs.k8s.io/cluster-api/controlplane/kubeadm"},
}

// CAPIPackages are the main packages of the Cluster API managers a repository's components run
// (what CAPIImages name).
func CAPIPackages() []string {
	pkgs := make([]string, 0, len(capiProviders))
	for _, p := range capiProviders {
		pkgs = append(pkgs, p.pkg)
	}
	return pkgs
}

// stagingImage is how Cluster API's config/ names its images before its release renames them.
var stagingImage = regexp.MustCompile(`gcr\.io/k8s-staging-cluster-api/([a-z-]+):main`)

// WriteRepository lays out a local clusterctl repository in dir: Cluster API's core, kubeadm
// bootstrap and control-plane components of the module the repository at root pins, with their
// images renamed and pulled IfNotPresent as Cluster API's release does; CAPOV's releases (the
// newest last); cert-manager's manifest with the stand-in at standInImage.
func WriteRepository(ctx context.Context, root, dir, standInImage string, ovirt ...Release) (*Repository, error) {
	capiDir, err := envtest.ModuleDir(ctx, "sigs.k8s.io/cluster-api")
	if err != nil {
		return nil, err
	}
	capiVersion, err := moduleVersion(ctx, root, "sigs.k8s.io/cluster-api")
	if err != nil {
		return nil, err
	}
	capiMetadata, err := os.ReadFile(filepath.Join(capiDir, "metadata.yaml"))
	if err != nil {
		return nil, err
	}
	manifest, err := CertManagerManifest(ctx, standInImage)
	if err != nil {
		return nil, err
	}
	repo := &Repository{CAPIVersion: capiVersion}
	type provider struct {
		name, typ, label, version, file string
		files                           map[string][]byte
	}
	var providers []provider
	for _, p := range capiProviders {
		components, err := Kustomize(ctx, filepath.Join(capiDir, p.config, "config", "default"))
		if err != nil {
			return nil, err
		}
		names := stagingImage.FindAllSubmatch(components, -1)
		if len(names) != 1 {
			return nil, fmt.Errorf("%s: want one image named %s, found %d", p.file, stagingImage, len(names))
		}
		ref := "registry.k8s.io/cluster-api/" + string(names[0][1]) + ":" + capiVersion
		components = stagingImage.ReplaceAll(components, []byte(ref))
		components = bytes.ReplaceAll(components, []byte("imagePullPolicy: Always"), []byte("imagePullPolicy: IfNotPresent"))
		repo.CAPIImages = append(repo.CAPIImages, CAPIImage{Ref: ref, Package: p.pkg})
		providers = append(providers, provider{p.name, p.typ, p.label, capiVersion, p.file,
			map[string][]byte{p.file: components, "metadata.yaml": capiMetadata}})
	}
	for _, r := range ovirt {
		files := map[string][]byte{"infrastructure-components.yaml": r.Components, "metadata.yaml": r.Metadata}
		for name, b := range r.Templates {
			files[name] = b
		}
		providers = append(providers, provider{"ovirt", "InfrastructureProvider", "infrastructure-ovirt", r.Version, "infrastructure-components.yaml", files})
	}
	providers = append(providers, provider{"cert-manager", "", "cert-manager", certmanager.Version, "cert-manager.yaml", map[string][]byte{"cert-manager.yaml": manifest}})

	var config strings.Builder
	config.WriteString("providers:\n")
	urls := map[string]string{}
	for _, p := range providers {
		rel := filepath.Join(dir, p.label, p.version)
		if err := os.MkdirAll(rel, 0o755); err != nil {
			return nil, err
		}
		for name, b := range p.files {
			if err := os.WriteFile(filepath.Join(rel, name), b, 0o644); err != nil {
				return nil, err
			}
		}
		// The newest version's URL; clusterctl finds the others beside it.
		urls[p.name+"/"+p.typ] = filepath.Join(rel, p.file)
	}
	for _, p := range providers {
		key := p.name + "/" + p.typ
		if p.typ == "" || urls[key] == "" {
			continue
		}
		fmt.Fprintf(&config, "  - name: %s\n    type: %s\n    url: %s\n", p.name, p.typ, urls[key])
		delete(urls, key)
	}
	fmt.Fprintf(&config, "cert-manager:\n  url: %s\n  version: %s\n", urls["cert-manager/"], certmanager.Version)
	repo.Config = filepath.Join(dir, "clusterctl.yaml")
	if err := os.WriteFile(repo.Config, []byte(config.String()), 0o644); err != nil {
		return nil, err
	}
	return repo, nil
}

// Run runs clusterctl offline (no version check, a throw-away home in work) and returns its
// output.
func Run(ctx context.Context, bin, work string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, append(args, "-v", "2")...)
	home := filepath.Join(work, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		return "", err
	}
	cmd.Env = append(os.Environ(), "CLUSTERCTL_DISABLE_VERSIONCHECK=true", "HOME="+home, "GITHUB_TOKEN=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("clusterctl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// Binary returns clusterctl: $CLUSTERCTL, else what hack/clusterctl.sh builds.
func Binary(root string) (string, error) {
	if p := os.Getenv("CLUSTERCTL"); p != "" {
		return p, nil
	}
	cmd := exec.Command(filepath.Join(root, "hack", "clusterctl.sh"))
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/clusterctl.sh: %w\n%s", err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

// BuildStandIn builds the cert-manager stand-in's command into dir.
func BuildStandIn(ctx context.Context, root, dir string) (string, error) {
	out := filepath.Join(dir, "cert-manager")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./test/certmanager/cmd/cert-manager")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the cert-manager stand-in: %w\n%s", err, b)
	}
	return out, nil
}

// StartStandInWhenCRDsExist starts the stand-in as a process once cert-manager's Certificate
// CRD is established, as cert-manager's Deployment would start once created; the returned
// function stops it and returns its log.
func StartStandInWhenCRDsExist(ctx context.Context, c client.Client, bin, kubeconfig, logPath string, errs func(error)) func() string {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan *harness.Process, 1)
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if c.Get(ctx, client.ObjectKey{Name: "certificates.cert-manager.io"}, crd) == nil {
				for _, cond := range crd.Status.Conditions {
					if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
						p, err := harness.Start("cert-manager", bin, []string{"--kubeconfig", kubeconfig}, nil, logPath)
						if err != nil {
							errs(fmt.Errorf("starting the cert-manager stand-in: %w", err))
							return
						}
						done <- p
						return
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return func() string {
		cancel()
		if p, ok := <-done; ok && p != nil {
			_ = p.Stop(10 * time.Second)
			return p.Logs()
		}
		return ""
	}
}

// Inventory returns clusterctl's record of the installed providers: version by provider name
// (infrastructure-ovirt, cluster-api, ...).
func Inventory(ctx context.Context, c client.Client) (map[string]string, error) {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(schema.GroupVersionKind{Group: "clusterctl.cluster.x-k8s.io", Version: "v1alpha3", Kind: "ProviderList"})
	if err := c.List(ctx, l); err != nil {
		return nil, err
	}
	versions := map[string]string{}
	for _, p := range l.Items {
		v, _, _ := unstructured.NestedString(p.Object, "version")
		versions[p.GetName()] = v
	}
	return versions, nil
}

// CertificatesIssued reports why the providers' certificates are not yet in place, or nil: every
// Certificate Ready for its generation, one at least in each namespace, and at least minCRDs
// CRDs and every annotated validating webhook configuration carrying the CA of the Certificate
// its cert-manager.io/inject-ca-from annotation names.
func CertificatesIssued(ctx context.Context, c client.Client, minCRDs int, namespaces ...string) error {
	certs := &cmapi.CertificateList{}
	if err := c.List(ctx, certs); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, crt := range certs.Items {
		seen[crt.Namespace] = true
		ready := false
		for _, cond := range crt.Status.Conditions {
			if cond.Type == cmapi.CertificateConditionReady && cond.Status == cmmeta.ConditionTrue && cond.ObservedGeneration == crt.Generation {
				ready = true
			}
		}
		if !ready {
			return fmt.Errorf("certificate %s/%s is not Ready: %v", crt.Namespace, crt.Name, crt.Status.Conditions)
		}
	}
	for _, ns := range namespaces {
		if !seen[ns] {
			return fmt.Errorf("no Certificate in %s", ns)
		}
	}
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := c.List(ctx, crds); err != nil {
		return err
	}
	injected := 0
	for _, crd := range crds.Items {
		ref := crd.Annotations[certmanager.AnnotationInjectFrom]
		if ref == "" || crd.Spec.Conversion == nil || crd.Spec.Conversion.Webhook == nil {
			continue
		}
		if err := sameCA(ctx, c, ref, crd.Spec.Conversion.Webhook.ClientConfig.CABundle, "CRD "+crd.Name); err != nil {
			return err
		}
		injected++
	}
	if injected < minCRDs {
		return fmt.Errorf("%d CRDs carry their Certificate's CA, want %d at least", injected, minCRDs)
	}
	vwcs := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
	if err := c.List(ctx, vwcs); err != nil {
		return err
	}
	for _, w := range vwcs.Items {
		if ref := w.Annotations[certmanager.AnnotationInjectFrom]; ref != "" {
			for _, h := range w.Webhooks {
				if err := sameCA(ctx, c, ref, h.ClientConfig.CABundle, w.Name+" "+h.Name); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func sameCA(ctx context.Context, c client.Client, ref string, bundle []byte, what string) error {
	ns, name, _ := strings.Cut(ref, "/")
	crt := &cmapi.Certificate{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, crt); err != nil {
		return err
	}
	s := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: crt.Spec.SecretName}, s); err != nil {
		return err
	}
	if len(s.Data["ca.crt"]) == 0 {
		return fmt.Errorf("the Secret of Certificate %s has no ca.crt", ref)
	}
	if !bytes.Equal(bundle, s.Data["ca.crt"]) {
		return fmt.Errorf("%s does not carry the CA of Certificate %s", what, ref)
	}
	return nil
}

// Kustomize builds a kustomization with `kubectl kustomize`.
func Kustomize(ctx context.Context, dir string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "kubectl", "kustomize", dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("kubectl kustomize %s: %w\n%s", dir, err, stderr.String())
	}
	return out, nil
}

func moduleVersion(ctx context.Context, root, module string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Version}}", module)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return "", fmt.Errorf("go list -m %s: %w\n%s", module, err, exit.Stderr)
		}
		return "", fmt.Errorf("go list -m %s: %w", module, err)
	}
	return strings.TrimSpace(string(out)), nil
}
