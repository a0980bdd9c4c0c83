package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/go-logr/logr"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/capov/capov/test/capi"
	"github.com/capov/capov/test/envtest"
)

// Management is a further management cluster next to a Stack's, sharing its oVirt simulator
// and workload cluster, as the target of `clusterctl move`: its own kube-apiserver and etcd
// with the CAPOV and Cluster API CRDs and the admission webhook configuration, a webhook and
// a manager process, and Cluster API's core reconcilers in-process.
type Management struct {
	// Name labels its processes and files.
	Name string
	// Env is the control plane.
	Env *envtest.Environment
	// KubeconfigPath reaches it.
	KubeconfigPath string
	// Manager and Webhook are its processes; ManagerMetricsAddr the manager's metrics endpoint.
	Manager, Webhook   *Process
	ManagerMetricsAddr string
	// CAPI runs Cluster API's core reconcilers when the stack runs them as a process (else they
	// run in the test process).
	CAPI *Process
	// IPAM is the in-cluster IPAM provider when Stack.StartIPAM started one.
	IPAM *Process

	webhookPort *heldPort
	cancel      context.CancelFunc
	done        chan struct{}
}

// StartManagement starts another management cluster with the stack's binaries; managerArgs
// are appended to the manager's flags and webhookArgs to the webhook's.
func (s *Stack) StartManagement(ctx context.Context, name string, log logr.Logger, managerArgs, webhookArgs []string) (_ *Management, reterr error) {
	root, err := envtest.RepoRoot()
	if err != nil {
		return nil, err
	}
	m := &Management{Name: name}
	defer func() {
		if reterr != nil {
			m.Stop()
		}
	}()
	if m.webhookPort, err = newHeldPort(s.opts.Binaries["webhook"] != ""); err != nil {
		return nil, err
	}
	webhookPort := m.webhookPort.port()
	manifests := s.opts.WebhookManifests
	if manifests == "" {
		manifests = filepath.Join(root, "config", "webhook", "manifests.yaml")
	}
	if m.Env, err = envtest.Start(ctx, envtest.Options{Webhooks: crenvtest.WebhookInstallOptions{
		Paths: []string{manifests}, LocalServingHost: "127.0.0.1", LocalServingPort: webhookPort,
	}}); err != nil {
		return nil, fmt.Errorf("starting management cluster %s: %w", name, err)
	}
	kc, err := m.Env.Kubeconfig(name)
	if err != nil {
		return nil, err
	}
	m.KubeconfigPath = filepath.Join(s.opts.WorkDir, "kubeconfig-"+name)
	if err := os.WriteFile(m.KubeconfigPath, kc, 0o600); err != nil {
		return nil, err
	}

	webhookBin := s.opts.Binaries["webhook"]
	if webhookBin == "" {
		webhookBin = filepath.Join(s.opts.WorkDir, "bin", "webhook")
	}
	if m.Webhook, _, err = startBinary(ctx, binaryStart{
		name: name + "-webhook", bin: webhookBin, legacy: webhookBin == s.opts.Binaries["webhook"],
		args:    append([]string{"--kubeconfig=" + m.KubeconfigPath, "--cert-dir=" + m.Env.Env.WebhookInstallOptions.LocalServingCertDir}, webhookArgs...),
		logPath: filepath.Join(s.opts.WorkDir, "logs", name+"-webhook.log"), admission: m.webhookPort,
	}); err != nil {
		return nil, err
	}
	if m.Manager, m.ManagerMetricsAddr, err = startBinary(ctx, binaryStart{
		name: name + "-manager", bin: s.ManagerBin, legacy: s.ManagerBin == s.opts.Binaries["manager"],
		args: append([]string{"--kubeconfig=" + m.KubeconfigPath, "--credentials-namespace=capov-system"}, managerArgs...),
		env:  []string{"POD_NAMESPACE=capov-system"}, logPath: filepath.Join(s.opts.WorkDir, "logs", name+"-manager.log"),
	}); err != nil {
		return nil, err
	}

	// Cluster API's reconcilers run like the stack's: as a process when it runs them so.
	if s.CAPI != nil {
		if m.CAPI, err = Start(name+"-capi-core", filepath.Join(s.opts.WorkDir, "bin", "capi-core"), []string{"--kubeconfig=" + m.KubeconfigPath},
			nil, filepath.Join(s.opts.WorkDir, "logs", name+"-capi-core.log")); err != nil {
			return nil, err
		}
		return m, nil
	}
	capiCtx, cancel := context.WithCancel(context.Background())
	m.cancel, m.done = cancel, make(chan struct{})
	go func() {
		defer close(m.done)
		if err := capi.Run(capiCtx, m.Env.Config, log.WithName(name+"-capi"), capi.Options{}); err != nil && capiCtx.Err() == nil {
			log.Error(err, "Cluster API core reconcilers stopped", "management", name)
		}
	}()
	return m, nil
}

// Stop stops the reconcilers, the processes (killed: nothing is left to finish) and the
// control plane.
func (m *Management) Stop() {
	if m.cancel != nil {
		m.cancel()
		<-m.done
		m.cancel = nil
	}
	for _, p := range []*Process{m.IPAM, m.CAPI, m.Manager, m.Webhook} {
		if p != nil {
			p.Kill()
		}
	}
	if m.Env != nil {
		_ = m.Env.Stop()
	}
	if m.webhookPort != nil {
		m.webhookPort.close()
		m.webhookPort = nil
	}
}
