package certmanager

// Module is the Go module whose CRDs the manifest ships; Version is the cert-manager version
// the manifest claims to be (the module's, which is also clusterctl's default).
const (
	Module  = "github.com/cert-manager/cert-manager"
	Version = "v1.21.1"
	// Namespace is where the stand-in runs and where ClusterIssuers keep their CA Secrets
	// (cert-manager's --cluster-resource-namespace default).
	Namespace = "cert-manager"
	// DeploymentName is the stand-in's Deployment (cert-manager's controller Deployment name).
	DeploymentName = "cert-manager"
)
