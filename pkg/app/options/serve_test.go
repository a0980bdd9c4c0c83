package options

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestParseListeners(t *testing.T) {
	opened := func(got *[]string) func(fd int, name string) (net.Listener, error) {
		return func(fd int, name string) (net.Listener, error) {
			*got = append(*got, fmt.Sprintf("%s=%d", name, fd))
			return net.Listen("tcp", "127.0.0.1:0")
		}
	}
	for name, tt := range map[string]struct {
		count, names, pid string
		wantOpened        []string
		wantErr           string
	}{
		"nothing handed over":      {},
		"webhook and health":       {count: "2", names: "webhook:health", wantOpened: []string{"webhook=3", "health=4"}},
		"meant for this process":   {count: "1", names: "health", pid: "42", wantOpened: []string{"health=3"}},
		"meant for another":        {count: "1", names: "health", pid: "7"},
		"a count that is no count": {count: "two", names: "webhook", wantErr: `LISTEN_FDS="two"`},
		"fewer names than sockets": {count: "2", names: "webhook", wantErr: "must name each of the 2"},
		"no names":                 {count: "1", wantErr: "must name each of the 1"},
		"an unknown name":          {count: "1", names: "metrics", wantErr: `socket 0 is named "metrics"; the names are webhook and health`},
		"a name twice":             {count: "2", names: "health:health", wantErr: `"health" is named twice`},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			var got []string
			ls, err := parseListeners(tt.count, tt.names, tt.pid, 42, opened(&got))
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			defer ls.Close()
			g.Expect(got).To(Equal(tt.wantOpened))
			for _, o := range tt.wantOpened {
				name := strings.Split(o, "=")[0]
				g.Expect(ls.Take(name)).NotTo(BeNil(), name)
				g.Expect(ls.Take(name)).To(BeNil(), "taken once only")
			}
		})
	}
}

func TestListenTakesTheHandedOverSocketElseBinds(t *testing.T) {
	g := NewWithT(t)
	held, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	ls := NewListeners(map[string]net.Listener{ListenerHealth: held})

	got, err := ls.Listen(ListenerHealth, "127.0.0.1:1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(BeIdenticalTo(held), "the handed-over socket wins over the flag's address")

	own, err := ls.Listen(ListenerHealth, "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(own.Addr().String()).NotTo(Equal(held.Addr().String()))
	g.Expect(own.Close()).To(Succeed())
	g.Expect(held.Close()).To(Succeed())

	none, err := ls.Listen(ListenerWebhook, "0")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(none).To(BeNil(), `"0" disables the endpoint`)

	_, err = (*Listeners)(nil).Listen(ListenerHealth, "not an address")
	g.Expect(err).To(MatchError(ContainSubstring("listening on not an address for the health endpoint")))
}

// TestInheritedListenersFromAParent hands a listener over as a supervisor does (a child
// process, file descriptor 3, LISTEN_FDS and LISTEN_FDNAMES) and serves on it.
func TestInheritedListenersFromAParent(t *testing.T) {
	if os.Getenv("CAPOV_TEST_CHILD") == "1" {
		ls, err := InheritedListeners()
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		for _, v := range []string{"LISTEN_FDS", "LISTEN_FDNAMES"} {
			if os.Getenv(v) != "" {
				fmt.Println("error:", v, "is still set for the children of this process")
				os.Exit(1)
			}
		}
		ln := ls.Take(ListenerHealth)
		if ln == nil {
			fmt.Println("error: no health socket")
			os.Exit(1)
		}
		c, err := ln.Accept()
		if err != nil {
			os.Exit(1)
		}
		_, _ = io.WriteString(c, "served by the child")
		_ = c.Close()
		os.Exit(0)
	}
	g := NewWithT(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	defer ln.Close()
	f, err := ln.(*net.TCPListener).File()
	g.Expect(err).NotTo(HaveOccurred())
	cmd := exec.Command(os.Args[0], "-test.run=^TestInheritedListenersFromAParent$")
	cmd.Env = append(os.Environ(), "CAPOV_TEST_CHILD=1", "LISTEN_FDS=1", "LISTEN_FDNAMES=health")
	cmd.ExtraFiles = []*os.File{f}
	var out strings.Builder
	cmd.Stdout = &out
	g.Expect(cmd.Start()).To(Succeed())
	g.Expect(f.Close()).To(Succeed())
	c, err := net.Dial("tcp", ln.Addr().String())
	g.Expect(err).NotTo(HaveOccurred())
	b, err := io.ReadAll(c)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(b)).To(Equal("served by the child"))
	g.Expect(cmd.Wait()).To(Succeed(), out.String())
}

func TestProbesServeLikeControllerRuntime(t *testing.T) {
	g := NewWithT(t)
	p := &Probes{}
	ready := errors.New("caches not synced")
	g.Expect(p.AddHealthzCheck("ping", func(*http.Request) error { return nil })).To(Succeed())
	g.Expect(p.AddReadyzCheck("ping", func(*http.Request) error { return nil })).To(Succeed())
	g.Expect(p.AddReadyzCheck("informers", func(*http.Request) error { return ready })).To(Succeed())
	g.Expect(p.AddReadyzCheck("ping", func(*http.Request) error { return nil })).To(MatchError(`check "ping" is added twice`))
	srv := httptest.NewServer(p.Handler())
	defer srv.Close()
	get := func(path string) int {
		resp, err := http.Get(srv.URL + path)
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		return resp.StatusCode
	}
	g.Expect(get("/healthz")).To(Equal(http.StatusOK))
	g.Expect(get("/readyz")).To(Equal(http.StatusInternalServerError), "one check fails")
	g.Expect(get("/readyz/ping")).To(Equal(http.StatusOK))
	g.Expect(get("/readyz/informers")).To(Equal(http.StatusInternalServerError))
	ready = nil
	g.Expect(get("/readyz")).To(Equal(http.StatusOK))
	g.Expect(get("/readyz/nope")).To(Equal(http.StatusNotFound))
}
