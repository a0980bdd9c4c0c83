package ovirtsim

import (
	"net/http"
)

// pkiResourcePath is where an Engine serves its CA certificate without authentication, the URL
// that oVirt's documentation gives for the CA of a custom-CA TLS set-up:
// /ovirt-engine/services/pki-resource?resource=ca-certificate&format=X509-PEM-CA.
const pkiResourcePath = "/ovirt-engine/services/pki-resource"

// servePKIResource serves the CA (resource=ca-certificate) or the server certificate
// (resource=engine-certificate) as PEM. Other resources and formats are refused with 400.
func (s *Simulator) servePKIResource(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	q := r.URL.Query()
	var body []byte
	switch q.Get("resource") {
	case "ca-certificate":
		body = s.caPEM
	case "engine-certificate":
		body = s.certPEM
	default:
		http.Error(w, "unknown resource "+q.Get("resource"), http.StatusBadRequest)
		return
	}
	switch q.Get("format") {
	case "X509-PEM-CA":
		w.Header().Set("Content-Type", "application/x-x509-ca-cert")
	case "X509-PEM", "":
		w.Header().Set("Content-Type", "application/x-x509-cert")
	default:
		http.Error(w, "unsupported format "+q.Get("format"), http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(body)
	}
}
