package ovirtsim_test

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/test/ovirtsim"
)

func TestConnectionTestReturnsTheEngineAPIRoot(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	r, err := conn.SystemService().Get().Send()
	g.Expect(err).NotTo(HaveOccurred())
	api, ok := r.Api()
	g.Expect(ok).To(BeTrue())
	g.Expect(api.MustProductInfo().MustName()).To(Equal("oVirt Engine"))
	g.Expect(api.MustProductInfo().MustVersion().MustMajor()).To(BeEquivalentTo(4))
	g.Expect(api.MustProductInfo().MustVersion().MustMinor()).To(BeEquivalentTo(5))
	g.Expect(api.MustSpecialObjects().MustBlankTemplate().MustId()).To(Equal("00000000-0000-0000-0000-000000000000"))
	g.Expect(api.MustSummary().MustStorageDomains().MustTotal()).To(BeEquivalentTo(2))
	g.Expect(sim.URL()).To(HavePrefix("https://127.0.0.1:"))
	g.Expect(sim.URL()).To(HaveSuffix("/ovirt-engine/api"))
	g.Expect(sim.Logins()).To(Equal(1))
}

func TestSSOWithAWrongPasswordIsAnAuthError(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t)
	conn, err := ovirtsdk.NewConnectionBuilder().URL(sim.URL()).Username(sim.Username()).Password("wrong").
		CertPool(x509.NewCertPool()).CACert(sim.CAPEM()).Build()
	g.Expect(err).NotTo(HaveOccurred())
	err = conn.Test()
	ae, ok := errAs[*ovirtsdk.AuthError](err)
	g.Expect(ok).To(BeTrue(), "got %T %v", err, err)
	g.Expect(ae.Error()).To(ContainSubstring("access_denied"))
	g.Expect(ae.Error()).To(ContainSubstring("Cannot authenticate user 'admin@internal': The username or password is incorrect.."))
	g.Expect(sim.FailedLogins()).To(Equal(1))
	g.Expect(sim.Logins()).To(Equal(0))
	g.Expect(sim.TotalRequests()).To(Equal(0), "the SDK never reaches the API without a token")
	g.Expect(sim.RequestCount("POST", "/sso/oauth/token")).To(Equal(1))
}

func TestSSOAnswersLikeTheEngineOnTheWire(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t)
	c := httpsClient(sim)
	post := func(form url.Values) (int, string) {
		resp, err := c.PostForm("https://"+sim.Addr()+"/ovirt-engine/sso/oauth/token", form)
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	st, body := post(url.Values{"grant_type": {"password"}, "scope": {"ovirt-app-api"}, "username": {"admin@internal"}, "password": {"secret"}})
	g.Expect(st).To(Equal(200))
	g.Expect(body).To(MatchRegexp(`"access_token":"[A-Za-z0-9_-]{43}"`))
	g.Expect(body).To(ContainSubstring(`"token_type":"bearer"`))
	st, body = post(url.Values{"grant_type": {"password"}, "scope": {"ovirt-app-api"}, "username": {"x"}, "password": {"y"}})
	g.Expect(st).To(Equal(400))
	g.Expect(body).To(Equal(`{"error":"Cannot authenticate user 'x': The username or password is incorrect..","error_code":"access_denied"}`))
	st, body = post(url.Values{"grant_type": {"client_credentials"}, "scope": {"ovirt-app-api"}})
	g.Expect(st).To(Equal(400))
	g.Expect(body).To(ContainSubstring("unsupported_grant_type"))
}

func TestExpiredTokensGet401AndAFreshConnectionWorks(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	id := createVM(t, conn, "expiry", false)
	sim.SetTokenTTL(50 * time.Millisecond)
	time.Sleep(80 * time.Millisecond)

	_, err := conn.SystemService().VmsService().VmService(id).Get().Send()
	rpe, ok := errAs[*ovirtsdk.ResponseParseError](err)
	g.Expect(ok).To(BeTrue(), "got %T %v", err, err)
	g.Expect(rpe.Code).To(Equal(401))
	g.Expect(string(rpe.Body())).To(ContainSubstring("invalid_grant: The provided authorization grant for the auth code has expired."))
	// The SDK does not re-authenticate, not even in Test().
	g.Expect(conn.Test()).To(HaveOccurred())
	// Actions parse the body differently: the HTML becomes a tag mismatch.
	_, err = conn.SystemService().VmsService().VmService(id).Start().Send()
	tm, ok := errAs[ovirtsdk.XMLTagNotMatchError](err)
	g.Expect(ok).To(BeTrue(), "got %T %v", err, err)
	g.Expect(tm.ActualTag).To(Equal("html"))
	g.Expect(sim.RequestCount("GET", "/vms/{id}")).To(Equal(1))
	g.Expect(sim.Requests()[ovirtsim.RequestKey{Method: "GET", Path: "/vms/{id}", Status: 401}]).To(Equal(1))

	sim.SetTokenTTL(time.Hour)
	fresh := connect(t, sim)
	g.Expect(vmStatus(t, fresh, id)).To(BeEquivalentTo("down"))
	g.Expect(sim.Logins()).To(Equal(2))
}

