package ovirtsim

import (
	"bytes"
	"strings"
)

// go-ovirt's writers emit only the id attribute of an entity: no href and no
// <link> elements. The engine sends both (restapi's LinkHelper), so the
// simulator adds them to the writer's output in one pass: every element with
// an id gets an href, and every full entity (one with children, as opposed to
// a bare reference) gets the <link rel="..." href="..."/> children of its
// type in the API model. go-ovirt's readers turn those links into the Href of
// the corresponding (empty) slices.

// linkOwner is the entity whose sub-collection a response lists, e.g. the VM
// of GET /vms/{id}/nics; its zero value means a top-level collection.
type linkOwner struct {
	href, kind string
}

// tagKinds maps the XML element names that carry ids to entity kinds.
var tagKinds = map[string]string{
	"vm": "vm", "template": "template", "original_template": "template", "blank_template": "template",
	"base_template": "template", "cluster": "cluster", "data_center": "data_center",
	"storage_domain": "storage_domain", "disk": "disk", "disk_attachment": "disk_attachment",
	"nic": "nic", "reported_device": "reported_device", "network": "network",
	"management_network": "network", "vnic_profile": "vnic_profile", "job": "job",
	"host": "host", "affinity_group": "affinity_group",
	// Of what the simulator renders, only a tag has a <parent> (its parent tag).
	"tag": "tag", "parent": "tag",
	"host_device": "host_device", "parent_device": "host_device", "physical_function": "host_device",
	"vm_mediated_device": "vm_mediated_device",
}

// topCollections are the top-level collection of each kind.
var topCollections = map[string]string{
	"vm": "/vms/", "template": "/templates/", "cluster": "/clusters/", "data_center": "/datacenters/",
	"storage_domain": "/storagedomains/", "disk": "/disks/", "network": "/networks/",
	"vnic_profile": "/vnicprofiles/", "job": "/jobs/", "host": "/hosts/", "tag": "/tags/",
}

// entityLinks are the link relations of each kind, as the API model (and
// go-ovirt's readers) define them.
var entityLinks = map[string][]string{
	"vm": {"affinitylabels", "applications", "backups", "cdroms", "checkpoints", "diskattachments",
		"floppies", "graphicsconsoles", "hostdevices", "katelloerrata", "mediateddevices", "nics",
		"numanodes", "permissions", "reporteddevices", "sessions", "snapshots", "statistics", "tags", "watchdogs"},
	"template": {"cdroms", "diskattachments", "graphicsconsoles", "mediateddevices", "nics", "permissions",
		"tags", "watchdogs"},
	"cluster": {"affinitygroups", "cpuprofiles", "enabledfeatures", "externalnetworkproviders",
		"glusterhooks", "glustervolumes", "networkfilters", "networks", "permissions"},
	"data_center":    {"clusters", "iscsibonds", "networks", "permissions", "qoss", "quotas", "storagedomains"},
	"storage_domain": {"diskprofiles", "disks", "disksnapshots", "files", "images", "permissions", "storageconnections", "templates", "vms"},
	"disk":           {"disksnapshots", "permissions", "statistics"},
	"vm_nic":         {"networkfilterparameters", "reporteddevices", "statistics"},
	"network":        {"networklabels", "permissions", "vnicprofiles"},
	"vnic_profile":   {"permissions"},
	"job":            {"steps"},
	"host": {"affinitylabels", "cpuunits", "devices", "externalnetworkproviderconfigurations", "fenceagents",
		"hooks", "katelloerrata", "networkattachments", "nics", "numanodes", "permissions", "statistics", "storage",
		"storageconnectionextensions", "tags", "unmanagednetworks"},
	"affinity_group": {"hostlabels", "hosts", "vmlabels", "vms"},
}

