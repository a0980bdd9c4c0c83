package ovirtsim_test

import (
	"net/url"
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
	} {
		f.Add(s, 0)
	}
	targets := []struct{ method, path string }{
		{"POST", "/vms"}, {"PUT", "/vms/" + id}, {"POST", "/vms/" + id + "/diskattachments"},
		{"POST", "/vms/" + id + "/nics"}, {"POST", "/vms/" + id + "/start"}, {"POST", "/disks"},
	}
	f.Fuzz(func(t *testing.T, body string, target int) {
		tg := targets[uint(target)%uint(len(targets))]
		rec := p.do(tg.method, tg.path, body)
		if rec.Code >= 500 {
			t.Fatalf("%s %s %q: %d %s", tg.method, tg.path, body, rec.Code, rec.Body)
		}
	})
}

// FuzzSearch feeds arbitrary search expressions: 200 or a 400 fault, nothing else.
func FuzzSearch(f *testing.F) {
	_, p, _ := fuzzSim(f)
	for i, s := range []string{`name="vm-00000"`, `name=vm* and cluster=Default or status!=up sortby name desc`,
		`name="unterminated`, `or`, `and and`, `name=`, `x=y`, `name>3`, `sortby`, `"`, `name!=*'*'*`} {
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
