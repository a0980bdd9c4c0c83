package ovirtsim_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/capov/capov/test/ovirtsim"
)

// fuzzSim is a simulator shared by the iterations of one fuzz target.
func fuzzSim(f *testing.F) (*ovirtsim.Simulator, *inProcess, string) {
	sim := startSim(f)
	p := newInProcess(f, sim)
	id := populate(f, p, 1)[0]
	return sim, p, id
}

// FuzzVMBodies feeds arbitrary bodies to the XML endpoints: the answer must
// be an engine answer (2xx or a 4xx fault), never a 5xx or a panic.
func FuzzVMBodies(f *testing.F) {
	_, p, id := fuzzSim(f)
	for _, s := range []string{
		`<vm><name>a</name><cluster><name>Default</name></cluster><template><name>rhcos-4.14</name></template></vm>`,
		`<vm><name>b</name><cluster id="x"/><template id="y"/><memory>-1</memory></vm>`,
		`<vm><cpu><topology><sockets>99999999999</sockets></topology></cpu></vm>`,
		`<disk_attachment><disk><provisioned_size>1</provisioned_size></disk></disk_attachment>`,
		`<nic><name>n</name><mac><address>zz</address></mac></nic>`,
		`<action><force>maybe</force></action>`, `<?xml version="1.0"?><vm/>`, `<`, `&`, "",
		`<tag id="1-2-3-4-5"/>`, `<tag><name>t</name></tag>`, `<tag id=""/>`,
		`<disk_attachment><disk><format>raw</format><sparse>true</sparse><backup>x</backup></disk></disk_attachment>`,
		`<vm><custom_properties><custom_property><name>hugepages</name><value>x</value></custom_property></custom_properties>` +
			`<placement_policy><affinity>pinned</affinity><hosts><host><name>host1</name></host></hosts></placement_policy>` +
			`<cpu><mode>host_passthrough</mode><cpu_tune><vcpu_pins><vcpu_pin><vcpu>0</vcpu><cpu_set>1</cpu_set></vcpu_pin></vcpu_pins></cpu_tune></cpu>` +
			`<lease><storage_domain id="x"/></lease><io><threads>4</threads></io><cpu_pinning_policy>manual</cpu_pinning_policy></vm>`,
	} {
		f.Add(s, 0)
	}
	targets := []struct{ method, path string }{
		{"POST", "/vms"}, {"PUT", "/vms/" + id}, {"POST", "/vms/" + id + "/diskattachments"},
		{"POST", "/vms/" + id + "/nics"}, {"POST", "/vms/" + id + "/start"}, {"POST", "/disks"},
		{"POST", "/vms/" + id + "/tags"},
	}
	f.Fuzz(func(t *testing.T, body string, target int) {
		tg := targets[uint(target)%uint(len(targets))]
		rec := p.do(tg.method, tg.path, body)
		// The Engine itself answers 500 to a few bodies (a ';' in a custom property fails the
		// command's creation on 4.5, a vcpu_pin without vcpu is a NullPointerException in its
		// mapper), and the simulator does as it does; a failure of the simulator's own says
		// "simulator error".
		if rec.Code >= 500 && (strings.Contains(rec.Body.String(), "simulator error") || !strings.Contains(rec.Body.String(), "<fault>")) {
			t.Fatalf("%s %s %q: %d %s", tg.method, tg.path, body, rec.Code, rec.Body)
		}
	})
}

// FuzzSearch feeds arbitrary search expressions: 200 or a 400 fault, nothing else.
func FuzzSearch(f *testing.F) {
	_, p, _ := fuzzSim(f)
	for i, s := range []string{`name="vm-00000"`, `name=vm* and cluster=Default or status!=up sortby name desc`,
		`name="unterminated`, `or`, `and and`, `name=`, `x=y`, `name>3`, `sortby`, `"`, `name!=*'*'*`,
		`tag=a(`, `tag=* or tag!=x`} {
		f.Add(s, i)
	}
	colls := []string{"/vms", "/templates", "/disks", "/jobs", "/clusters", "/storagedomains"}
	f.Fuzz(func(t *testing.T, q string, coll int) {
		c := colls[uint(coll)%uint(len(colls))]
		rec := p.do("GET", c+"?search="+url.QueryEscape(q), "")
		if rec.Code != 200 && rec.Code != 400 {
			t.Fatalf("GET %s search %q: %d %s", c, q, rec.Code, rec.Body)
		}
	})
}
