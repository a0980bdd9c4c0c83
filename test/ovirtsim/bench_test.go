package ovirtsim_test

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/capov/capov/test/ovirtsim"
)

func benchSim(b *testing.B, n int) (*ovirtsim.Simulator, *inProcess, []string) {
	b.Helper()
	sim := startSim(b)
	p := newInProcess(b, sim)
	ids := populate(b, p, n)
	return sim, p, ids
}

// BenchmarkSDKGetVM is GET /vms/{id} through the real SDK over HTTPS. The SDK
// disables keep-alives, so every call includes a TCP connect and a TLS
// handshake: this is what a controller pays per call.
func BenchmarkSDKGetVM(b *testing.B) {
	sim, _, ids := benchSim(b, 5000)
	conn := connect(b, sim)
	vms := conn.SystemService().VmsService()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		if _, err := vms.VmService(ids[i%len(ids)]).Get().Send(); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkHTTPSKeepAliveGetVM is GET /vms/{id} over HTTPS with keep-alive:
// the simulator's cost per request without handshakes.
func BenchmarkHTTPSKeepAliveGetVM(b *testing.B) {
	sim, p, ids := benchSim(b, 5000)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(sim.CAPEM())
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	b.ResetTimer()
	i := 0
	for b.Loop() {
		req, _ := http.NewRequest("GET", sim.URL()+"/vms/"+ids[i%len(ids)], nil)
		req.Header.Set("Authorization", "Bearer "+p.token)
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
		i++
	}
}

// BenchmarkHandlerGetVM is GET /vms/{id} on the raw handler with 5,000 VMs:
// routing, auth, counters, rendering with go-ovirt's writer.
func BenchmarkHandlerGetVM(b *testing.B) {
	_, p, ids := benchSim(b, 5000)
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		if rec := p.do("GET", "/vms/"+ids[i%len(ids)], ""); rec.Code != 200 {
			b.Fatalf("status %d", rec.Code)
		}
		i++
	}
}

// BenchmarkHandlerGetVMFollow adds follow=disk_attachments.disk,nics.reported_devices.
func BenchmarkHandlerGetVMFollow(b *testing.B) {
	_, p, ids := benchSim(b, 5000)
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		if rec := p.do("GET", "/vms/"+ids[i%len(ids)]+"?follow=disk_attachments.disk,nics.reported_devices", ""); rec.Code != 200 {
			b.Fatalf("status %d", rec.Code)
		}
		i++
	}
}

// BenchmarkHandlerSearchVMByName is GET /vms?search=name="..." with 5,000 VMs (name index).
func BenchmarkHandlerSearchVMByName(b *testing.B) {
	_, p, _ := benchSim(b, 5000)
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		if rec := p.do("GET", fmt.Sprintf("/vms?search=name%%3D%%22vm-%05d%%22", i%5000), ""); rec.Code != 200 {
			b.Fatalf("status %d", rec.Code)
		}
		i++
	}
}

// BenchmarkHandlerCreateDeleteVM is POST /vms then DELETE /vms/{id} with 5,000 other VMs.
func BenchmarkHandlerCreateDeleteVM(b *testing.B) {
	_, p, _ := benchSim(b, 5000)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		rec := p.do("POST", "/vms?clone=true", `<vm><name>bench</name><cluster><name>Default</name></cluster><template><name>rhcos-4.14</name></template></vm>`)
		if rec.Code != 202 {
			b.Fatalf("status %d %s", rec.Code, rec.Body)
		}
		s := rec.Body.String()
		id := s[len(`<vm id="`) : len(`<vm id="`)+36]
		if rec := p.do("DELETE", "/vms/"+id, ""); rec.Code != 200 {
			b.Fatalf("status %d %s", rec.Code, rec.Body)
		}
	}
}
