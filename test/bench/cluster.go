package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// kwokStages are the node and pod lifecycles kwok plays: node-initialize and
// node-heartbeat-with-lease from kwok's "fast" set, pod-ready after a 1 s
// delay (kwok's fast stage is instant), pod-delete when a pod terminates.
//
//go:embed kwok-stages.yaml
var kwokStages []byte

// Users of the bench's control plane. Each client has its own certificate, so
// the audit log tells who made each request.
const (
	userAdmin     = "bench-admin"
	userOperator  = "memcached-operator"
	userReference = "bench-reference"
	// userMarker makes one read at the end of a measured window; its audit
	// line proves that every earlier request of the window is in the log.
	userMarker = "bench-marker"
)

// auditPolicy logs, once each, the requests of the two clients under test
// (and the marker); nothing else, so the log stays small at N=1000.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  users: ["` + userOperator + `", "` + userReference + `", "` + userMarker + `"]
- level: None
`

// proc is a process the bench started and must stop.
type proc struct {
	Name string `json:"name"`
	PID  int    `json:"pid"`
	// Start is the process' start time in clock ticks since boot
	// (/proc/PID/stat field 22): with the PID it names one process, so a
	// reused PID is never signalled.
	Start uint64 `json:"start"`
	// Cmd is its command line, to start it again (freshControlPlane).
	Cmd []string `json:"cmd"`
}

// clusterState is _output/bench/cluster/state.json: what cluster-down needs.
type clusterState struct {
	Dir   string         `json:"dir"`
	Ports map[string]int `json:"ports"`
	Procs []proc         `json:"procs"`
	Nodes int            `json:"nodes"`
}

func (s *clusterState) kubeconfig(user string) string {
	return filepath.Join(s.Dir, "kubeconfig-"+user)
}

func (s *clusterState) auditLog() string { return filepath.Join(s.Dir, "audit.log") }

func statePath(dir string) string { return filepath.Join(dir, "state.json") }

func loadState(dir string) (*clusterState, error) {
	data, err := os.ReadFile(statePath(dir))
	if err != nil {
		return nil, err
	}
	s := &clusterState{}
	return s, json.Unmarshal(data, s)
}

func (s *clusterState) save() error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(statePath(s.Dir), data, 0o600)
}

// givenPorts are the ports freePort handed out: a port closed again is
// free to the kernel, which may offer it twice (the operator's metrics and
// pprof listeners once got the same one).
var (
	givenMu    sync.Mutex
	givenPorts = map[int]bool{}
)

// freePort asks the kernel for a free loopback port that this process has
// not handed out yet. 16443 is the project testbed's API server port and
// never used here, even if free now.
func freePort() (int, error) {
	givenMu.Lock()
	defer givenMu.Unlock()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if port != 16443 && !givenPorts[port] {
			givenPorts[port] = true
			return port, nil
		}
	}
	return 0, errors.New("no free port")
}

// clusterUp starts etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and kwok on loopback, creates the simulated nodes and waits
// until a Deployment really gets a Ready pod.
func clusterUp(ctx context.Context, dir, binDir string, nodes int) (*clusterState, error) {
	if s, err := loadState(dir); err == nil && s.alive() {
		logf("cluster already up (%s)", statePath(dir))
		return s, nil
	}
	// Leftovers of a crashed run: stop what still runs, start clean.
	if err := clusterDown(dir); err != nil {
		return nil, err
	}
	start := time.Now()
	for _, d := range []string{"pki", "logs", "etcd", "certs"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return nil, err
		}
	}
	s := &clusterState{Dir: dir, Ports: map[string]int{}, Nodes: nodes}
	for _, name := range []string{"etcd-client", "etcd-peer", "apiserver", "controller-manager", "scheduler", "kwok"} {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		s.Ports[name] = p
	}
	if err := s.save(); err != nil {
		return nil, err
	}
	if _, err := s.writePKI(); err != nil {
		return nil, err
	}
	bin := func(name string) string { return filepath.Join(binDir, name) }

	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", s.Ports["etcd-client"])
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", s.Ports["etcd-peer"])
	// No fsync: the bench measures the operator and the API server, not this
	// VM's disk; the reference runs on the same etcd, so ratios hold.
	if err := s.start("etcd", bin("etcd"), "--name=bench", "--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=bench="+peerURL, "--listen-metrics-urls=",
		"--quota-backend-bytes=8589934592", "--unsafe-no-fsync", "--log-level=warn"); err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, "etcd", etcdURL+"/health", nil, time.Minute); err != nil {
		return nil, err
	}

	apiURL := fmt.Sprintf("https://127.0.0.1:%d", s.Ports["apiserver"])
	policyFile := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policyFile, []byte(auditPolicy), 0o600); err != nil {
		return nil, err
	}
	p := func(name string) string { return filepath.Join(dir, "pki", name) }
	if err := s.start("kube-apiserver", bin("kube-apiserver"),
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", s.Ports["apiserver"]),
		// Published in the kubernetes Service's endpoints only; never bound
		// nor dialled (TEST-NET-1). Loopback is refused as an advertise address.
		"--advertise-address=192.0.2.1", "--endpoint-reconciler-type=none",
		"--service-cluster-ip-range=10.96.0.0/16",
		"--tls-cert-file="+p("apiserver.crt"), "--tls-private-key-file="+p("apiserver.key"),
		"--client-ca-file="+p("ca.crt"),
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+p("sa.key"), "--service-account-signing-key-file="+p("sa.key"),
		"--requestheader-client-ca-file="+p("front-proxy-ca.crt"),
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User", "--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file="+p("front-proxy-client.crt"), "--proxy-client-key-file="+p("front-proxy-client.key"),
		"--audit-policy-file="+policyFile, "--audit-log-path="+s.auditLog(),
		"--audit-log-format=json", "--audit-log-maxsize=0", "--audit-log-mode=blocking",
		// Without it open watches hold a stopping API server until its
		// 60 s request timeout, past the grace a fresh turn gives it.
		"--shutdown-watch-termination-grace-period=2s",
		"--allow-privileged=true", "--v=1"); err != nil {
		return nil, err
	}
	if err := s.waitAPIServer(ctx); err != nil {
		return nil, err
	}

	if err := s.start("kube-controller-manager", bin("kube-controller-manager"),
		"--kubeconfig="+s.kubeconfig("kube-controller-manager"),
		"--authentication-kubeconfig="+s.kubeconfig("kube-controller-manager"),
		"--authorization-kubeconfig="+s.kubeconfig("kube-controller-manager"),
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", s.Ports["controller-manager"]),
		"--cert-dir="+filepath.Join(dir, "certs"),
		"--leader-elect=false", "--use-service-account-credentials=false",
		"--service-account-private-key-file="+p("sa.key"), "--root-ca-file="+p("ca.crt"),
		"--cluster-signing-cert-file="+p("ca.crt"), "--cluster-signing-key-file="+p("ca.key"),
		// A real control plane's defaults (20 QPS) would make the
		// controller-manager, not the operator, the bottleneck at N=1000.
		"--kube-api-qps=1000", "--kube-api-burst=2000",
		// The operator reads ready pods from EndpointSlices (what clients
		// resolve), the reference reads pods: the slice controller gets
		// the workers the deployment and replicaset controllers have, so
		// that the slices keep pace with the rollouts (the bench reports
		// their lag; 0 s at N=1000).
		"--concurrent-deployment-syncs=10", "--concurrent-replicaset-syncs=10",
		"--concurrent-service-endpoint-syncs=10", "--concurrent-gc-syncs=20", "--concurrent-namespace-syncs=10", "--v=1"); err != nil {
		return nil, err
	}
	schedConfig := filepath.Join(dir, "scheduler.yaml")
	if err := os.WriteFile(schedConfig, fmt.Appendf(nil, `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
  qps: 1000
  burst: 2000