func TestRestartEngineInvalidatesEveryToken(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t)
	a, b := connect(t, sim), connect(t, sim)
	sim.RestartEngine()
	for _, c := range []*ovirtsdk.Connection{a, b} {
		_, err := c.SystemService().ClustersService().List().Send()
		rpe, ok := errAs[*ovirtsdk.ResponseParseError](err)
		g.Expect(ok).To(BeTrue(), "got %T %v", err, err)
		g.Expect(rpe.Code).To(Equal(401))
	}
	g.Expect(connect(t, sim).Test()).To(Succeed())
}

func TestSSOLogoutRevokesTheNamedToken(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t)
	c := httpsClient(sim)
	resp, err := c.PostForm("https://"+sim.Addr()+"/ovirt-engine/sso/oauth/token",
		url.Values{"grant_type": {"password"}, "scope": {"ovirt-app-api"}, "username": {"admin@internal"}, "password": {"secret"}})
	g.Expect(err).NotTo(HaveOccurred())
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	tok := strings.Split(strings.Split(string(b), `"access_token":"`)[1], `"`)[0]
	get := func() int {
		req, _ := http.NewRequest("GET", sim.URL()+"/clusters", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := c.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		return resp.StatusCode
	}
	g.Expect(get()).To(Equal(200))
	resp, err = c.PostForm("https://"+sim.Addr()+"/ovirt-engine/services/sso-logout", url.Values{"scope": {""}, "token": {tok}})
	g.Expect(err).NotTo(HaveOccurred())
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(200))
	g.Expect(string(b)).To(Equal("{}"))
	g.Expect(get()).To(Equal(401))

	// The SDK's Close sends an empty token (it never stores it): harmless, and
	// the connection keeps working.
	conn := connect(t, sim)
	g.Expect(conn.Close()).To(Succeed())
	g.Expect(conn.Test()).To(Succeed())
	g.Expect(sim.RequestCount("POST", "/services/sso-logout")).To(Equal(2))
}

func TestBasicAuthAndCredentialChanges(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, func(b *ovirtsim.Builder) { b.WithCredentials("capov@internal", "pw") })
	c := httpsClient(sim)
	req, _ := http.NewRequest("GET", sim.URL()+"/vms", nil)
	req.SetBasicAuth("capov@internal", "pw")
	resp, err := c.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(200))

	old := connect(t, sim)
	sim.SetCredentials("other@internal", "pw2")
	g.Expect(old.Test()).To(Succeed(), "issued tokens stay valid")
	g.Expect(rawConn(t, sim).Test()).To(Succeed(), "new connections use the new credentials")
	stale, _ := ovirtsdk.NewConnectionBuilder().URL(sim.URL()).Username("capov@internal").Password("pw").Insecure(true).Build()
	_, ok := errAs[*ovirtsdk.AuthError](stale.Test())
	g.Expect(ok).To(BeTrue())

	// Without credentials at all: 401.
	resp, err = c.Get(sim.URL())
	g.Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(401))
}

func TestTLSModes(t *testing.T) {
	sim := startSim(t)
	t.Run("only the simulator CA in the pool works", func(t *testing.T) {
		g := NewWithT(t)
		conn, err := ovirtsdk.NewConnectionBuilder().URL(sim.URL()).Username(sim.Username()).Password(sim.Password()).
			CertPool(x509.NewCertPool()).CACert(sim.CAPEM()).Build()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(conn.Test()).To(Succeed())
	})
	t.Run("the CA as a file works", func(t *testing.T) {
		g := NewWithT(t)
		p := filepath.Join(t.TempDir(), "ca.pem")
		g.Expect(os.WriteFile(p, sim.CAPEM(), 0o600)).To(Succeed())
		conn, err := ovirtsdk.NewConnectionBuilder().URL(sim.URL()).Username(sim.Username()).Password(sim.Password()).
			CAFile(p).Build()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(conn.Test()).To(Succeed())
	})
	t.Run("the system pool does not know the simulator CA", func(t *testing.T) {
		g := NewWithT(t)
		conn, err := ovirtsdk.NewConnectionBuilder().URL(sim.URL()).Username(sim.Username()).Password(sim.Password()).Build()
		g.Expect(err).NotTo(HaveOccurred())
		err = conn.Test()
		g.Expect(err).To(HaveOccurred())
		_, ok := errAs[x509.UnknownAuthorityError](err)
		g.Expect(ok).To(BeTrue(), "got %T %v", err, err)
		g.Expect(err.Error()).To(ContainSubstring("x509: certificate signed by unknown authority"))
	})
	t.Run("insecure works", func(t *testing.T) {
		g := NewWithT(t)
		conn, err := ovirtsdk.NewConnectionBuilder().URL(sim.URL()).Username(sim.Username()).Password(sim.Password()).
			Insecure(true).Build()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(conn.Test()).To(Succeed())
	})
	t.Run("the certificate names localhost too", func(t *testing.T) {
		g := NewWithT(t)
		u := strings.Replace(sim.URL(), "127.0.0.1", "localhost", 1)
		conn, err := ovirtsdk.NewConnectionBuilder().URL(u).Username(sim.Username()).Password(sim.Password()).
			CertPool(x509.NewCertPool()).CACert(sim.CAPEM()).Build()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(conn.Test()).To(Succeed())
	})
}

// httpsClient trusts only the simulator CA.
func httpsClient(sim *ovirtsim.Simulator) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(sim.CAPEM())
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}
