// Package contract holds static checks of the generated CRDs against the Cluster API v1beta1
// infrastructure-provider contract and the clusterctl conventions. They need no cluster.
package contract
