package options

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	authenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Caching and retries of the TokenReviews and SubjectAccessReviews behind /metrics: a scraper
// every 15 s costs the API server one review a minute, and a denial is re-checked after 30 s so
// that a new RoleBinding takes effect soon.
const (
	metricsTokenCacheTTL = time.Minute
	metricsAllowCacheTTL = 5 * time.Minute
	metricsDenyCacheTTL  = 30 * time.Second
	metricsReviewTimeout = 10 * time.Second
)

// metricsReviewBackoff retries a review the API server could not answer (about 5 s in all).
func metricsReviewBackoff() *wait.Backoff {
	return &wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
}

// metricsAuthFilter is the metrics server's filter: a bearer token checked with a TokenReview,
// then "get" on the path checked with a SubjectAccessReview, as kube-rbac-proxy and the
// kube-apiserver do.
//
// It answers as the kube-apiserver does: a request whose credentials cannot be verified (no
// token, an invalid or expired one, or a TokenReview that failed) gets 401, one that is
// authenticated but not allowed 403. controller-runtime's own filter answers 500 to an invalid
// token, which alerts on the scraper's side as a server fault and logs an error for every
// stranger's request.
func metricsAuthFilter(cfg *rest.Config, hc *http.Client) (metricsserver.Filter, error) {
	tokenReviews, err := authenticationv1.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("metrics authentication client: %w", err)
	}
	accessReviews, err := authorizationv1.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("metrics authorization client: %w", err)
	}
	authn, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		Anonymous:                &apiserver.AnonymousAuthConfig{Enabled: false},
		CacheTTL:                 metricsTokenCacheTTL,
		TokenAccessReviewClient:  tokenReviews,
		TokenAccessReviewTimeout: metricsReviewTimeout,
		WebhookRetryBackoff:      metricsReviewBackoff(),
	}.New()
	if err != nil {
		return nil, fmt.Errorf("metrics authenticator: %w", err)
	}
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: accessReviews,
		AllowCacheTTL:             metricsAllowCacheTTL,
		DenyCacheTTL:              metricsDenyCacheTTL,
		WebhookRetryBackoff:       metricsReviewBackoff(),
	}.New()
	if err != nil {
		return nil, fmt.Errorf("metrics authorizer: %w", err)
	}
	return func(log logr.Logger, next http.Handler) (http.Handler, error) {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			res, ok, err := authn.AuthenticateRequest(req)
			if err != nil || !ok {
				// An invalid token is the client's problem, not ours: not an error in our log.
				log.V(4).Info("Refused a metrics request without valid credentials", "remote", req.RemoteAddr, "reason", err)
				w.Header().Set("WWW-Authenticate", `Bearer realm="metrics"`)
				http.Error(w, "Unauthorized", http.StatusUnauthorized)
				return
			}
			attrs := authorizer.AttributesRecord{
				User:            res.User,
				Verb:            strings.ToLower(req.Method),
				Path:            req.URL.Path,
				ResourceRequest: false,
			}
			decision, reason, err := authz.Authorize(req.Context(), attrs)
			if err != nil {
				log.Error(err, "Checking a metrics request's authorization", "user", res.User.GetName())
				http.Error(w, "Authorization check failed", http.StatusInternalServerError)
				return
			}
			if decision != authorizer.DecisionAllow {
				log.V(4).Info("Refused a metrics request", "user", res.User.GetName(), "reason", reason)
				http.Error(w, fmt.Sprintf("Forbidden: %s may not %s %s", res.User.GetName(), attrs.Verb, attrs.Path), http.StatusForbidden)
				return
			}
			next.ServeHTTP(w, req)
		}), nil
	}, nil
}
