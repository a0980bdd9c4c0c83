package ovirtsim

import (
	"bytes"
	"cmp"
	"encoding/xml"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	ovirtsdk "github.com/ovirt/go-ovirt"
)

func apiRoutes() []route {
	return []route{
		newRoute("GET", "/", hRoot),
		newRoute("GET", "/clusters", hClusters),
		newRoute("GET", "/clusters/{id}", hCluster),
		newRoute("GET", "/clusters/{id}/networks", hClusterNetworks),
		newRoute("GET", "/clusters/{id}/affinitygroups", hGroups),
		newRoute("POST", "/clusters/{id}/affinitygroups", hAddGroup),
		newRoute("GET", "/clusters/{id}/affinitygroups/{id}", hGroup),
		newRoute("PUT", "/clusters/{id}/affinitygroups/{id}", hUpdateGroup),
		newRoute("DELETE", "/clusters/{id}/affinitygroups/{id}", hRemoveGroup),
		newRoute("GET", "/clusters/{id}/affinitygroups/{id}/vms", hGroupVMs),
		newRoute("POST", "/clusters/{id}/affinitygroups/{id}/vms", hAddGroupVM),
		newRoute("DELETE", "/clusters/{id}/affinitygroups/{id}/vms/{id}", hRemoveGroupVM),
		newRoute("GET", "/hosts", hHosts),
		newRoute("GET", "/hosts/{id}", hHost),
		newRoute("GET", "/hosts/{id}/devices", hHostDevices),
		newRoute("GET", "/hosts/{id}/devices/{id}", hHostDevice),
		newRoute("GET", "/datacenters", hDataCenters),
		newRoute("GET", "/datacenters/{id}", hDataCenter),
		newRoute("GET", "/datacenters/{id}/clusters", hDataCenterClusters),
		newRoute("GET", "/datacenters/{id}/storagedomains", hDataCenterSDs),
		newRoute("GET", "/datacenters/{id}/storagedomains/{id}", hDataCenterSD),
		newRoute("GET", "/networks", hNetworks),
		newRoute("GET", "/networks/{id}", hNetwork),
		newRoute("GET", "/vnicprofiles", hProfiles),
		newRoute("GET", "/vnicprofiles/{id}", hProfile),
		newRoute("GET", "/storagedomains", hSDs),
		newRoute("GET", "/storagedomains/{id}", hSD),
		newRoute("GET", "/templates", hTemplates),
		newRoute("GET", "/templates/{id}", hTemplate),
		newRoute("GET", "/templates/{id}/diskattachments", hTemplateAttachments),
		newRoute("GET", "/templates/{id}/diskattachments/{id}", hTemplateAttachment),
		newRoute("GET", "/templates/{id}/nics", hTemplateNICs),
		newRoute("GET", "/disks", hDisks),
		newRoute("POST", "/disks", hAddDisk),
		newRoute("GET", "/disks/{id}", hDisk),
		newRoute("PUT", "/disks/{id}", hUpdateDisk),
		newRoute("DELETE", "/disks/{id}", hRemoveDisk),
		newRoute("GET", "/vms", hVMs),
		newRoute("POST", "/vms", hAddVM),
		newRoute("GET", "/vms/{id}", hVM),
		newRoute("PUT", "/vms/{id}", hUpdateVM),
		newRoute("DELETE", "/vms/{id}", hRemoveVM),
		newRoute("POST", "/vms/{id}/start", hStart),
		newRoute("POST", "/vms/{id}/stop", hStop),
		newRoute("POST", "/vms/{id}/shutdown", hShutdown),
		newRoute("POST", "/vms/{id}/reboot", hReboot),
		newRoute("POST", "/vms/{id}/reset", hReset),
		newRoute("GET", "/vms/{id}/hostdevices", hVMHostDevices),
		newRoute("POST", "/vms/{id}/hostdevices", hAddVMHostDevice),
		newRoute("GET", "/vms/{id}/hostdevices/{id}", hVMHostDevice),
		newRoute("DELETE", "/vms/{id}/hostdevices/{id}", hRemoveVMHostDevice),
		newRoute("GET", "/vms/{id}/mediateddevices", hVMMediatedDevices),
		newRoute("GET", "/vms/{id}/diskattachments", hAttachments),
		newRoute("POST", "/vms/{id}/diskattachments", hAddAttachment),
		newRoute("GET", "/vms/{id}/diskattachments/{id}", hAttachment),
		newRoute("PUT", "/vms/{id}/diskattachments/{id}", hUpdateAttachment),
		newRoute("DELETE", "/vms/{id}/diskattachments/{id}", hRemoveAttachment),
		newRoute("GET", "/vms/{id}/nics", hNICs),
		newRoute("POST", "/vms/{id}/nics", hAddNIC),
		newRoute("GET", "/vms/{id}/nics/{id}", hNIC),
		newRoute("PUT", "/vms/{id}/nics/{id}", hUpdateNIC),
		newRoute("DELETE", "/vms/{id}/nics/{id}", hRemoveNIC),
		newRoute("GET", "/vms/{id}/nics/{id}/reporteddevices", hNICReportedDevices),
		newRoute("GET", "/vms/{id}/reporteddevices", hReportedDevices),
		newRoute("GET", "/vms/{id}/tags", hVMTags),
		newRoute("POST", "/vms/{id}/tags", hAddVMTag),
		newRoute("GET", "/vms/{id}/tags/{id}", hVMTag),
		newRoute("DELETE", "/vms/{id}/tags/{id}", hRemoveVMTag),
		newRoute("GET", "/jobs", hJobs),
		newRoute("GET", "/jobs/{id}", hJob),
		newRoute("GET", "/tags", hTags),
		newRoute("POST", "/tags", hAddTag),
		newRoute("GET", "/tags/{id}", hTag),
		newRoute("PUT", "/tags/{id}", hUpdateTag),
		newRoute("DELETE", "/tags/{id}", hRemoveTag),
	}
}

// ---- request helpers

func (rq *apiReq) boolParam(name string, def bool) (bool, *apiError) {
	v := rq.q.Get(name)
	if v == "" {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return def, &apiError{400, reasonFailed, fmt.Sprintf("Invalid value '%s' for boolean parameter '%s'.", v, name)}
	}
	return b, nil
}

func (rq *apiReq) maxParam() (int, *apiError) {
	v := rq.q.Get("max")
	if v == "" {
		return -1, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return -1, &apiError{400, reasonFailed, fmt.Sprintf("Invalid value '%s' for parameter 'max'.", v)}
	}
	if n < 0 {
		return -1, nil
	}
	return n, nil
}

// renderCtx parses follow and checks all_content; call with s.mu held.
// all_content changes nothing here: it adds only what is not simulated
// (console, the OVF in initialization.configuration.data, rng_source,
// soundcard, virtio_scsi; BackendVmResource.doPopulate), while the
// initialization is in every VM answer.
func (s *Simulator) renderCtx(rq *apiReq) (*renderCtx, *apiError) {
	if _, aerr := rq.boolParam("all_content", false); aerr != nil {
		return nil, aerr
	}
	rc := &renderCtx{now: time.Now(), guestAgent: s.guestAgent, guest: &s.guestIfaces,
		seed: uint64(s.built.RandomSeed), n: s.renders.Add(1), inv: s.inv}
	if f := rq.q.Get("follow"); f != "" && !s.ignoreFollow {
		rc.follow = map[string]bool{}
		for _, p := range strings.Split(f, ",") {
			if p = strings.TrimSpace(p); p != "" {
				rc.follow[p] = true
			}
		}
	}
	return rc, nil
}

// search parses search and case_sensitive (default false, like the engine).
func (rq *apiReq) search(collection string, fields []string) (*searchQuery, bool, *apiError) {
	cs, aerr := rq.boolParam("case_sensitive", false)
	if aerr != nil {
		return nil, false, aerr
	}
	q := strings.TrimSpace(rq.q.Get("search"))
	if q == "" {
		return nil, cs, nil
	}
	sq, aerr := parseSearch(q, collection, fields)
	return sq, cs, aerr
}

func readBody(rq *apiReq) ([]byte, *apiError) {
	if rq.bodyErr != nil {
		return nil, &apiError{400, "Request syntactically incorrect.", "Cannot read the request body: " + rq.bodyErr.Error()}
	}
	return rq.body, nil
}

