package ovirtsim_test

import (
	"testing"

	. "github.com/onsi/gomega"
	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/test/ovirtsim"
)

// uuidV1 is the layout of the engine's InstanceId (uuid_generate_v1 in
// packaging/dbscripts/upgrade/pre_upgrade/0000_config.sql).
const uuidV1 = `^[0-9a-f]{8}-[0-9a-f]{4}-1[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`

// productInfo reads GET /ovirt-engine/api through the SDK, as the provider's
// EngineInfo does, with a fresh connection (so after RestartEngine too).
func productInfo(t *testing.T, sim *ovirtsim.Simulator) *ovirtsdk.ProductInfo {
	t.Helper()
	r, err := connect(t, sim).SystemService().Get().Send()
	if err != nil {
		t.Fatalf("GET /api: %v", err)
	}
	return r.MustApi().MustProductInfo()
}

func TestInstanceIDIsPerEngineAndSurvivesRestarts(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	a := startSim(t)
	b := startSim(t) // the same seed: still another installation

	id, ok := productInfo(t, a).InstanceId()
	g.Expect(ok).To(BeTrue(), "a 4.5 engine reports product_info.instance_id")
	g.Expect(id).To(MatchRegexp(uuidV1))
	g.Expect(id).To(Equal(a.InstanceID()), "the accessor tells tests what the wire says")

	other, _ := productInfo(t, b).InstanceId()
	g.Expect(other).To(MatchRegexp(uuidV1))
	g.Expect(other).NotTo(Equal(id), "two engines never share an instance id")

	a.RestartEngine()
	g.Expect(productInfo(t, a).MustInstanceId()).To(Equal(id), "the id lives in vdc_options: a restart keeps it")
	a.Reset()
	g.Expect(productInfo(t, a).MustInstanceId()).To(Equal(id), "Reset returns to the built engine, not to another one")
}

func TestInstanceIDOnlyFromEngine443(t *testing.T) {
	t.Parallel()
	cases := []struct {
		version string
		want    bool
	}{
		{"4.3.10", false},
		{"4.4", false},
		{"4.4.2", false},
		{"4.4.3", true},
		{"4.4.10", true},
		{"4.5.5", true},
	}
	for _, tc := range cases {
		t.Run(tc.version, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			sim := startSim(t, func(b *ovirtsim.Builder) { b.WithVersion(tc.version) })
			pi := productInfo(t, sim)
			id, ok := pi.InstanceId()
			g.Expect(ok).To(Equal(tc.want), "instance_id on %s", tc.version)
			g.Expect(id).To(Equal(sim.InstanceID()))
			g.Expect(pi.MustName()).To(Equal("oVirt Engine"), "the rest of product_info is there either way")
		})
	}
}
