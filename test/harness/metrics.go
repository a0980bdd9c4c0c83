package harness

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// MetricsToken returns a service-account token allowed to read /metrics, as a Prometheus
// scraper has: ServiceAccount capov-system/metrics-scraper bound to a ClusterRole with get on
// the non-resource URL /metrics.
func (s *Stack) MetricsToken(ctx context.Context) (string, error) {
	c := s.MgmtClient()
	objs := []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "capov-system", Name: "metrics-scraper"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "capov-metrics-reader"},
			Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "capov-metrics-scraper"},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "capov-metrics-reader"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "capov-system", Name: "metrics-scraper"}}},
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("creating %T: %w", o, err)
		}
	}
	cs, err := kubernetes.NewForConfig(s.Mgmt.Config)
	if err != nil {
		return "", err
	}
	tr, err := cs.CoreV1().ServiceAccounts("capov-system").CreateToken(ctx, "metrics-scraper",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(24 * 3600))}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("requesting a token: %w", err)
	}
	return tr.Status.Token, nil
}