// parseBody decodes an XML body with go-ovirt's reader for kind.
func parseBody[T any](rq *apiReq, kind string, read func(*ovirtsdk.XMLReader, *xml.StartElement, string) (*T, error)) (*T, *apiError) {
	b, aerr := readBody(rq)
	if aerr != nil {
		return nil, aerr
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, &apiError{400, "Request syntactically incorrect.", fmt.Sprintf("The request body is empty; expected <%s>.", kind)}
	}
	if bytes.IndexByte(b, '<') < 0 {
		// go-ovirt's reader prints "err is EOF" to stdout when it finds no element.
		return nil, &apiError{400, "Request syntactically incorrect.", fmt.Sprintf("The request body is not XML; expected <%s>.", kind)}
	}
	v, err := readXML(b, kind, read)
	if err != nil || v == nil {
		return nil, &apiError{400, "Request syntactically incorrect.", fmt.Sprintf("Cannot parse <%s>: %v", kind, err)}
	}
	return v, nil
}

// readXML runs a go-ovirt reader. Its enum readers dereference their result before they check
// the error (readers.go: `v := *vp`), so a truncated enum element (`<disk><format >`) panics:
// that is malformed XML, the Engine's 400, not a 500.
func readXML[T any](b []byte, kind string, read func(*ovirtsdk.XMLReader, *xml.StartElement, string) (*T, error)) (v *T, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, fmt.Errorf("malformed XML: %v", r)
		}
	}()
	return read(ovirtsdk.NewXMLReader(b), nil, kind)
}

// parseAction decodes an optional <action> body.
func parseAction(rq *apiReq) (*ovirtsdk.Action, *apiError) {
	b, aerr := readBody(rq)
	if aerr != nil {
		return nil, aerr
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return &ovirtsdk.Action{}, nil
	}
	if bytes.IndexByte(b, '<') < 0 {
		return nil, &apiError{400, "Request syntactically incorrect.", "The request body is not XML; expected <action>."}
	}
	a, err := readXML(b, "action", ovirtsdk.XMLActionReadOne)
	if err != nil || a == nil {
		return nil, &apiError{400, "Request syntactically incorrect.", fmt.Sprintf("Cannot parse <action>: %v", err)}
	}
	return a, nil
}

func limit[T any](l []T, n int) []T {
	if n >= 0 && len(l) > n {
		return l[:n]
	}
	return l
}

func sortByName[T any](l []T, name func(T) string, id func(T) string, desc bool) {
	slices.SortFunc(l, func(a, b T) int {
		c := cmp.Or(strings.Compare(name(a), name(b)), strings.Compare(id(a), id(b)))
		if desc {
			return -c
		}
		return c
	})
}

// writeOne answers 200 with one object.
func writeOne[T any](rq *apiReq, status int, obj *T, write func(*ovirtsdk.XMLWriter, *T, string) error) {
	rq.writeXML(status, func(w *ovirtsdk.XMLWriter) error { return write(w, obj, "") })
}

// ---- root and inventory collections

func hRoot(s *Simulator, rq *apiReq) {
	s.mu.RLock()
	api := renderAPI(s.inv, s.instanceIDFor(s.inv.version), time.Now())
	s.mu.RUnlock()
	writeOne(rq, 200, api, ovirtsdk.XMLApiWriteOne)
}

var clusterFields = []string{"name", "datacenter", "comment", "description"}

func hClusters(s *Simulator, rq *apiReq) {
	sq, cs, aerr := rq.search("Clusters", clusterFields)
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	mx, aerr := rq.maxParam()
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	s.mu.RLock()
	var out []*ovirtsdk.Cluster
	for _, c := range s.inv.clusters {
		get := func(f string) string {
			switch f {
			case "name":
				return c.name
			case "datacenter":
				return c.dc.name
			}
			return ""
		}
		if sq.match(get, cs) {
			out = append(out, renderCluster(c))
		}
	}
	s.mu.RUnlock()
	sl := &ovirtsdk.ClusterSlice{}
	sl.SetSlice(limit(out, mx))
	rq.writeXML(200, func(w *ovirtsdk.XMLWriter) error { return ovirtsdk.XMLClusterWriteMany(w, sl, "", "") })
}

func hCluster(s *Simulator, rq *apiReq) {
	s.mu.RLock()
	c := s.inv.cluster(rq.ids[0])
	var o *ovirtsdk.Cluster
	if c != nil {
		o = renderCluster(c)
	}
	s.mu.RUnlock()
	if o == nil {
		rq.fault(notFound(rq.ids[0]))
		return
	}
	writeOne(rq, 200, o, ovirtsdk.XMLClusterWriteOne)
}

func hClusterNetworks(s *Simulator, rq *apiReq) {
	rq.owner = linkOwner{apiPrefix + "/clusters/" + rq.ids[0], "cluster"}
	s.mu.RLock()
	c := s.inv.cluster(rq.ids[0])
	var out []*ovirtsdk.Network
	if c != nil {
		for _, n := range c.networks {
			out = append(out, renderNetwork(n, c))
		}
	}
	s.mu.RUnlock()
	if c == nil {
		rq.fault(notFound(rq.ids[0]))
		return
	}
	writeNetworks(rq, out)
}

func writeNetworks(rq *apiReq, out []*ovirtsdk.Network) {
	sl := &ovirtsdk.NetworkSlice{}
	sl.SetSlice(out)
	rq.writeXML(200, func(w *ovirtsdk.XMLWriter) error { return ovirtsdk.XMLNetworkWriteMany(w, sl, "", "") })
}

var dcFields = []string{"name", "status", "comment", "description"}

func hDataCenters(s *Simulator, rq *apiReq) {
	sq, cs, aerr := rq.search("DataCenters", dcFields)
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	mx, aerr := rq.maxParam()
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	s.mu.RLock()
	var out []*ovirtsdk.DataCenter
	for _, dc := range s.inv.dcs {
		get := func(f string) string {
			switch f {
			case "name":
				return dc.name
			case "status":
				return "up"
			}
			return ""
		}
		if sq.match(get, cs) {
			out = append(out, renderDC(dc))
		}
	}
	s.mu.RUnlock()
	sl := &ovirtsdk.DataCenterSlice{}
	sl.SetSlice(limit(out, mx))
	rq.writeXML(200, func(w *ovirtsdk.XMLWriter) error { return ovirtsdk.XMLDataCenterWriteMany(w, sl, "", "") })
}

func hDataCenter(s *Simulator, rq *apiReq) {
	s.mu.RLock()
	dc := s.inv.dcByID(rq.ids[0])
	var o *ovirtsdk.DataCenter
	if dc != nil {
		o = renderDC(dc)
	}
	s.mu.RUnlock()
	if o == nil {
		rq.fault(notFound(rq.ids[0]))
		return
	}
	writeOne(rq, 200, o, ovirtsdk.XMLDataCenterWriteOne)
}

func hDataCenterClusters(s *Simulator, rq *apiReq) {
	rq.owner = linkOwner{apiPrefix + "/datacenters/" + rq.ids[0], "data_center"}
	s.mu.RLock()
	dc := s.inv.dcByID(rq.ids[0])
	var out []*ovirtsdk.Cluster
	for _, c := range s.inv.clusters {
		if dc != nil && c.dc == dc {
			out = append(out, renderCluster(c))
		}
	}
	s.mu.RUnlock()
	if dc == nil {
		rq.fault(notFound(rq.ids[0]))
		return
	}
	sl := &ovirtsdk.ClusterSlice{}
	sl.SetSlice(out)
	rq.writeXML(200, func(w *ovirtsdk.XMLWriter) error { return ovirtsdk.XMLClusterWriteMany(w, sl, "", "") })
}

func hDataCenterSDs(s *Simulator, rq *apiReq) {
	rq.owner = linkOwner{apiPrefix + "/datacenters/" + rq.ids[0], "data_center"}
	s.mu.RLock()
	dc := s.inv.dcByID(rq.ids[0])
	var out []*ovirtsdk.StorageDomain
	for _, sd := range s.inv.sds {
		if dc != nil && sd.dc == dc {
			out = append(out, renderSD(sd, true))
		}
	}
	s.mu.RUnlock()
	if dc == nil {
		rq.fault(notFound(rq.ids[0]))
		return
	}
	writeSDs(rq, out)
}

// hDataCenterSD is an attached storage domain as its data center sees it:
// the place where the engine reports its status.
func hDataCenterSD(s *Simulator, rq *apiReq) {
	rq.owner = linkOwner{apiPrefix + "/datacenters/" + rq.ids[0], "data_center"}
	s.mu.RLock()
	dc := s.inv.dcByID(rq.ids[0])
	sd := s.inv.storageDomain(rq.ids[1])
	var o *ovirtsdk.StorageDomain
	if dc != nil && sd != nil && sd.dc == dc {
		o = renderSD(sd, true)
	}
	s.mu.RUnlock()
	if o == nil {
		rq.fault(notFound(rq.ids[len(rq.ids)-1]))
		return
	}
	writeOne(rq, 200, o, ovirtsdk.XMLStorageDomainWriteOne)
}