leaderElection:
  leaderElect: false
`, s.kubeconfig("kube-scheduler")), 0o600); err != nil {
		return nil, err
	}
	if err := s.start("kube-scheduler", bin("kube-scheduler"), "--config="+schedConfig,
		"--authentication-kubeconfig="+s.kubeconfig("kube-scheduler"),
		"--authorization-kubeconfig="+s.kubeconfig("kube-scheduler"),
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", s.Ports["scheduler"]),
		"--cert-dir="+filepath.Join(dir, "certs"), "--v=1"); err != nil {
		return nil, err
	}
	kwokConfig := filepath.Join(dir, "kwok.yaml")
	if err := os.WriteFile(kwokConfig, kwokStages, 0o600); err != nil {
		return nil, err
	}
	if err := s.start("kwok", bin("kwok"), "--kubeconfig="+s.kubeconfig("kwok"), "--config="+kwokConfig,
		"--manage-all-nodes=true", "--cidr=10.0.0.1/16", "--node-ip=10.0.0.1",
		"--node-lease-duration-seconds=40",
		fmt.Sprintf("--server-address=127.0.0.1:%d", s.Ports["kwok"])); err != nil {
		return nil, err
	}
	if err := s.waitSchedulers(ctx); err != nil {
		return nil, err
	}

	c, err := newClient(s, userAdmin, 100)
	if err != nil {
		return nil, err
	}
	if err := createNodes(ctx, c, nodes); err != nil {
		return nil, err
	}
	if err := smokeTest(ctx, c, "bench-smoke"); err != nil {
		return nil, err
	}
	logf("cluster up in %s: %d kwok nodes, API server %s, admin kubeconfig %s",
		time.Since(start).Round(100*time.Millisecond), nodes, apiURL, s.kubeconfig(userAdmin))
	return s, nil
}

// waitAPIServer waits until the API server is ready.
func (s *clusterState) waitAPIServer(ctx context.Context) error {
	adminTLS, err := pkiFiles{dir: filepath.Join(s.Dir, "pki")}.clientTLS(userAdmin)
	if err != nil {
		return err
	}
	return waitHTTP(ctx, "kube-apiserver", fmt.Sprintf("https://127.0.0.1:%d/readyz", s.Ports["apiserver"]), adminTLS, 2*time.Minute)
}

// waitSchedulers waits until the controller manager and the scheduler are
// healthy.
func (s *clusterState) waitSchedulers(ctx context.Context) error {
	insecure := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // health probe of a loopback component with a self-signed cert
	for _, c := range []string{"controller-manager", "scheduler"} {
		url := fmt.Sprintf("https://127.0.0.1:%d/healthz", s.Ports[c])
		if err := waitHTTP(ctx, c, url, insecure, time.Minute); err != nil {
			return err
		}
	}
	return nil
}

// pkiFiles remembers the CA, to make client TLS configs from its files.
type pkiFiles struct{ dir string }

func (p pkiFiles) clientTLS(user string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(filepath.Join(p.dir, user+".crt"), filepath.Join(p.dir, user+".key"))
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(filepath.Join(p.dir, "ca.crt"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// writePKI makes the cluster CA, the API server's serving certificate, one
// client certificate and kubeconfig per user, the service-account key and
// the front-proxy pair.
func (s *clusterState) writePKI() (pkiFiles, error) {
	dir := filepath.Join(s.Dir, "pki")
	ca, err := newCA("bench-ca")
	if err != nil {
		return pkiFiles{}, err
	}
	if err := writePair(ca, dir, "ca"); err != nil {
		return pkiFiles{}, err
	}
	serving, err := newServing(ca, "kube-apiserver",
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"}, net.IPv4(10, 96, 0, 1))
	if err != nil {
		return pkiFiles{}, err
	}
	if err := writePair(serving, dir, "apiserver"); err != nil {
		return pkiFiles{}, err
	}
	// The service-account signing key: any private key; the pair's
	// certificate is not used.
	sa, err := newCA("service-accounts")
	if err != nil {
		return pkiFiles{}, err
	}
	if err := os.WriteFile(filepath.Join(dir, "sa.key"), sa.KeyPEM, 0o600); err != nil {
		return pkiFiles{}, err
	}
	fpCA, err := newCA("front-proxy-ca")
	if err != nil {
		return pkiFiles{}, err
	}
	if err := writePair(fpCA, dir, "front-proxy-ca"); err != nil {
		return pkiFiles{}, err
	}
	fpClient, err := newClientCert(fpCA, "front-proxy-client")
	if err != nil {
		return pkiFiles{}, err
	}
	if err := writePair(fpClient, dir, "front-proxy-client"); err != nil {
		return pkiFiles{}, err
	}
	// Every client is cluster-admin: the bench measures request counts and
	// times, not RBAC.
	users := map[string]string{
		userAdmin: "system:masters", userOperator: "system:masters", userReference: "system:masters",
		userMarker: "system:masters", "kwok": "system:masters",
		"kube-controller-manager": "system:masters", "kube-scheduler": "system:masters",
	}
	server := fmt.Sprintf("https://127.0.0.1:%d", s.Ports["apiserver"])
	for user, group := range users {
		kp, err := newClientCert(ca, user, group)
		if err != nil {
			return pkiFiles{}, err
		}
		if err := writePair(kp, dir, user); err != nil {
			return pkiFiles{}, err
		}
		cfg := clientcmdapi.NewConfig()
		cfg.Clusters["bench"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca.CertPEM}
		cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: kp.CertPEM, ClientKeyData: kp.KeyPEM}
		cfg.Contexts["bench"] = &clientcmdapi.Context{Cluster: "bench", AuthInfo: user}
		cfg.CurrentContext = "bench"
		if err := clientcmd.WriteToFile(*cfg, s.kubeconfig(user)); err != nil {
			return pkiFiles{}, err
		}
	}
	return pkiFiles{dir: dir}, nil
}

// start runs a component in its own process group, detached, logging to
// logs/NAME.log, and records it in the state file before anything else.
func (s *clusterState) start(name, path string, args ...string) error {
	logFile, err := os.OpenFile(filepath.Join(s.Dir, "logs", name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer func() { _ = logFile.Close() }()
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	st, err := procStartTime(cmd.Process.Pid)
	if err != nil {
		return err
	}
	s.Procs = append(s.Procs, proc{Name: name, PID: cmd.Process.Pid, Start: st, Cmd: append([]string{path}, args...)})
	if err := s.save(); err != nil {
		return err
	}
	// Reaped by whoever adopts it once this command exits; a goroutine reaps
	// it meanwhile, so an early crash does not leave a zombie that looks alive.
	go func() { _ = cmd.Wait() }()
	logf("started %s (pid %d)", name, cmd.Process.Pid)
	return nil
}

// stopNamed stops the named processes, newest first, and forgets them
// (state.json included). It returns them in the order they started, with
// the command lines startAgain needs.
func (s *clusterState) stopNamed(names []string, grace time.Duration) ([]proc, error) {
	// Checked before anything stops: a control plane half stopped is worse
	// than one not refreshed.
	for _, p := range s.Procs {
		if slices.Contains(names, p.Name) && len(p.Cmd) == 0 {
			return nil, fmt.Errorf("%s was started without its command line recorded: make bench-cluster-down bench-cluster-up", p.Name)
		}
	}
	var stopped []proc
	for i := len(s.Procs) - 1; i >= 0; i-- {
		p := s.Procs[i]
		if !slices.Contains(names, p.Name) {
			continue
		}
		p.stop(grace)
		stopped = append([]proc{p}, stopped...)
		s.Procs = slices.Delete(s.Procs, i, i+1)
	}
	return stopped, s.save()
}

// startAgain starts stopped processes again in order, each with its
// command line, waiting for the API server to be ready before what follows it.
func (s *clusterState) startAgain(ctx context.Context, stopped []proc) error {
	for _, p := range stopped {
		if err := s.start(p.Name, p.Cmd[0], p.Cmd[1:]...); err != nil {
			return err
		}
		if p.Name == "kube-apiserver" {
			if err := s.waitAPIServer(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// alive tells whether every recorded process still runs.
func (s *clusterState) alive() bool {
	if len(s.Procs) == 0 {
		return false
	}
	for _, p := range s.Procs {
		if !p.running() {
			return false
		}
	}
	return true
}

// procStartTime reads field 22 of /proc/PID/stat.
func procStartTime(pid int) (uint64, error) {
	f, err := procStatFields(pid)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// procStatFields are /proc/PID/stat's fields after the command name
// (field 3, the state, is index 0).
func procStatFields(pid int) ([]string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return nil, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	return strings.Fields(string(data[i+1:])), nil
}

// running is true while the recorded process (same PID, same start time)
// exists and is not a zombie.
func (p proc) running() bool {
	f, err := procStatFields(p.PID)
	if err != nil || len(f) < 20 || f[0] == "Z" {
		return false
	}
	st, err := strconv.ParseUint(f[19], 10, 64)
	return err == nil && st == p.Start
}

// stop sends SIGTERM, waits for the process to go, then SIGKILL.
func (p proc) stop(grace time.Duration) {
	if !p.running() {
		return
	}
	_ = syscall.Kill(p.PID, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for p.running() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond) // polling the condition "process gone"
	}
	if p.running() {
		logf("%s (pid %d) ignored SIGTERM for %s: killing", p.Name, p.PID, grace)
		_ = syscall.Kill(p.PID, syscall.SIGKILL)
		for p.running() {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// clusterDown stops every process of the state file, newest first, and
// removes the cluster's data. Without a state file there is nothing to do,
// so it is safe to run twice.
func clusterDown(dir string) error {
	s, err := loadState(dir)
	if errors.Is(err, os.ErrNotExist) {
		return os.RemoveAll(dir)
	}
	if err != nil {
		return err
	}
	for i := len(s.Procs) - 1; i >= 0; i-- {
		s.Procs[i].stop(20 * time.Second)
	}
	for _, p := range s.Procs {
		if p.running() {
			return fmt.Errorf("%s (pid %d) still runs", p.Name, p.PID)
		}
	}
	logf("cluster stopped (%d processes)", len(s.Procs))
	return os.RemoveAll(dir)
}

// waitHTTP polls url until it answers 200.
func waitHTTP(ctx context.Context, what, url string, tlsConfig *tls.Config, timeout time.Duration) error {
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	var last string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		_ = resp.Body.Close()
		last = resp.Status
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("%s not ready at %s (last: %s): %w", what, url, last, err)
	}
	return nil
}

// createNodes registers the simulated nodes kwok manages, then waits until
// kwok has made them all Ready.
func createNodes(ctx context.Context, c client.Client, n int) error {
	for i := range n {
		name := fmt.Sprintf("kwok-node-%d", i)
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      map[string]string{"type": "kwok", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux"},
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
		}}
		if err := c.Create(ctx, node); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating node %s: %w", name, err)
		}
	}
	return pollFor(ctx, "nodes Ready", 2*time.Minute, func(ctx context.Context) (bool, error) {
		nodes := &corev1.NodeList{}
		if err := c.List(ctx, nodes); err != nil {
			return false, err
		}
		ready := 0
		for _, n := range nodes.Items {
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return ready >= n, nil
	})
}

// smokeTest proves the chain Deployment → ReplicaSet → scheduled pod →
// Ready (kwok) → Available before any measurement relies on it.
// The Deployment is named name (each smoke test its own: the last one's may
// still be going).
func smokeTest(ctx context.Context, c client.Client, name string) error {
	labels := map[string]string{"app": name}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.invalid/none"}}},
			},
		},
	}
	// The default ServiceAccount appears a moment after the API server.
	if err := pollFor(ctx, "default ServiceAccount", time.Minute, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "default"}, &corev1.ServiceAccount{})
		return err == nil, client.IgnoreNotFound(err)
	}); err != nil {
		return err
	}
	if err := c.Create(ctx, dep); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating smoke Deployment: %w", err)
	}
	if err := pollFor(ctx, "smoke Deployment available", 2*time.Minute, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(dep), dep); err != nil {
			return false, err
		}
		return dep.Status.AvailableReplicas == 2, nil
	}); err != nil {
		return err
	}
	return client.IgnoreNotFound(c.Delete(ctx, dep, client.PropagationPolicy(metav1.DeletePropagationForeground)))
}
