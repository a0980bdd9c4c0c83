package controllers

import (
	"fmt"
	"regexp"
	"strings"
)

// The Engine never hands a guest CAPOV's cloud-config as it is: it writes the user data as
// "#cloud-config\n", a YAML map of its own, then the custom script (vdsbroker
// CloudInitHandler.getUserData). cloud-init renders Jinja only when "## template: jinja" is
// the first line of the user data, so in an oVirt guest the header of a Cluster API kubeadm
// bootstrap config is a comment and its template expressions stay literal: a node named
// "{{ local_hostname }}" fails kubeadm's name validation. CAPOV therefore renders the
// expressions whose value it knows, the VM's host name (it sets initialization.host_name, which
// the Engine writes to the config drive's meta data, where cloud-init reads local-hostname),
// before the data goes to the Engine.

// jinjaHeader is the header cloud-init recognises (user_data.py: a case-insensitive prefix of
// the user data).
var jinjaHeader = regexp.MustCompile(`(?i)\A## template: jinja[ \t]*(\r?\n|\z)`)

// hostNameExpr is a Jinja expression of the guest's host name in cloud-init's instance data:
// the top-level alias, the standardised v1 key and the datasource's meta data key.
var hostNameExpr = regexp.MustCompile(`\{\{-?\s*(?:local_hostname|v1\.local_hostname|ds\.meta_data\.local_hostname)\s*-?\}\}`)

// jinjaExpr is any other Jinja expression, statement or comment.
var jinjaExpr = regexp.MustCompile(`\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}`)

// renderCloudConfigTemplate returns cloud-config bootstrap data as the Engine must receive it
// for a guest with hostName: data without a Jinja header unchanged; a Jinja template with its
// host-name expressions replaced and its header removed. A template that uses any other
// expression cannot work on oVirt (cloud-init never renders it there): that is an error
// naming the expression.
func renderCloudConfigTemplate(data, hostName string) (string, error) {
	header := jinjaHeader.FindString(data)
	if header == "" {
		return data, nil
	}
	out := hostNameExpr.ReplaceAllLiteralString(strings.TrimPrefix(data, header), hostName)
	if expr := jinjaExpr.FindString(out); expr != "" {
		return "", fmt.Errorf("it is a Jinja template (%q) that uses %s: oVirt writes its own #cloud-config before the "+
			"bootstrap data, so cloud-init never renders templates on an oVirt guest; CAPOV renders only the host name "+
			"({{ local_hostname }}, {{ v1.local_hostname }}, {{ ds.meta_data.local_hostname }}): remove the other "+
			"expressions from the bootstrap config (KubeadmConfig files, commands, nodeRegistration)",
			strings.TrimSpace(header), expr)
	}
	return out, nil
}