var networkFields = []string{"name", "datacenter", "comment", "description"}

func hNetworks(s *Simulator, rq *apiReq) {
	sq, cs, aerr := rq.search("Networks", networkFields)
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	mx, aerr := rq.maxParam()
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	s.mu.RLock()
	var out []*ovirtsdk.Network
	for _, n := range s.inv.networks {
		get := func(f string) string {
			switch f {
			case "name":
				return n.name
			case "datacenter":
				return n.dc.name
			}
			return ""
		}
		if sq.match(get, cs) {
			out = append(out, renderNetwork(n, nil))
		}
	}
	s.mu.RUnlock()
	writeNetworks(rq, limit(out, mx))
}

func hNetwork(s *Simulator, rq *apiReq) {
	s.mu.RLock()
	n := s.inv.networkByID(rq.ids[0])
	var o *ovirtsdk.Network
	if n != nil {
		o = renderNetwork(n, nil)
	}
	s.mu.RUnlock()
	if o == nil {
		rq.fault(notFound(rq.ids[0]))
		return
	}
	writeOne(rq, 200, o, ovirtsdk.XMLNetworkWriteOne)
}

// hProfiles lists vNIC profiles. The engine has no search on this collection.
func hProfiles(s *Simulator, rq *apiReq) {
	mx, aerr := rq.maxParam()
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	s.mu.RLock()
	out := make([]*ovirtsdk.VnicProfile, 0, len(s.inv.profiles))
	for _, p := range s.inv.profiles {
		out = append(out, renderProfile(p))
	}
	s.mu.RUnlock()
	sl := &ovirtsdk.VnicProfileSlice{}
	sl.SetSlice(limit(out, mx))
	rq.writeXML(200, func(w *ovirtsdk.XMLWriter) error { return ovirtsdk.XMLVnicProfileWriteMany(w, sl, "", "") })
}

func hProfile(s *Simulator, rq *apiReq) {
	s.mu.RLock()
	p := s.inv.profile(rq.ids[0])
	var o *ovirtsdk.VnicProfile
	if p != nil {
		o = renderProfile(p)
	}
	s.mu.RUnlock()
	if o == nil {
		rq.fault(notFound(rq.ids[0]))
		return
	}
	writeOne(rq, 200, o, ovirtsdk.XMLVnicProfileWriteOne)
}

var sdFields = []string{"name", "datacenter", "status", "type", "comment", "description"}

func hSDs(s *Simulator, rq *apiReq) {
	sq, cs, aerr := rq.search("StorageDomains", sdFields)
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	mx, aerr := rq.maxParam()
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	s.mu.RLock()
	var out []*ovirtsdk.StorageDomain
	for _, sd := range s.inv.sds {
		get := func(f string) string {
			switch f {
			case "name":
				return sd.name
			case "datacenter":
				return sd.dc.name
			case "status":
				return sd.status
			case "type":
				return sd.typ
			}
			return ""
		}
		if sq.match(get, cs) {
			out = append(out, renderSD(sd, false))
		}
	}
	s.mu.RUnlock()
	writeSDs(rq, limit(out, mx))
}

func writeSDs(rq *apiReq, out []*ovirtsdk.StorageDomain) {
	sl := &ovirtsdk.StorageDomainSlice{}
	sl.SetSlice(out)
	rq.writeXML(200, func(w *ovirtsdk.XMLWriter) error { return ovirtsdk.XMLStorageDomainWriteMany(w, sl, "", "") })
}

func hSD(s *Simulator, rq *apiReq) {
	s.mu.RLock()
	sd := s.inv.storageDomain(rq.ids[0])
	var o *ovirtsdk.StorageDomain
	if sd != nil {
		o = renderSD(sd, false)
	}
	s.mu.RUnlock()
	if o == nil {
		rq.fault(notFound(rq.ids[0]))
		return
	}
	writeOne(rq, 200, o, ovirtsdk.XMLStorageDomainWriteOne)
}

// ---- templates

var templateFields = []string{"name", "cluster", "datacenter", "status", "os", "comment", "description"}

func hTemplates(s *Simulator, rq *apiReq) {
	sq, cs, aerr := rq.search("Templates", templateFields)
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	mx, aerr := rq.maxParam()
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	s.mu.RLock()
	rc, aerr := s.renderCtx(rq)
	if aerr != nil {
		s.mu.RUnlock()
		rq.fault(aerr)
		return
	}
	var ts []*template
	for _, t := range s.inv.templates {
		get := func(f string) string {
			switch f {
			case "name":
				return t.name
			case "cluster":
				if t.cluster != nil {
					return t.cluster.name
				}
			case "datacenter":
				if t.cluster != nil {
					return t.cluster.dc.name
				}
			case "status":
				return t.status
			case "os":
				return t.osType
			}
			return ""
		}
		if sq.match(get, cs) {
			ts = append(ts, t)
		}
	}
	slices.SortFunc(ts, func(a, b *template) int {
		c := cmp.Or(strings.Compare(a.name, b.name), a.version-b.version, strings.Compare(a.id, b.id))
		if sq != nil && sq.sortDesc {
			return -c
		}
		return c
	})
	ts = limit(ts, mx)
	out := make([]*ovirtsdk.Template, 0, len(ts))
	for _, t := range ts {
		out = append(out, renderTemplate(s.inv, t, rc))
	}
	s.mu.RUnlock()
	sl := &ovirtsdk.TemplateSlice{}
	sl.SetSlice(out)
	rq.writeXML(200, func(w *ovirtsdk.XMLWriter) error { return ovirtsdk.XMLTemplateWriteMany(w, sl, "", "") })
}

func hTemplate(s *Simulator, rq *apiReq) {
	s.mu.RLock()
	rc, aerr := s.renderCtx(rq)
	t := s.inv.template(rq.ids[0])
	var o *ovirtsdk.Template
	if t != nil && aerr == nil {
		o = renderTemplate(s.inv, t, rc)
	}
	s.mu.RUnlock()
	switch {
	case aerr != nil:
		rq.fault(aerr)
	case o == nil:
		rq.fault(notFound(rq.ids[0]))
	default:
		writeOne(rq, 200, o, ovirtsdk.XMLTemplateWriteOne)
	}
}

func hTemplateAttachments(s *Simulator, rq *apiReq) {
	rq.owner = linkOwner{apiPrefix + "/templates/" + rq.ids[0], "template"}
	s.mu.RLock()
	rc, aerr := s.renderCtx(rq)
	t := s.inv.template(rq.ids[0])
	var sl *ovirtsdk.DiskAttachmentSlice
	if t != nil && aerr == nil {
		sl = renderAttachments(t.disks, rc.follows("disk"), rc.now)
	}
	s.mu.RUnlock()
	switch {
	case aerr != nil:
		rq.fault(aerr)
	case sl == nil:
		rq.fault(notFound(rq.ids[0]))
	default:
		rq.writeXML(200, func(w *ovirtsdk.XMLWriter) error { return ovirtsdk.XMLDiskAttachmentWriteMany(w, sl, "", "") })
	}
}

func hTemplateAttachment(s *Simulator, rq *apiReq) {
	rq.owner = linkOwner{apiPrefix + "/templates/" + rq.ids[0], "template"}
	s.mu.RLock()
	rc, aerr := s.renderCtx(rq)
	t := s.inv.template(rq.ids[0])
	var o *ovirtsdk.DiskAttachment
	if t != nil && aerr == nil {
		for _, d := range t.disks {
			if d.id == rq.ids[1] {
				o = renderAttachment(d, rc.follows("disk"), rc.now)
			}
		}
	}
	s.mu.RUnlock()
	switch {
	case aerr != nil:
		rq.fault(aerr)
	case t == nil:
		rq.fault(notFound(rq.ids[0]))
	case o == nil:
		rq.fault(notFound(rq.ids[1]))
	default:
		writeOne(rq, 200, o, ovirtsdk.XMLDiskAttachmentWriteOne)
	}
}

func hTemplateNICs(s *Simulator, rq *apiReq) {
	rq.owner = linkOwner{apiPrefix + "/templates/" + rq.ids[0], "template"}
	s.mu.RLock()
	t := s.inv.template(rq.ids[0])
	var sl *ovirtsdk.NicSlice
	if t != nil {
		sl = renderTemplateNICs(t)
	}
	s.mu.RUnlock()
	if sl == nil {
		rq.fault(notFound(rq.ids[0]))
		return
	}
	rq.writeXML(200, func(w *ovirtsdk.XMLWriter) error { return ovirtsdk.XMLNicWriteMany(w, sl, "", "") })
}

