package capi

import (
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/config"
)

// controllerConfig lets several managers of one test process register controllers with the
// same names (our manager and CAPI's both have a "machine"-like set of names).
func controllerConfig() config.Controller {
	return config.Controller{SkipNameValidation: ptr.To(true), RecoverPanic: ptr.To(true)}
}
