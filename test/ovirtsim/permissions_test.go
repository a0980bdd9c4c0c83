package ovirtsim_test

import (
	"net/http"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/test/ovirtsim"
)

// asUser sends a raw API request with a user's basic credentials.
func asUser(g Gomega, sim *ovirtsim.Simulator, user, password, method, path, body string) (int, string) {
	req, err := http.NewRequest(method, sim.URL()+path, strings.NewReader(body))
	g.Expect(err).NotTo(HaveOccurred())
	req.SetBasicAuth(user, password)
	req.Header.Set("Content-Type", "application/xml")
	resp, err := httpsClient(sim).Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	return resp.StatusCode, readAll(resp)
}

func TestAUserWithoutAPermissionGetsTheEnginesRefusal(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, func(b *ovirtsim.Builder) {
		b.WithUser(ovirtsim.User{Username: "viewer@internal", Password: "pw",
			Grants: []ovirtsim.Grant{{Role: "UserRole", Cluster: "Default"}}})
	})
	conn := connect(t, sim)
	vmID := createVM(t, conn, "theirs", false)

	// A user logs in through SSO like the administrator.
	userConn, err := ovirtsdk.NewConnectionBuilder().URL(sim.URL()).Username("viewer@internal").Password("pw").
		CACert(sim.CAPEM()).Build()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = userConn.Close() })
	g.Expect(userConn.Test()).To(Succeed())
	bad, err := ovirtsdk.NewConnectionBuilder().URL(sim.URL()).Username("viewer@internal").Password("wrong").
		CACert(sim.CAPEM()).Build()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(bad.Test()).NotTo(Succeed(), "a wrong password is refused")

	// UserRole runs and stops VMs, and may not remove them: 403 with the Engine's fault.
	status, body := asUser(g, sim, "viewer@internal", "pw", "POST", "/vms/"+vmID+"/start", "<action/>")
	g.Expect(status).To(Equal(200), body)
	status, body = asUser(g, sim, "viewer@internal", "pw", "DELETE", "/vms/"+vmID, "")
	g.Expect(status).To(Equal(403))
	g.Expect(body).To(ContainSubstring("<reason>Operation Failed</reason>"))
	g.Expect(body).To(ContainSubstring("<detail>[User is not authorized to perform this action.]</detail>"))
	_, still := sim.VM(vmID)
	g.Expect(still).To(BeTrue())

	// A VM that does not exist is a 404 before any permission check, as the REST layer answers.
	status, _ = asUser(g, sim, "viewer@internal", "pw", "DELETE", "/vms/00000000-0000-0000-0000-00000000dead", "")
	g.Expect(status).To(Equal(404))

	// Tags are checked on the system object: UserRole on a cluster is no TagManager.
	status, _ = asUser(g, sim, "viewer@internal", "pw", "POST", "/tags", "<tag><name>t1</name></tag>")
	g.Expect(status).To(Equal(403))

	// The administrator grants more at run time (the admin endpoint replaces the user).
	code, out := admin(t, sim, "PUT", "/sim/users", `{"username":"viewer@internal","password":"pw","grants":[{"role":"UserRole","cluster":"Default"},{"role":"TagManager"}]}`)
	g.Expect(code).To(Equal(http.StatusCreated), out)
	status, body = asUser(g, sim, "viewer@internal", "pw", "POST", "/tags", "<tag><name>t1</name></tag>")
	g.Expect(status).To(Equal(201), body)

	// Reset returns to the seed's users.
	sim.Reset()
	status, _ = asUser(g, sim, "viewer@internal", "pw", "POST", "/tags", "<tag><name>t2</name></tag>")
	g.Expect(status).To(Equal(403))
}

func TestAUserIsCheckedWhenItIsAdded(t *testing.T) {
	sim := startSim(t)
	for _, tc := range []struct {
		user ovirtsim.User
		want string
	}{
		{ovirtsim.User{Username: "a@internal"}, "needs a username and a password"},
		{ovirtsim.User{Username: sim.Username(), Password: "x"}, "is the administrator"},
		{ovirtsim.User{Username: "a@internal", Password: "x", Grants: []ovirtsim.Grant{{Role: "Nobody"}}}, `unknown role "Nobody"`},
		{ovirtsim.User{Username: "a@internal", Password: "x", Grants: []ovirtsim.Grant{{}}}, "a role or action groups"},
		{ovirtsim.User{Username: "a@internal", Password: "x", Grants: []ovirtsim.Grant{{Role: "ClusterAdmin", Cluster: "Nowhere"}}}, `no cluster named "Nowhere"`},
		{ovirtsim.User{Username: "a@internal", Password: "x", Grants: []ovirtsim.Grant{{Role: "ClusterAdmin", Cluster: "Default", DataCenter: "Default"}}}, "at most one object"},
	} {
		err := sim.AddUser(tc.user)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("AddUser(%+v) = %v, want an error containing %q", tc.user, err, tc.want)
		}
	}
	_, err := ovirtsim.NewBuilder().WithUser(ovirtsim.User{Username: "b@internal", Password: "x",
		Grants: []ovirtsim.Grant{{Role: "VmCreator", Cluster: "Nowhere"}}}).Build()
	if err == nil || !strings.Contains(err.Error(), "Nowhere") {
		t.Errorf("a seed user with an unknown cluster: %v", err)
	}
}
