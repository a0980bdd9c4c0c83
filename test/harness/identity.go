package harness

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// The manager's identity in the clusterctl components (config/default) and in the chart with
// its default namespace: ServiceAccount capov-system/capov-manager, which the API server
// authenticates as system:serviceaccount:capov-system:capov-manager. The admission webhooks'
// matchConditions name that user (config/webhook, docs/webhook.md).
const (
	ManagerNamespace      = "capov-system"
	ManagerServiceAccount = "capov-manager"
)

// rbacKinds are the kinds InstallRBAC applies from the clusterctl components.
var rbacKinds = map[string]bool{
	"ServiceAccount": true, "ClusterRole": true, "ClusterRoleBinding": true, "Role": true, "RoleBinding": true,
}

// InstallRBAC applies the ServiceAccounts, roles and bindings of the clusterctl components
// (`kubectl kustomize config/default` of the repository at root, the objects
// `clusterctl init` installs) and creates their namespace if it is missing. A process that
// authenticates as one of those ServiceAccounts (ServiceAccountKubeconfig) then has exactly the
// permissions a real installation gives it. Objects that exist already are updated.
func InstallRBAC(ctx context.Context, c client.Client, root string) error {
	cmd := exec.CommandContext(ctx, "kubectl", "kustomize", filepath.Join(root, "config", "default"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("kubectl kustomize config/default: %w: %s", err, stderr.String())
	}
	ns := &corev1.Namespace{}
	ns.Name = ManagerNamespace
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", ManagerNamespace, err)
	}
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(out), -1) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			return fmt.Errorf("parsing the clusterctl components: %w", err)
		}
		if len(u.Object) == 0 || !rbacKinds[u.GetKind()] {
			continue
		}
		err := c.Create(ctx, u)
		if apierrors.IsAlreadyExists(err) {
			existing := &unstructured.Unstructured{}
			existing.SetGroupVersionKind(u.GroupVersionKind())
			if err = c.Get(ctx, client.ObjectKeyFromObject(u), existing); err == nil {
				u.SetResourceVersion(existing.GetResourceVersion())
				err = c.Update(ctx, u)
			}
		}
		if err != nil {
			return fmt.Errorf("applying %s %s: %w", u.GetKind(), client.ObjectKeyFromObject(u), err)
		}
	}
	return nil
}

// ServiceAccountKubeconfig returns a kubeconfig for cfg's API server that authenticates with a
// token of ServiceAccount namespace/name from the TokenRequest API, as the token the kubelet
// projects into a pod: the API server sees system:serviceaccount:<namespace>:<name> with the
// groups of service accounts. The token is valid for 12 hours.
func ServiceAccountKubeconfig(ctx context.Context, c client.Client, cfg *rest.Config, namespace, name string) ([]byte, error) {
	sa := &corev1.ServiceAccount{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, sa); err != nil {
		return nil, fmt.Errorf("reading ServiceAccount %s/%s: %w", namespace, name, err)
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](12 * 3600)}}
	if err := c.SubResource("token").Create(ctx, sa, req); err != nil {
		return nil, fmt.Errorf("requesting a token of ServiceAccount %s/%s: %w", namespace, name, err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["cluster"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: req.Status.Token}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: name, Namespace: namespace}
	kc.CurrentContext = name
	out, err := clientcmd.Write(*kc)
	if err != nil {
		return nil, fmt.Errorf("rendering the kubeconfig of ServiceAccount %s/%s: %w", namespace, name, err)
	}
	return out, nil
}