// ---- disks

var diskFields = []string{"name", "alias", "id", "status", "description", "storage", "format"}

func hDisks(s *Simulator, rq *apiReq) {
	sq, cs, aerr := rq.search("Disks", diskFields)
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	mx, aerr := rq.maxParam()
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	s.mu.RLock()
	now := time.Now()
	var ds []*disk
	for _, m := range []map[string]*disk{s.inv.disks, s.inv.tdisks} {
		for _, d := range m {
			get := func(f string) string {
				switch f {
				case "name", "alias":
					return d.alias
				case "id":
					return d.id
				case "status":
					return d.status(now)
				case "description":
					return d.description
				case "storage":
					return d.sd.name
				case "format":
					return d.format
				}
				return ""
			}
			if sq.match(get, cs) {
				ds = append(ds, d)
			}
		}
	}
	sortByName(ds, func(d *disk) string { return d.alias }, func(d *disk) string { return d.id }, sq != nil && sq.sortDesc)
	ds = limit(ds, mx)
	out := make([]*ovirtsdk.Disk, 0, len(ds))
	for _, d := range ds {
		out = append(out, renderDisk(d, now))
	}
	s.mu.RUnlock()
	sl := &ovirtsdk.DiskSlice{}
	sl.SetSlice(out)
	rq.writeXML(200, func(w *ovirtsdk.XMLWriter) error { return ovirtsdk.XMLDiskWriteMany(w, sl, "", "") })
}

func hDisk(s *Simulator, rq *apiReq) {
	s.mu.RLock()
	d := s.inv.anyDisk(rq.ids[0])
	var o *ovirtsdk.Disk
	if d != nil {
		o = renderDisk(d, time.Now())
	}
	s.mu.RUnlock()
	if o == nil {
		rq.fault(notFound(rq.ids[0]))
		return
	}
	writeOne(rq, 200, o, ovirtsdk.XMLDiskWriteOne)
}

// diskEditOf extracts alias/name and provisioned_size from a <disk>.
func diskEditOf(d *ovirtsdk.Disk, e *diskEdit) {
	if a, ok := d.Alias(); ok {
		e.alias = &a
	} else if n, ok := d.Name(); ok {
		e.alias = &n
	}
	if sz, ok := d.ProvisionedSize(); ok {
		e.sizeBytes = &sz
	}
}

func hUpdateDisk(s *Simulator, rq *apiReq) {
	body, aerr := parseBody(rq, "disk", ovirtsdk.XMLDiskReadOne)
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	var e diskEdit
	diskEditOf(body, &e)
	s.mu.Lock()
	now := time.Now()
	d := s.inv.anyDisk(rq.ids[0])
	var o *ovirtsdk.Disk
	if d == nil {
		aerr = notFound(rq.ids[0])
	} else if aerr = s.authorize(rq, need{group: ActionEditDiskProperties, object: s.inv.diskObject(d)}); aerr == nil {
		aerr = s.inv.editDisk(d, &e, now, s.timings)
		if aerr == nil {
			s.inv.addJob(rq.corr, "Editing disk "+d.alias, now, d.lockedUntil)
			o = renderDisk(d, now)
		}
	}
	s.mu.Unlock()
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	writeOne(rq, 200, o, ovirtsdk.XMLDiskWriteOne)
}

// diskSpecOf builds a new-disk spec from a full <disk>.
func diskSpecOf(d *ovirtsdk.Disk) *diskSpec {
	sp := &diskSpec{}
	if a, ok := d.Alias(); ok {
		sp.alias = a
	} else if n, ok := d.Name(); ok {
		sp.alias = n
	}
	sp.description, _ = d.Description()
	if w, ok := d.WipeAfterDelete(); ok {
		sp.wipe = &w
	}
	if b, ok := d.Backup(); ok {
		sp.backup = string(b)
	}
	if f, ok := d.Format(); ok {
		sp.format = string(f)
	}
	if sp2, ok := d.Sparse(); ok {
		sp.sparse = &sp2
	}
	sp.sizeBytes, _ = d.ProvisionedSize()
	if sds, ok := d.StorageDomains(); ok && len(sds.Slice()) > 0 {
		sp.sdID, _ = sds.Slice()[0].Id()
		sp.sdName, _ = sds.Slice()[0].Name()
	} else if sd, ok := d.StorageDomain(); ok {
		sp.sdID, _ = sd.Id()
		sp.sdName, _ = sd.Name()
	}
	return sp
}

func hAddDisk(s *Simulator, rq *apiReq) {
	body, aerr := parseBody(rq, "disk", ovirtsdk.XMLDiskReadOne)
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	sp := diskSpecOf(body)
	s.mu.Lock()
	now := time.Now()
	var d *disk
	if sd, err := s.inv.resolveSD(sp.sdID, sp.sdName); err == nil {
		aerr = s.authorize(rq, need{group: ActionCreateDisk, object: s.inv.sdObject(sd)})
	}
	if aerr == nil {
		d, aerr = s.inv.createDisk(sp, now, s.timings)
	}
	var o *ovirtsdk.Disk
	if aerr == nil {
		s.inv.addJob(rq.corr, "Adding disk "+d.alias, now, d.lockedUntil)
		o = renderDisk(d, now)
	}
	s.mu.Unlock()
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	rq.w.Header().Set("Location", apiPrefix+"/disks/"+d.id)
	writeOne(rq, 201, o, ovirtsdk.XMLDiskWriteOne)
}

func hRemoveDisk(s *Simulator, rq *apiReq) {
	s.mu.Lock()
	now := time.Now()
	d := s.inv.anyDisk(rq.ids[0])
	var aerr *apiError
	if d == nil {
		aerr = notFound(rq.ids[0])
	} else if aerr = s.authorize(rq, need{group: ActionDeleteDisk, object: s.inv.diskObject(d)}); aerr == nil {
		aerr = s.inv.deleteDisk(d, now)
		if aerr == nil {
			s.inv.addJob(rq.corr, "Removing disk "+d.alias, now, now)
		}
	}
	s.mu.Unlock()
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	rq.removed()
}

// ---- VMs

var vmFields = []string{"name", "cluster", "datacenter", "status", "comment", "description", "template", "os", "id", "host", "tag"}

func vmField(v *vm, f string, now time.Time) string {
	switch f {
	case "name":
		return v.name
	case "cluster":
		return v.cluster.name
	case "datacenter":
		return v.cluster.dc.name
	case "status":
		return v.status(now)
	case "comment":
		return v.comment
	case "description":
		return v.description
	case "template":
		return v.template.name
	case "os":
		return v.osType
	case "id":
		return v.id
	case "host":
		if h := v.runningOn(now); h != nil {
			return h.name
		}
	}
	return ""
}

func hVMs(s *Simulator, rq *apiReq) {
	sq, cs, aerr := rq.search("Vms", vmFields)
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	mx, aerr := rq.maxParam()
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	s.mu.RLock()
	rc, aerr := s.renderCtx(rq)
	if aerr != nil {
		s.mu.RUnlock()
		rq.fault(aerr)
		return
	}
	matches, aerr := s.inv.vmMatcher(sq, cs, rc.now) // tag clauses (vmtags.go)
	if aerr != nil {
		s.mu.RUnlock()
		rq.fault(aerr)
		return
	}
	var vms []*vm
	match := func(v *vm) {
		if matches(v) {
			vms = append(vms, v)
		}
	}
	if name, ok := sq.exactName(); ok {
		for _, v := range s.inv.vmsByName[strings.ToLower(name)] {
			match(v)
		}
	} else {
		vms = make([]*vm, 0, len(s.inv.vms))
		for _, v := range s.inv.vms {
			match(v)
		}
	}
	// The Engine orders VMs by name unless sortby says otherwise (vm_name ASC, the default sort
	// of SearchObjectAutoCompleter); a page clause cuts that order into max-sized pages.
	sortByName(vms, func(v *vm) string { return v.name }, func(v *vm) string { return v.id }, sq != nil && sq.sortDesc)
	vms = window(vms, sq, mx)
	out := make([]*ovirtsdk.Vm, 0, len(vms))
	for _, v := range vms {
		out = append(out, renderVM(v, rc, ""))
	}
	s.addVMExtras(rq, vms...) // the 4.5 model's pinning policies (performance.go)
	s.mu.RUnlock()
	sl := &ovirtsdk.VmSlice{}
	sl.SetSlice(out)
	rq.writeXML(200, func(w *ovirtsdk.XMLWriter) error { return ovirtsdk.XMLVmWriteMany(w, sl, "", "") })
}

