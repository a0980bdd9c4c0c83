// Package operator is the end-to-end test of CAPOV installed as an operator installs it: our
// images as pods, from our Helm charts, on a real node (kubelet + containerd, test/e2e/node),
// with Cluster API's core reconcilers as a pod and the oVirt simulator as a pod behind a
// Service. It runs only through hack/e2e.sh (`make e2e`), inside private namespaces.
package operator
