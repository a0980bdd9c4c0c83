package ovirtsim_test

import (
	"crypto/x509"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/test/ovirtsim"
)

// TestServeObservedSeesEveryRequestWithTheVMAsItWas serves the same simulator on an observed
// listener: each request is reported before it is served, with the VM its path names as it
// was at that moment, and the work happens in the one shared state.
func TestServeObservedSeesEveryRequestWithTheVMAsItWas(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t)
	var mu sync.Mutex
	var seen []ovirtsim.ObservedRequest
	url, err := sim.ServeObserved(func(o ovirtsim.ObservedRequest) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, o)
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(url).NotTo(Equal(sim.URL()))

	conn, err := ovirtsdk.NewConnectionBuilder().URL(url).Username(sim.Username()).Password(sim.Password()).
		CertPool(x509.NewCertPool()).CACert(sim.CAPEM()).Timeout(30 * time.Second).Build()
	g.Expect(err).NotTo(HaveOccurred())
	defer conn.Close()
	vm, err := vmBuilder("observed", "rhcos-4.14", "Default").Comment("capov ovirtmachine=ns/observed uid=1").Build()
	g.Expect(err).NotTo(HaveOccurred())
	r, err := conn.SystemService().VmsService().Add().Vm(vm).Send()
	g.Expect(err).NotTo(HaveOccurred())
	id, _ := r.MustVm().Id()
	g.Eventually(func() string { st, _ := sim.VM(id); return st.Status }, 5*time.Second, 20*time.Millisecond).Should(Equal("down"))
	_, err = conn.SystemService().VmsService().VmService(id).Start().Send()
	g.Expect(err).NotTo(HaveOccurred())
	_, err = conn.SystemService().VmsService().VmService("00000000-0000-0000-0000-00000000abcd").Stop().Send()
	g.Expect(err).To(HaveOccurred(), "no such VM")

	mu.Lock()
	defer mu.Unlock()
	var create, start, missing *ovirtsim.ObservedRequest
	for i := range seen {
		o := &seen[i]
		switch {
		case o.Method == "POST" && o.Template == "/vms":
			create = o
		case o.Method == "POST" && o.Template == "/vms/{id}/start":
			start = o
		case o.Method == "POST" && o.Template == "/vms/{id}/stop":
			missing = o
		}
	}
	g.Expect(create).NotTo(BeNil())
	g.Expect(create.VMID).To(BeEmpty(), "a create names no VM")
	g.Expect(start).NotTo(BeNil())
	g.Expect(start.VMID).To(Equal(id))
	g.Expect(start.Path).To(Equal("/vms/" + id + "/start"))
	g.Expect(start.VMExists).To(BeTrue())
	g.Expect(start.VM.Status).To(Equal("down"), "the VM as it was before the start was served")
	g.Expect(start.VM.Comment).To(Equal("capov ovirtmachine=ns/observed uid=1"))
	g.Expect(missing).NotTo(BeNil())
	g.Expect(missing.VMExists).To(BeFalse())
	g.Expect(sim.RequestCount("POST", "/vms/{id}/start")).To(Equal(1), "one state, one set of counters")
	st, _ := sim.VM(id)
	g.Expect(st.Status).NotTo(Equal("down"))
}

// TestIssuedTokensListsValidTokens checks that the tokens the SSO endpoint hands out are
// listed until the Engine restarts.
func TestIssuedTokensListsValidTokens(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t)
	g.Expect(sim.IssuedTokens()).To(BeEmpty())
	conn := connect(t, sim)
	defer conn.Close()
	g.Expect(sim.IssuedTokens()).To(HaveLen(1))
	g.Expect(len(sim.IssuedTokens()[0])).To(BeNumerically(">", 16))
	sim.RestartEngine()
	g.Expect(sim.IssuedTokens()).To(BeEmpty())
}