func hVM(s *Simulator, rq *apiReq) {
	s.mu.RLock()
	rc, aerr := s.renderCtx(rq)
	v := s.inv.vms[rq.ids[0]]
	var o *ovirtsdk.Vm
	if v != nil && aerr == nil {
		o = renderVM(v, rc, "")
		s.addVMExtras(rq, v) // performance.go
	}
	s.mu.RUnlock()
	switch {
	case aerr != nil:
		rq.fault(aerr)
	case o == nil:
		rq.fault(notFound(rq.ids[0]))
	default:
		writeOne(rq, 200, o, ovirtsdk.XMLVmWriteOne)
	}
}

func toInt(v int64) int {
	return int(max(min(v, 1<<20), -1))
}

// vmSpecOf decodes a VM creation body; it fails where the engine's mappers do.
func vmSpecOf(v *ovirtsdk.Vm) (*vmSpec, *apiError) {
	sp := &vmSpec{}
	sp.name, _ = v.Name()
	if c, ok := v.Cluster(); ok {
		sp.clusterID, _ = c.Id()
		sp.clusterName, _ = c.Name()
	}
	if t, ok := v.Template(); ok {
		sp.templateID, _ = t.Id()
		sp.templateName, _ = t.Name()
	}
	if cpu, ok := v.Cpu(); ok {
		if tp, ok := cpu.Topology(); ok {
			if n, ok := tp.Sockets(); ok {
				sp.sockets = toInt(n)
			}
			if n, ok := tp.Cores(); ok {
				sp.cores = toInt(n)
			}
			if n, ok := tp.Threads(); ok {
				sp.threads = toInt(n)
			}
		}
	}
	sp.memory, _ = v.Memory()
	if mp, ok := v.MemoryPolicy(); ok {
		sp.guaranteed, _ = mp.Guaranteed()
		sp.maxMemory, _ = mp.Max()
	}
	if t, ok := v.Type(); ok {
		sp.vmType = string(t)
	}
	if o, ok := v.Os(); ok {
		sp.osType, _ = o.Type()
	}
	sp.comment, _ = v.Comment()
	sp.description, _ = v.Description()
	if ha, ok := v.HighAvailability(); ok {
		sp.ha, _ = ha.Enabled()
		sp.haPriority, _ = ha.Priority()
	}
	if in, ok := v.Initialization(); ok {
		sp.customScript, _ = in.CustomScript()
		sp.hostName, _ = in.HostName()
		sp.initUser, _ = in.UserName()
		sp.sshKeys, _ = in.AuthorizedSshKeys()
		sp.dnsServers, _ = in.DnsServers()
		sp.dnsSearch, _ = in.DnsSearch()
		nets, _, aerr := initNetworksOf(in)
		if aerr != nil {
			return nil, aerr
		}
		sp.initNets = nets
	}
	if das, ok := v.DiskAttachments(); ok {
		for _, da := range das.Slice() {
			d, ok := da.Disk()
			if !ok {
				continue
			}
			o := diskOverride{}
			o.diskID, _ = d.Id()
			if f, ok := d.Format(); ok {
				o.format = string(f)
			}
			if sp2, ok := d.Sparse(); ok {
				o.sparse = &sp2
			}
			if b, ok := d.Backup(); ok {
				o.backup = string(b)
			}
			if sds, ok := d.StorageDomains(); ok && len(sds.Slice()) > 0 {
				o.sdID, _ = sds.Slice()[0].Id()
				o.sdName, _ = sds.Slice()[0].Name()
			} else if sd, ok := d.StorageDomain(); ok {
				o.sdID, _ = sd.Id()
				o.sdName, _ = sd.Name()
			}
			sp.overrides = append(sp.overrides, o)
		}
	}
	return sp, nil
}

func hAddVM(s *Simulator, rq *apiReq) {
	clone, aerr := rq.boolParam("clone", false)
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	body, aerr := parseBody(rq, "vm", ovirtsdk.XMLVmReadOne)
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	sp, aerr := vmSpecOf(body)
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	if sp.perf, aerr = perfSpecOf(body, rq.body); aerr != nil { // performance.go
		rq.fault(aerr)
		return
	}
	sp.perf.autoPin = rq.q.Get("auto_pinning_policy")
	sp.clone, sp.corr = clone, rq.corr
	s.mu.Lock()
	now := time.Now()
	aerr = s.authorize(rq, s.inv.addVMNeeds(sp)...)
	var v *vm
	if aerr == nil {
		if v, aerr = s.inv.createVM(sp, now, s.timings); aerr == nil {
			s.ownVM(rq, v)
			v.noVirtioScsi = virtioScsiDisabled(body)
		}
	}
	var o *ovirtsdk.Vm
	var tasks bool // copying or snapshotting the template disks
	var unlockAt time.Time
	if aerr == nil {
		// The engine answers before the disks exist: image_locked.
		o = renderVM(v, &renderCtx{now: now, guestAgent: s.guestAgent}, "image_locked")
		s.addVMExtras(rq, v) // performance.go
		tasks, unlockAt = len(v.disks) > 0, v.unlockAt
	}
	s.mu.Unlock()
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	rq.w.Header().Set("Location", apiPrefix+"/vms/"+v.id)
	status := http.StatusCreated
	switch {
	case expects201(rq.r):
		// The engine waits for the command's tasks, then answers 201 with the VM as it is then.
		s.pause(rq.r.Context(), time.Until(unlockAt))
		s.mu.RLock()
		if cur := s.inv.vms[v.id]; cur != nil {
			o = renderVM(cur, &renderCtx{now: time.Now(), guestAgent: s.guestAgent}, "")
		}
		s.mu.RUnlock()
	case tasks:
		// The disk tasks are asynchronous: 202 Accepted with the creation status.
		status = http.StatusAccepted
		rq.extra = "<creation_status>pending</creation_status>"
	}
	writeOne(rq, status, o, ovirtsdk.XMLVmWriteOne)
}

// expectHeader is what the simulator's listener renames an "Expect" request
// header to: Go's net/http server answers 417 to any Expect but 100-continue.
const expectHeader = "Xxpect"

// expects201 reports whether the request sent "Expect: 201-created".
func expects201(r *http.Request) bool {
	for _, h := range []string{"Expect", expectHeader} {
		if strings.EqualFold(strings.TrimSpace(r.Header.Get(h)), "201-created") {
			return true
		}
	}
	return false
}

// vmUpdateOf decodes the fields present in a VM update body; it fails where
// the engine's mappers do.
func vmUpdateOf(v *ovirtsdk.Vm) (*vmUpdate, *apiError) {
	u := &vmUpdate{}
	str := func(s string, ok bool) *string {
		if !ok {
			return nil
		}
		return &s
	}
	u.name = str(v.Name())
	u.comment = str(v.Comment())
	u.description = str(v.Description())
	if t, ok := v.Type(); ok {
		u.vmType = str(string(t), true)
	}
	if o, ok := v.Os(); ok {
		u.osType = str(o.Type())
	}
	if ha, ok := v.HighAvailability(); ok {
		// VmBaseMapper: enabled and priority, each when given.
		if on, ok := ha.Enabled(); ok {
			u.ha = &on
		}
		if p, ok := ha.Priority(); ok {
			u.haPriority = &p
		}
	}
	if in, ok := v.Initialization(); ok {
		if aerr := u.mapInitialization(in); aerr != nil {
			return nil, aerr
		}
	}
	if cpu, ok := v.Cpu(); ok {
		if tp, ok := cpu.Topology(); ok {
			i := func(n int64, ok bool) *int {
				if !ok {
					return nil
				}
				x := toInt(n)
				return &x
			}
			u.sockets = i(tp.Sockets())
			u.cores = i(tp.Cores())
			u.threads = i(tp.Threads())
		}
	}
	i64 := func(n int64, ok bool) *int64 {
		if !ok {
			return nil
		}
		return &n
	}
	u.memory = i64(v.Memory())
	if mp, ok := v.MemoryPolicy(); ok {
		u.guaranteed = i64(mp.Guaranteed())
		u.maxMemory = i64(mp.Max())
	}
	return u, nil
}

