// Package crdmigration tests the CRD storage migration the manager runs at start (Cluster API's
// crdmigrator): from the v1beta1-only CRDs of the last release before v1beta2 to
// status.storedVersions [v1beta2].
package crdmigration