// appendHref appends the href of an entity of kind with id to b, given the
// nearest enclosing full entity (or the owner of the listed sub-collection).
// It appends nothing for kinds without one.
func appendHref(b []byte, kind string, id []byte, owner linkOwner) []byte {
	sub := ""
	switch {
	case kind == "disk_attachment" && (owner.kind == "vm" || owner.kind == "template"):
		sub = "/diskattachments/"
	case kind == "nic" && (owner.kind == "vm" || owner.kind == "template"):
		sub = "/nics/"
	case kind == "reported_device" && (owner.kind == "vm" || owner.kind == "nic"):
		sub = "/reporteddevices/"
	case kind == "storage_domain" && owner.kind == "data_center":
		sub = "/storagedomains/"
	case kind == "cluster" && owner.kind == "data_center":
		sub = "/clusters/"
	case kind == "network" && owner.kind == "cluster":
		sub = "/networks/"
	case kind == "affinity_group" && owner.kind == "cluster":
		sub = "/affinitygroups/"
	case kind == "tag" && owner.kind == "vm":
		sub = "/tags/" // a VM's assigned tag (BackendVmTagResource)
	case kind == "host_device" && owner.kind == "host":
		sub = "/devices/"
	case kind == "host_device" && owner.kind == "vm":
		sub = "/hostdevices/"
	case kind == "vm_mediated_device" && owner.kind == "vm":
		sub = "/mediateddevices/"
	case kind == "host_device" && owner.kind == "host_device":
		// A device's parent or physical function: a sibling of the device.
		if i := strings.LastIndexByte(owner.href, '/'); i >= 0 {
			b = append(b, owner.href[:i+1]...)
			return append(b, id...)
		}
	}
	if sub != "" {
		b = append(b, owner.href...)
		b = append(b, sub...)
		return append(b, id...)
	}
	if c, ok := topCollections[kind]; ok {
		b = append(b, apiPrefix...)
		b = append(b, c...)
		return append(b, id...)
	}
	return b
}

// tagNameAndID extracts the element name and the id attribute of a start tag
// written by go-ovirt (`<name id="...">`).
func tagNameAndID(tag []byte) (name, id []byte) {
	end := bytes.IndexAny(tag, " >")
	if end < 0 {
		return nil, nil
	}
	name = tag[1:end]
	i := bytes.Index(tag, []byte(` id="`))
	if i < 0 {
		return name, nil
	}
	rest := tag[i+5:]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return name, nil
	}
	return name, rest[:j]
}

// addLinks copies src (XML written by go-ovirt) to dst, adding href
// attributes and <link> children. extra (raw XML) goes into the first
// top-level entity right after its links, e.g. a <creation_status>;
// extraFor, if not nil, gives raw XML for any full entity (by kind and id),
// for fields go-ovirt's model lacks.
func addLinks(dst *bytes.Buffer, src []byte, owner linkOwner, extra string, extraFor func(kind, id string) string) {
	type frame struct {
		owner linkOwner // set when this element is a full entity
	}
	var stackArr [16]frame
	stack := stackArr[:0]
	var hrefArr [256]byte
	current := func() linkOwner {
		for i := len(stack) - 1; i >= 0; i-- {
			if stack[i].owner.href != "" {
				return stack[i].owner
			}
		}
		return owner
	}
	for i := 0; i < len(src); {
		j := bytes.IndexByte(src[i:], '<')
		if j < 0 {
			dst.Write(src[i:])
			break
		}
		dst.Write(src[i : i+j])
		i += j
		k := bytes.IndexByte(src[i:], '>')
		if k < 0 {
			dst.Write(src[i:])
			break
		}
		tag := src[i : i+k+1]
		i += k + 1
		if len(tag) > 1 && (tag[1] == '?' || tag[1] == '!') {
			dst.Write(tag)
			continue
		}
		if len(tag) > 1 && tag[1] == '/' {
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			dst.Write(tag)
			continue
		}
		name, id := tagNameAndID(tag)
		kind := tagKinds[string(name)]
		var fr frame
		if len(id) == 0 || kind == "" {
			dst.Write(tag)
			stack = append(stack, fr)
			continue
		}
		parent := current()
		href := appendHref(hrefArr[:0], kind, id, parent)
		if len(href) == 0 {
			dst.Write(tag)
			stack = append(stack, fr)
			continue
		}
		dst.Write(tag[:len(tag)-1])
		dst.WriteString(` href="`)
		dst.Write(href)
		dst.WriteString(`">`)
		if !bytes.HasPrefix(src[i:], []byte("</")) { // a full entity, not a reference
			fr.owner = linkOwner{href: string(href), kind: kind}
			rels := kind
			if kind == "nic" && parent.kind == "vm" {
				rels = "vm_nic"
			}
			for _, rel := range entityLinks[rels] {
				dst.WriteString(`<link href="`)
				dst.Write(href)
				dst.WriteByte('/')
				dst.WriteString(rel)
				dst.WriteString(`" rel="`)
				dst.WriteString(rel)
				dst.WriteString(`"/>`)
			}
			if extra != "" && len(stack) == 0 {
				dst.WriteString(extra)
				extra = ""
			}
			if extraFor != nil {
				dst.WriteString(extraFor(kind, string(id)))
			}
		}
		stack = append(stack, fr)
	}
}