// mapInitialization maps an <initialization> onto u as InitializationMapper.map(Initialization,
// VmInit) maps it onto the stored vm_init: the given sub-tags replace theirs, the others stay;
// without any sub-tag the vm_init is removed.
func (u *vmUpdate) mapInitialization(in *ovirtsdk.Initialization) *apiError {
	str := func(s string, ok bool) *string {
		if !ok {
			return nil
		}
		return &s
	}
	if !hasInitSubTag(in) {
		// InitializationMapper.map returns null without a sub-tag, and
		// VmHandler.updateVmInitToDB then removes the VM's vm_init.
		none := ""
		u.customScript, u.hostName, u.initUser, u.sshKeys = &none, &none, &none, &none
		u.dnsServers, u.dnsSearch, u.initNets = &none, &none, &[]initNetwork{}
	}
	// Otherwise the given sub-tags are mapped onto the stored vm_init
	// (the others stay); an empty <custom_script/> is "", which clears it.
	u.customScript = orStr(str(in.CustomScript()), u.customScript)
	u.hostName = orStr(str(in.HostName()), u.hostName)
	u.initUser = orStr(str(in.UserName()), u.initUser)
	u.sshKeys = orStr(str(in.AuthorizedSshKeys()), u.sshKeys)
	u.dnsServers = orStr(str(in.DnsServers()), u.dnsServers)
	u.dnsSearch = orStr(str(in.DnsSearch()), u.dnsSearch)
	nets, set, aerr := initNetworksOf(in)
	if aerr != nil {
		return aerr
	}
	if set {
		// The given list replaces the stored one (VmInit.networks is one value).
		u.initNets = &nets
	}
	return nil
}

// orStr returns a unless it is nil, else b.
func orStr(a, b *string) *string {
	if a != nil {
		return a
	}
	return b
}

// hasInitSubTag reports whether in sets one of the sub-tags that
// InitializationMapper.map(Initialization, VmInit) reads; without any it maps
// to no vm_init at all. configuration and regenerate_ids are not among them
// (they belong to imports).
func hasInitSubTag(in *ovirtsdk.Initialization) bool {
	set := func(_ any, ok bool) bool { return ok }
	return set(in.HostName()) || set(in.Domain()) || set(in.Timezone()) || set(in.AuthorizedSshKeys()) ||
		set(in.RegenerateSshKeys()) || set(in.DnsServers()) || set(in.DnsSearch()) ||
		set(in.WindowsLicenseKey()) || set(in.RootPassword()) || set(in.CustomScript()) ||
		set(in.NicConfigurations()) || set(in.InputLocale()) || set(in.UiLanguage()) ||
		set(in.SystemLocale()) || set(in.UserLocale()) || set(in.UserName()) ||
		set(in.ActiveDirectoryOu()) || set(in.OrgName()) || set(in.CloudInit()) ||
		set(in.CloudInitNetworkProtocol())
}

// hUpdateVM is PUT /vms/{id} (UpdateVmCommand). The comment and the
// initialization are @EditableVmField without onStatuses in VmBase: editable in
// every VM status and applied at once, never a next-run configuration
// (VmHandler.isUpdateValid; updateVmInitToDB runs whatever the status).
// UpdateVmCommand.validate has no status check; what refuses an update is a
// lock held by another command (see below).
func hUpdateVM(s *Simulator, rq *apiReq) {
	body, aerr := parseBody(rq, "vm", ovirtsdk.XMLVmReadOne)
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	u, aerr := vmUpdateOf(body)
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	if u.perf, aerr = perfSpecOf(body, rq.body); aerr != nil { // performance.go
		rq.fault(aerr)
		return
	}
	s.mu.Lock()
	rc, aerr := s.renderCtx(rq)
	v := s.inv.vms[rq.ids[0]]
	var o *ovirtsdk.Vm
	if aerr == nil && v == nil {
		aerr = notFound(rq.ids[0])
	}
	if aerr == nil {
		aerr = s.authorize(rq, need{group: ActionEditVMProperties, object: s.inv.vmObject(v)})
	}
	if aerr == nil && v.status(rc.now) == "image_locked" {
		// A VM is image_locked while AddVmCommand makes its disks, and that
		// command keeps its exclusive VM_NAME lock (ACTION_TYPE_FAILED_OBJECT_LOCKED)
		// until they are done. UpdateVmCommand takes the same lock, and the lock
		// manager answers with the holder's message (InMemoryLockManager).
		aerr = cannot(409, "edit VM", relatedOpWhy)
	}
	if aerr == nil {
		if aerr = s.inv.updateVM(v, u, rc.now); aerr == nil {
			s.inv.addJob(rq.corr, "Editing VM "+v.name, rc.now, rc.now)
			o = renderVM(v, rc, "")
			s.addVMExtras(rq, v) // performance.go
		}
	}
	s.mu.Unlock()
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	writeOne(rq, 200, o, ovirtsdk.XMLVmWriteOne)
}

func hRemoveVM(s *Simulator, rq *apiReq) {
	detach, aerr := rq.boolParam("detach_only", false)
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	force, aerr := rq.boolParam("force", false)
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	s.mu.Lock()
	now := time.Now()
	v := s.inv.vms[rq.ids[0]]
	if v == nil {
		aerr = notFound(rq.ids[0])
	} else if aerr = s.authorize(rq, need{group: ActionDeleteVM, object: s.inv.vmObject(v)}); aerr == nil {
		aerr = s.inv.removeVM(v, detach, force, false, now)
		if aerr == nil {
			s.inv.addJob(rq.corr, "Removing VM "+v.name, now, now)
		}
	}
	s.mu.Unlock()
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	rq.removed()
}

// vmAction runs a power action under the lock.
func (s *Simulator) vmAction(rq *apiReq, group string, op func(v *vm, now time.Time, tm Timings) (*apiError, string, time.Time)) {
	a, aerr := parseAction(rq)
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	s.vmActionOf(rq, a, group, op)
}

// vmActionOf runs op on the VM of an action already parsed.
func (s *Simulator) vmActionOf(rq *apiReq, _ *ovirtsdk.Action, group string, op func(v *vm, now time.Time, tm Timings) (*apiError, string, time.Time)) {
	s.mu.Lock()
	now := time.Now()
	v := s.inv.vms[rq.ids[0]]
	var aerr *apiError
	if v == nil {
		aerr = notFound(rq.ids[0])
	} else if aerr = s.authorize(rq, need{group: group, object: s.inv.vmObject(v)}); aerr == nil {
		var desc string
		var end time.Time
		v.settleHotplugs(now) // before the power phase changes (diskconfig.go)
		if aerr, desc, end = op(v, now, s.timings); aerr == nil {
			s.inv.addJob(rq.corr, desc, now, end)
		}
	}
	s.mu.Unlock()
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	rq.actionDone()
}

func hStart(s *Simulator, rq *apiReq) {
	a, aerr := parseAction(rq)
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	p, aerr := startParamsOf(a)
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	s.vmActionOf(rq, a, ActionRunVM, func(v *vm, now time.Time, tm Timings) (*apiError, string, time.Time) {
		if !s.guestAgent || v.noAgent {
			// Without an agent VDSM reports Up only after its timeout.
			tm.PoweringUp = tm.NoAgentPoweringUp
		}
		aerr := s.inv.startVM(v, now, tm, p)
		if aerr == nil {
			s.afterLaunch(v, v.host, now) // hostdevices.go
		}
		return aerr, "Launching VM " + v.name, now.Add(tm.WaitForLaunch + tm.PoweringUp)
	})
}

// startParams are what a start action asks beyond a plain RunVm (BackendVmResource.start).
type startParams struct {
	// runOnce: the action carries a <vm> (RunVmOnce). init is its <initialization> mapped onto
	// the stored vm_init for this run only (createRunVmOnceParams: InitializationMapper.map
	// onto the entity's VmInit); nil without one.
	runOnce bool
	init    *vmUpdate
	// volatile: <volatile>true</volatile> with a <vm> (volatileRun): a reboot of this run is a
	// cold one, back to the VM's stored configuration.
	volatile bool
	// initType is the initialization type use_cloud_init, use_ignition or use_sysprep asked for
	// (a format name), initNone when one was given as false, "" when the Engine decides.
	initType string
	// initialize is use_initialization: initialize even a VM that ran before.
	initialize bool
}

// initNone is the initialization type None: a use_* switch given as false.
const initNone = "none"

// startParamsOf reads a start action's <vm>, <volatile> and use_* switches as
// BackendVmResource.start does: two use_* switches set to true at once are a 409 before any
// command runs.
func startParamsOf(a *ovirtsdk.Action) (startParams, *apiError) {
	var p startParams
	if v, ok := a.Vm(); ok {
		p.runOnce = true
		if vol, ok := a.Volatile(); ok && vol {
			p.volatile = true
		}
		if in, ok := v.Initialization(); ok {
			p.init = &vmUpdate{}
			if aerr := p.init.mapInitialization(in); aerr != nil {
				return p, aerr
			}
		}
	}
	sysprep, sysprepSet := a.UseSysprep()
	cloudInit, cloudInitSet := a.UseCloudInit()
	ignition, ignitionSet := a.UseIgnition()
	if sysprep && cloudInit || sysprep && ignition || cloudInit && ignition {
		return p, &apiError{409, "Cannot use multiple initialization tags simultaneously when running VM.", ""}
	}
	switch {
	case sysprep:
		p.initType = InitFormatSysprep
	case cloudInit:
		p.initType = InitFormatCloudInit
	case ignition:
		p.initType = InitFormatIgnition
	case sysprepSet || cloudInitSet || ignitionSet:
		p.initType = initNone
	}
	p.initialize, _ = a.UseInitialization()
	return p, nil
}

