package images

import (
	"bytes"
	"encoding/pem"
	"fmt"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// The runtime user and the file system of gcr.io/distroless/static-debian12:nonroot, the base
// of Dockerfile.manager and Dockerfile.webhook. Only what a static Go binary can use is kept:
// the users and groups, the home and temporary directories, the name service switch and the
// CA bundle (distroless also ships tzdata, netbase and media-types, which our binaries do
// not read).
const (
	// NonRootUID and NonRootGID are distroless's "nonroot" user and group.
	NonRootUID = 65532
	NonRootGID = 65532
	// User is the image config's User, as the Dockerfiles' USER line sets it.
	User = "65532:65532"
	// WorkingDir is the working directory of distroless's nonroot images (the Dockerfiles'
	// runtime stage sets none, so it is inherited).
	WorkingDir = "/home/nonroot"
	// CABundlePath is where the CA bundle lives, and the SSL_CERT_FILE of the environment.
	CABundlePath = "/etc/ssl/certs/ca-certificates.crt"
)

// Env is the environment of the image config, as distroless sets it.
func Env() []string {
	return []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"SSL_CERT_FILE=" + CABundlePath,
	}
}

// passwd and group carry distroless's entries, in its order.
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group = "root:x:0:\n" +
		"nobody:x:65534:\n" +
		"tty:x:5:\n" +
		"staff:x:50:\n" +
		"nonroot:x:65532:\n"
	// nsswitch makes glibc-style resolvers (and Go's, which reads the hosts line) look in
	// /etc/hosts before DNS, as on distroless.
	nsswitch = "# Name service switch: local files first, then DNS.\n" +
		"passwd:    files\n" +
		"group:     files\n" +
		"shadow:    files\n" +
		"hosts:     files dns\n" +
		"networks:  files\n" +
		"protocols: files\n" +
		"services:  files\n" +
		"ethers:    files\n" +
		"rpc:       files\n"
)

// baseEntries returns the distroless-compatible file system, the same for every platform,
// with ca as the CA bundle.
func baseEntries(ca []byte) []entry {
	dir := func(name string, mode int64, uid, gid int) entry {
		return entry{name: name, dir: true, mode: mode, uid: uid, gid: gid}
	}
	file := func(name, data string) entry {
		return entry{name: name, mode: 0o644, data: []byte(data)}
	}
	return []entry{
		dir("etc", 0o755, 0, 0),
		file("etc/group", group),
		file("etc/nsswitch.conf", nsswitch),
		file("etc/passwd", passwd),
		dir("etc/ssl", 0o755, 0, 0),
		dir("etc/ssl/certs", 0o755, 0, 0),
		{name: CABundlePath[1:], mode: 0o644, data: ca},
		dir("home", 0o755, 0, 0),
		dir("home/nonroot", 0o700, NonRootUID, NonRootGID),
		dir("root", 0o700, 0, 0),
		dir("tmp", 0o1777, 0, 0),
	}
}

// caBundle returns the PEM bundle of the Mozilla NSS roots that
// golang.org/x/crypto/x509roots/fallback embeds: pinned by go.sum, so the same for every
// build of a commit (the host's bundle would not be). Roots that NSS constrains (distrust
// after a date) are left out: a PEM file cannot carry the constraint, and trusting them
// without it would widen what the image accepts.
func caBundle() ([]byte, error) {
	var b bytes.Buffer
	n := 0
	for root := range bundle.Roots() {
		if root.Constraint != nil {
			continue
		}
		if err := pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: root.Certificate}); err != nil {
			return nil, fmt.Errorf("encoding a CA certificate: %w", err)
		}
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("the fallback bundle holds no unconstrained root")
	}
	return b.Bytes(), nil
}