func hStop(s *Simulator, rq *apiReq) {
	s.vmAction(rq, ActionStopVM, func(v *vm, now time.Time, _ Timings) (*apiError, string, time.Time) {
		return s.inv.stopVM(v, now), "Stopping VM " + v.name, now
	})
}

func hShutdown(s *Simulator, rq *apiReq) {
	s.vmAction(rq, ActionShutDownVM, func(v *vm, now time.Time, tm Timings) (*apiError, string, time.Time) {
		aerr, end := s.inv.shutdownVM(v, now, tm)
		return aerr, "Shutting down VM " + v.name, end
	})
}

func hReboot(s *Simulator, rq *apiReq) {
	s.vmAction(rq, ActionRebootVM, func(v *vm, now time.Time, tm Timings) (*apiError, string, time.Time) {
		aerr, end := s.inv.rebootVM(v, now, tm)
		return aerr, "Rebooting VM " + v.name, end
	})
}

// ---- VM disk attachments

// withVM runs f with the VM of the request under the read lock.
func (s *Simulator) withVM(rq *apiReq, f func(v *vm, rc *renderCtx) *apiError) {
	s.mu.RLock()
	rc, aerr := s.renderCtx(rq)
	if aerr == nil {
		if v := s.inv.vms[rq.ids[0]]; v == nil {
			aerr = notFound(rq.ids[0])
		} else {
			aerr = f(v, rc)
		}
	}
	s.mu.RUnlock()
	if aerr != nil {
		rq.fault(aerr)
	}
}

// mutateVM runs f with the VM of the request under the write lock; f
// returns what to write once the lock is released.
func (s *Simulator) mutateVM(rq *apiReq, f func(v *vm, rc *renderCtx) (func(), *apiError)) {
	s.mu.Lock()
	rc, aerr := s.renderCtx(rq)
	var write func()
	if aerr == nil {
		if v := s.inv.vms[rq.ids[0]]; v == nil {
			aerr = notFound(rq.ids[0])
		} else {
			write, aerr = f(v, rc)
		}
	}
	s.mu.Unlock()
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	write()
}

func hAttachments(s *Simulator, rq *apiReq) {
	rq.owner = linkOwner{apiPrefix + "/vms/" + rq.ids[0], "vm"}
	var sl *ovirtsdk.DiskAttachmentSlice
	s.withVM(rq, func(v *vm, rc *renderCtx) *apiError {
		sl = renderAttachments(v.disks, rc.follows("disk"), rc.now)
		return nil
	})
	if sl != nil {
		rq.writeXML(200, func(w *ovirtsdk.XMLWriter) error { return ovirtsdk.XMLDiskAttachmentWriteMany(w, sl, "", "") })
	}
}

func hAttachment(s *Simulator, rq *apiReq) {
	rq.owner = linkOwner{apiPrefix + "/vms/" + rq.ids[0], "vm"}
	var o *ovirtsdk.DiskAttachment
	s.withVM(rq, func(v *vm, rc *renderCtx) *apiError {
		d := v.attachment(rq.ids[1])
		if d == nil {
			return notFound(rq.ids[1])
		}
		o = renderAttachment(d, rc.follows("disk"), rc.now)
		return nil
	})
	if o != nil {
		writeOne(rq, 200, o, ovirtsdk.XMLDiskAttachmentWriteOne)
	}
}

func hAddAttachment(s *Simulator, rq *apiReq) {
	rq.owner = linkOwner{apiPrefix + "/vms/" + rq.ids[0], "vm"}
	body, aerr := parseBody(rq, "disk_attachment", ovirtsdk.XMLDiskAttachmentReadOne)
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	bootable, _ := body.Bootable()
	active, activeSet := body.Active()
	if !activeSet {
		active = true
	}
	var iface string
	if i, ok := body.Interface(); ok {
		iface = string(i)
	}
	bd, hasDisk := body.Disk()
	if !hasDisk {
		rq.fault(incomplete("DiskAttachment", []string{"disk.id|provisionedSize"}, "add"))
		return
	}
	diskID, _ := bd.Id()
	s.mutateVM(rq, func(v *vm, rc *renderCtx) (func(), *apiError) {
		var d *disk
		if diskID != "" {
			if aerr := s.authorize(rq, need{group: ActionConfigureVMStorage, object: s.inv.vmObject(v)}); aerr != nil {
				return nil, aerr
			}
			if d = s.inv.anyDisk(diskID); d == nil {
				return nil, notFound("Disk: id=" + diskID)
			}
			if aerr := s.inv.attachDisk(v, d, bootable, iface, active, rc.now); aerr != nil {
				return nil, aerr
			}
		} else {
			// AddDisk (diskconfig.go): CONFIGURE_VM_STORAGE on the VM and CREATE_DISK on the domain.
			sp := diskSpecOf(bd)
			if aerr := s.authorize(rq, s.inv.addDiskNeeds(v, sp)...); aerr != nil {
				return nil, aerr
			}
			a := newAttachment{bootable: bootable, iface: iface}
			if activeSet {
				a.active = &active
			}
			var aerr *apiError
			if d, aerr = s.inv.addVMDisk(v, sp, a, rc.now, s.timings); aerr != nil {
				return nil, aerr
			}
		}
		s.inv.addJob(rq.corr, fmt.Sprintf("Attaching disk %s to VM %s", d.alias, v.name), rc.now, d.lockedUntil)
		o := renderAttachment(d, false, rc.now)
		return func() {
			rq.w.Header().Set("Location", apiPrefix+"/vms/"+v.id+"/diskattachments/"+d.id)
			writeOne(rq, 201, o, ovirtsdk.XMLDiskAttachmentWriteOne)
		}, nil
	})
}

func hUpdateAttachment(s *Simulator, rq *apiReq) {
	rq.owner = linkOwner{apiPrefix + "/vms/" + rq.ids[0], "vm"}
	body, aerr := parseBody(rq, "disk_attachment", ovirtsdk.XMLDiskAttachmentReadOne)
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	var e diskEdit
	if d, ok := body.Disk(); ok {
		diskEditOf(d, &e)
	}
	if b, ok := body.Bootable(); ok {
		e.bootable = &b
	}
	if a, ok := body.Active(); ok {
		e.active = &a
	}
	if i, ok := body.Interface(); ok {
		is := string(i)
		e.iface = &is
	}
	s.mutateVM(rq, func(v *vm, rc *renderCtx) (func(), *apiError) {
		d := v.attachment(rq.ids[1])
		if d == nil {
			return nil, notFound(rq.ids[1])
		}
		// UpdateDisk needs EDIT_DISK_PROPERTIES on the disk (UpdateDiskCommand).
		if aerr := s.authorize(rq, need{group: ActionEditDiskProperties, object: s.inv.diskObject(d)}); aerr != nil {
			return nil, aerr
		}
		oldSize := d.sizeBytes
		if aerr := s.inv.editDisk(d, &e, rc.now, s.timings); aerr != nil {
			return nil, aerr
		}
		desc := fmt.Sprintf("Editing disk %s of VM %s", d.alias, v.name)
		if d.sizeBytes != oldSize {
			desc = fmt.Sprintf("Extending disk %s of VM %s to %d GiB", d.alias, v.name, d.sizeGB())
		}
		s.inv.addJob(rq.corr, desc, rc.now, d.lockedUntil)
		o := renderAttachment(d, rc.follows("disk"), rc.now)
		return func() { writeOne(rq, 200, o, ovirtsdk.XMLDiskAttachmentWriteOne) }, nil
	})
}

func hRemoveAttachment(s *Simulator, rq *apiReq) {
	// As documented in the API model and the SDK: the default is to detach only.
	detach, aerr := rq.boolParam("detach_only", true)
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	s.mutateVM(rq, func(v *vm, rc *renderCtx) (func(), *apiError) {
		d := v.attachment(rq.ids[1])
		if d == nil {
			return nil, notFound(rq.ids[1])
		}
		// DetachDiskFromVm: CONFIGURE_VM_STORAGE on the VM; RemoveDisk: DELETE_DISK on the disk.
		n := need{group: ActionConfigureVMStorage, object: s.inv.vmObject(v)}
		if !detach {
			n = need{group: ActionDeleteDisk, object: s.inv.diskObject(d)}
		}
		if aerr := s.authorize(rq, n); aerr != nil {
			return nil, aerr
		}
		if detach {
			if aerr := s.inv.detachDisk(v, d, false, rc.now); aerr != nil {
				return nil, aerr
			}
			s.inv.addJob(rq.corr, fmt.Sprintf("Detaching disk %s from VM %s", d.alias, v.name), rc.now, rc.now)
		} else {
			if aerr := s.inv.deleteDisk(d, rc.now); aerr != nil {
				return nil, aerr
			}
			s.inv.addJob(rq.corr, fmt.Sprintf("Removing disk %s of VM %s", d.alias, v.name), rc.now, rc.now)
		}
		return rq.removed, nil
	})
}

// ---- NICs and reported devices

func hNICs(s *Simulator, rq *apiReq) {
	rq.owner = linkOwner{apiPrefix + "/vms/" + rq.ids[0], "vm"}
	var sl *ovirtsdk.NicSlice
	s.withVM(rq, func(v *vm, rc *renderCtx) *apiError {
		sl = renderNICs(v, rc, rc.follows("reported_devices"))
		return nil
	})
	if sl != nil {
		rq.writeXML(200, func(w *ovirtsdk.XMLWriter) error { return ovirtsdk.XMLNicWriteMany(w, sl, "", "") })
	}
}

func hNIC(s *Simulator, rq *apiReq) {
	rq.owner = linkOwner{apiPrefix + "/vms/" + rq.ids[0], "vm"}
	var o *ovirtsdk.Nic
	s.withVM(rq, func(v *vm, rc *renderCtx) *apiError {
		n := v.nicByID(rq.ids[1])
		if n == nil {
			return notFound(rq.ids[1])
		}
		o = renderNIC(v, n, rc, rc.follows("reported_devices"))
		return nil
	})
	if o != nil {
		writeOne(rq, 200, o, ovirtsdk.XMLNicWriteOne)
	}
}

func nicSpecOf(n *ovirtsdk.Nic) *nicSpec {
	sp := &nicSpec{}
	sp.name, _ = n.Name()
	if p, ok := n.VnicProfile(); ok {
		sp.hasProfile = true
		sp.profileID, _ = p.Id()
	}
	if i, ok := n.Interface(); ok {
		sp.iface = string(i)
	}
	if m, ok := n.Mac(); ok {
		sp.mac, _ = m.Address()
	}
	if p, ok := n.Plugged(); ok {
		sp.plugged = &p
	}
	if l, ok := n.Linked(); ok {
		sp.linked = &l
	}
	return sp
}

func hAddNIC(s *Simulator, rq *apiReq) {
	rq.owner = linkOwner{apiPrefix + "/vms/" + rq.ids[0], "vm"}
	body, aerr := parseBody(rq, "nic", ovirtsdk.XMLNicReadOne)
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	sp := nicSpecOf(body)
	s.mutateVM(rq, func(v *vm, rc *renderCtx) (func(), *apiError) {
		if aerr := s.authorize(rq, s.inv.nicNeeds(v, sp, nil)...); aerr != nil {
			return nil, aerr
		}
		n, aerr := s.inv.addNIC(v, sp, rc.now)
		if aerr != nil {
			return nil, aerr
		}
		s.inv.addJob(rq.corr, fmt.Sprintf("Adding network interface %s to VM %s", n.name, v.name), rc.now, rc.now)
		o := renderNIC(v, n, rc, false)
		return func() {
			rq.w.Header().Set("Location", apiPrefix+"/vms/"+v.id+"/nics/"+n.id)
			writeOne(rq, 201, o, ovirtsdk.XMLNicWriteOne)
		}, nil
	})
}

func hUpdateNIC(s *Simulator, rq *apiReq) {
	rq.owner = linkOwner{apiPrefix + "/vms/" + rq.ids[0], "vm"}
	body, aerr := parseBody(rq, "nic", ovirtsdk.XMLNicReadOne)
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	sp := nicSpecOf(body)
	s.mutateVM(rq, func(v *vm, rc *renderCtx) (func(), *apiError) {
		n := v.nicByID(rq.ids[1])
		if n == nil {
			return nil, notFound(rq.ids[1])
		}
		if aerr := s.authorize(rq, s.inv.nicNeeds(v, sp, n)...); aerr != nil {
			return nil, aerr
		}
		if aerr := s.inv.updateNIC(v, n, sp, rc.now); aerr != nil {
			return nil, aerr
		}
		s.inv.addJob(rq.corr, fmt.Sprintf("Updating network interface %s of VM %s", n.name, v.name), rc.now, rc.now)
		o := renderNIC(v, n, rc, false)
		return func() { writeOne(rq, 200, o, ovirtsdk.XMLNicWriteOne) }, nil
	})
}

func hRemoveNIC(s *Simulator, rq *apiReq) {
	s.mutateVM(rq, func(v *vm, rc *renderCtx) (func(), *apiError) {
		n := v.nicByID(rq.ids[1])
		if n == nil {
			return nil, notFound(rq.ids[1])
		}
		if aerr := s.authorize(rq, need{group: ActionConfigureVMNetwork, object: s.inv.vmObject(v)}); aerr != nil {
			return nil, aerr
		}
		if aerr := s.inv.removeNIC(v, n, rc.now); aerr != nil {
			return nil, aerr
		}
		s.inv.addJob(rq.corr, fmt.Sprintf("Removing network interface %s from VM %s", n.name, v.name), rc.now, rc.now)
		return rq.removed, nil
	})
}

func writeReportedDevices(rq *apiReq, sl *ovirtsdk.ReportedDeviceSlice) {
	rq.writeXML(200, func(w *ovirtsdk.XMLWriter) error { return ovirtsdk.XMLReportedDeviceWriteMany(w, sl, "", "") })
}

func hReportedDevices(s *Simulator, rq *apiReq) {
	rq.owner = linkOwner{apiPrefix + "/vms/" + rq.ids[0], "vm"}
	var sl *ovirtsdk.ReportedDeviceSlice
	s.withVM(rq, func(v *vm, rc *renderCtx) *apiError {
		sl = reportedDevices(v, rc)
		return nil
	})
	if sl != nil {
		writeReportedDevices(rq, sl)
	}
}

func hNICReportedDevices(s *Simulator, rq *apiReq) {
	rq.owner = linkOwner{apiPrefix + "/vms/" + rq.ids[0] + "/nics/" + rq.ids[1], "nic"}
	var sl *ovirtsdk.ReportedDeviceSlice
	s.withVM(rq, func(v *vm, rc *renderCtx) *apiError {
		if v.nicByID(rq.ids[1]) == nil {
			return notFound(rq.ids[1])
		}
		// Every NIC answers with the VM's whole list, as the engine does.
		sl = reportedDevices(v, rc)
		return nil
	})
	if sl != nil {
		writeReportedDevices(rq, sl)
	}
}

// ---- jobs

var jobFields = []string{"correlation_id", "status", "description"}

func hJobs(s *Simulator, rq *apiReq) {
	sq, cs, aerr := rq.search("Jobs", jobFields)
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	mx, aerr := rq.maxParam()
	if aerr != nil {
		rq.fault(aerr)
		return
	}
	s.mu.RLock()
	now := time.Now()
	cands := s.inv.jobs
	if sq != nil && len(sq.groups) == 1 {
		for _, c := range sq.groups[0] {
			if c.field == "correlation_id" && !c.neg && !c.wildcard && cs {
				cands = s.inv.jobsByCorr[c.value]
			}
		}
	}
	var out []*ovirtsdk.Job
	for _, j := range cands {
		get := func(f string) string {
			switch f {
			case "correlation_id":
				return j.corr
			case "status":
				return j.status(now)
			case "description":
				return j.description
			}
			return ""
		}
		if sq.match(get, cs) {
			out = append(out, renderJob(j, now))
		}
	}
	s.mu.RUnlock()
	sl := &ovirtsdk.JobSlice{}
	sl.SetSlice(limit(out, mx))
	rq.writeXML(200, func(w *ovirtsdk.XMLWriter) error { return ovirtsdk.XMLJobWriteMany(w, sl, "", "") })
}

func hJob(s *Simulator, rq *apiReq) {
	s.mu.RLock()
	j := s.inv.jobByID(rq.ids[0])
	var o *ovirtsdk.Job
	if j != nil {
		o = renderJob(j, time.Now())
	}
	s.mu.RUnlock()
	if o == nil {
		rq.fault(notFound(rq.ids[0]))
		return
	}
	writeOne(rq, 200, o, ovirtsdk.XMLJobWriteOne)
}
